/* Makes the GGUF fuzz seed corpus from the shared test data (run by the build; the corpus lives in the
 * build folder, never in the repository):
 *   small-X   a small valid file with X's keys and value types (arrays cut to a few elements) and X's
 *             first tensors, each shrunk to one block of its type, with the original bytes
 *   prefix-X  the first 4 KiB of X as it is
 *   all-types a file with every value type, nested arrays and several tensor types
 * usage: fuzz_gguf_seeds TESTDATA_DIR OUT_DIR */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "gguf_write.h"

#define SEED_ARRAY_MAX 6
#define SEED_TENSORS_MAX 8
#define SEED_PREFIX_BYTES 4096

/* A copy of `v` with arrays (at every level) cut to SEED_ARRAY_MAX elements; `items` is scratch. */
static gguf_value shrink(const gguf_value *v, gguf_value *scratch, int depth)
{
    gguf_value out = *v;
    if (v->type != GGUF_ARRAY)
        return out;
    if (out.v.arr.n > SEED_ARRAY_MAX)
        out.v.arr.n = SEED_ARRAY_MAX;
    if (out.v.arr.type == GGUF_ARRAY && depth < 8) {
        gguf_value *items = scratch + (size_t)depth * SEED_ARRAY_MAX;
        for (uint64_t i = 0; i < out.v.arr.n; i++)
            items[i] = shrink(&v->v.arr.items[i], scratch, depth + 1);
        out.v.arr.items = items;
    }
    return out;
}

static int write_small(const char *src, const char *dst)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(src, &err);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    gguf_writer *w = gguf_writer_open(dst, &err);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        gguf_close(g);
        return -1;
    }
    gguf_value scratch[9 * SEED_ARRAY_MAX];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv kv = g->kv[i];
        kv.value = shrink(&g->kv[i].value, scratch, 0);
        gguf_writer_copy_kv(w, &kv);
    }
    uint64_t n_t = g->n_tensors < SEED_TENSORS_MAX ? g->n_tensors : SEED_TENSORS_MAX;
    for (uint64_t i = 0; i < n_t; i++) {
        const gguf_tensor *t = &g->tensors[i];
        uint64_t ne[4] = {woolly_type_get(t->type)->block_elems, 1, 1, 1};
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne);
    }
    int rc = gguf_writer_write_header(w, &err);
    for (uint64_t i = 0; i < n_t && rc == 0; i++)
        rc = gguf_writer_write_data(w, g->tensors[i].data, woolly_type_get(g->tensors[i].type)->block_bytes,
                                    &err);
    if (gguf_writer_close(w, &err) != 0 || rc != 0) {
        fprintf(stderr, "%s\n", err.msg);
        rc = -1;
    }
    gguf_close(g);
    return rc;
}

static int write_prefix(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) {
        fprintf(stderr, "fuzz_gguf_seeds: cannot copy %s to %s: %s\n", src, dst, strerror(errno));
        if (in)
            fclose(in);
        if (out)
            fclose(out);
        return -1;
    }
    static char buf[SEED_PREFIX_BYTES];
    size_t n = fread(buf, 1, sizeof buf, in);
    int rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    fclose(in);
    return fclose(out) == 0 ? rc : -1;
}

static int write_all_types(const char *dst)
{
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(dst, &err);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    static const uint8_t RAW[16] = {1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x80, 0x3f, 1, 0, 1, 0};
    for (int t = GGUF_U8; t <= GGUF_F64; t++) {
        char key[32];
        gguf_value v = {.type = (enum gguf_vtype)t, .v.u64 = 1};
        if (t == GGUF_STRING)
            v.v.str = (gguf_str){"str", 3};
        if (t == GGUF_ARRAY)
            v.v.arr = (gguf_array){.type = GGUF_U8, .n = 16, .data = RAW};
        if (t == GGUF_F32 || t == GGUF_F64)
            v.v.f64 = 0.5;
        snprintf(key, sizeof key, "k.%s", gguf_vtype_name((enum gguf_vtype)t));
        gguf_writer_copy_kv(w, &(gguf_kv){{key, strlen(key)}, v});
    }
    gguf_str strs[2] = {{"a", 1}, {"bc", 2}};
    gguf_value inner[2] = {{.type = GGUF_ARRAY, .v.arr = {.type = GGUF_STRING, .n = 2, .strs = strs}},
                           {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_BOOL, .n = 2, .data = RAW}}};
    gguf_value mid[1] = {{.type = GGUF_ARRAY, .v.arr = {.type = GGUF_ARRAY, .n = 2, .items = inner}}};
    gguf_value nested = {.type = GGUF_ARRAY, .v.arr = {.type = GGUF_ARRAY, .n = 1, .items = mid}};
    gguf_writer_copy_kv(w, &(gguf_kv){{"k.nested", 8}, nested});
    const enum woolly_type types[] = {WOOLLY_TYPE_F32,  WOOLLY_TYPE_F16,  WOOLLY_TYPE_Q8_0,
                                      WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K, WOOLLY_TYPE_BF16};
    static uint8_t zeros[512];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu.weight", i);
        uint64_t ne[2] = {woolly_type_get(types[i])->block_elems * (types[i] <= WOOLLY_TYPE_F16 ? 3 : 1), 2};
        gguf_writer_add_tensor(w, name, types[i], 2, ne);
    }
    int rc = gguf_writer_write_header(w, &err);
    for (size_t i = 0; i < sizeof types / sizeof types[0] && rc == 0; i++) {
        const woolly_type_info *ti = woolly_type_get(types[i]);
        size_t n = (size_t)ti->block_bytes * 2 * (types[i] <= WOOLLY_TYPE_F16 ? 3 : 1);
        rc = gguf_writer_write_data(w, zeros, n, &err);
    }
    if (gguf_writer_close(w, &err) != 0 || rc != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fuzz_gguf_seeds TESTDATA_DIR OUT_DIR\n");
        return 2;
    }
    if (mkdir(argv[2], 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_gguf_seeds: cannot create %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    int failures = 0, made = 0;
    const char *subdirs[] = {"models", "vocab"};
    for (int s = 0; s < 2; s++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", argv[1], subdirs[s]);
        DIR *d = opendir(dir);
        if (!d) {
            fprintf(stderr, "fuzz_gguf_seeds: cannot read %s: %s\n", dir, strerror(errno));
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 5, ".gguf") != 0)
                continue;
            char src[8192], dst[8192];
            snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
            snprintf(dst, sizeof dst, "%s/small-%s", argv[2], e->d_name);
            failures += write_small(src, dst) != 0;
            snprintf(dst, sizeof dst, "%s/prefix-%s", argv[2], e->d_name);
            failures += write_prefix(src, dst) != 0;
            made += 2;
        }
        closedir(d);
    }
    char dst[8192];
    snprintf(dst, sizeof dst, "%s/all-types.gguf", argv[2]);
    failures += write_all_types(dst) != 0;
    made++;
    printf("fuzz_gguf_seeds: %d seeds in %s, %d failures\n", made, argv[2], failures);
    return failures ? 1 : 0;
}
