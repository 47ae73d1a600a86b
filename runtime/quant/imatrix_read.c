#include "imatrix_read.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

typedef struct {
    char *name; /* the weight tensor's name */
    uint64_t ne0, n_mat;
    float *importance; /* [n_mat][ne0] */
} imatrix_entry;

struct woolly_imatrix_file {
    size_t n;
    imatrix_entry *entries;
};

static const char SUM2[] = ".in_sum2", COUNTS[] = ".counts";

void woolly_imatrix_file_free(woolly_imatrix_file *im)
{
    if (!im)
        return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->entries[i].name);
        free(im->entries[i].importance);
    }
    free(im->entries);
    free(im);
}

size_t woolly_imatrix_file_count(const woolly_imatrix_file *im)
{
    return im ? im->n : 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* One "<name>.in_sum2" tensor and its counts into e. */
static int read_entry(const gguf_file *g, const gguf_tensor *sum, const char *path, imatrix_entry *e,
                      woolly_error *err)
{
    const size_t len = strlen(sum->name) - (sizeof SUM2 - 1);
    e->name = malloc(len + 1);
    char *cname = malloc(len + sizeof COUNTS);
    if (!e->name || !cname) {
        free(cname);
        return woolly_fail(err, "out of memory reading %s", path);
    }
    memcpy(e->name, sum->name, len);
    e->name[len] = '\0';
    memcpy(cname, sum->name, len);
    memcpy(cname + len, COUNTS, sizeof COUNTS);
    const gguf_tensor *cnt = gguf_find_tensor(g, cname);
    free(cname);

    e->ne0 = sum->ne[0];
    e->n_mat = sum->ne[1] * sum->ne[2] * sum->ne[3];
    if (sum->type != WOOLLY_TYPE_F32)
        return woolly_fail(err, "importance matrix %s: '%s' is %s, not F32", path, sum->name,
                           woolly_type_get(sum->type)->name);
    if (!cnt)
        return woolly_fail(err, "importance matrix %s: '%s' has no '%s%s'", path, sum->name, e->name, COUNTS);
    if (cnt->type != WOOLLY_TYPE_F32 || cnt->ne[0] * cnt->ne[1] * cnt->ne[2] * cnt->ne[3] != e->n_mat)
        return woolly_fail(err, "importance matrix %s: '%s%s' is not %llu F32 counts", path, e->name, COUNTS,
                           (unsigned long long)e->n_mat);
    if (e->ne0 == 0 || e->n_mat == 0 || e->ne0 * e->n_mat > ((uint64_t)1 << 32))
        return woolly_fail(err, "importance matrix %s: '%s' has an unusable shape", path, sum->name);
    e->importance = malloc(sizeof(float) * (size_t)(e->ne0 * e->n_mat));
    if (!e->importance)
        return woolly_fail(err, "out of memory reading %s", path);
    const float *s = sum->data, *c = cnt->data;
    for (uint64_t m = 0; m < e->n_mat; m++) {
        if (!(c[m] >= 0) || !isfinite(c[m]))
            return woolly_fail(err, "importance matrix %s: '%s%s' holds %g", path, e->name, COUNTS, c[m]);
        for (uint64_t j = 0; j < e->ne0; j++) {
            const float v = s[m * e->ne0 + j];
            if (!(v >= 0) || !isfinite(v))
                return woolly_fail(err, "importance matrix %s: '%s' holds %g (column %llu)", path, sum->name,
                                   v, (unsigned long long)j);
            /* an expert no row reached: no information, every column alike (llama-quantize's choice) */
            e->importance[m * e->ne0 + j] = c[m] > 0 ? v / c[m] : 1.0f;
        }
    }
    return 0;
}

woolly_imatrix_file *woolly_imatrix_file_read(const char *path, woolly_error *err)
{
    woolly_error gerr = {{0}};
    gguf_file *g = gguf_open(path, &gerr);
    if (!g) {
        woolly_fail(err, "importance matrix: %s", gerr.msg);
        return NULL;
    }
    gguf_str type;
    woolly_error ignored = {{0}};
    if (gguf_get_str(g, "general.type", &type, &ignored) &&
        !(type.len == 7 && memcmp(type.ptr, "imatrix", 7) == 0)) {
        woolly_fail(err, "%s is not an importance matrix (general.type is '%.*s')", path,
                    (int)(type.len < 64 ? type.len : 64), type.ptr);
        gguf_close(g);
        return NULL;
    }
    size_t n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        n += ends_with(g->tensors[i].name, SUM2);
    woolly_imatrix_file *im = calloc(1, sizeof *im);
    if (!im || n == 0) {
        if (im)
            woolly_fail(err, "%s is not an importance matrix (no '<tensor>%s' tensors)", path, SUM2);
        else
            woolly_fail(err, "out of memory reading %s", path);
        free(im);
        gguf_close(g);
        return NULL;
    }
    im->entries = calloc(n, sizeof *im->entries);
    int status = im->entries ? 0 : woolly_fail(err, "out of memory reading %s", path);
    for (uint64_t i = 0; i < g->n_tensors && status == 0; i++)
        if (ends_with(g->tensors[i].name, SUM2))
            status = read_entry(g, &g->tensors[i], path, &im->entries[im->n++], err);
    gguf_close(g);
    if (status != 0) {
        woolly_imatrix_file_free(im);
        return NULL;
    }
    return im;
}

int woolly_imatrix_file_find(const woolly_imatrix_file *im, const char *name, uint64_t ne0, uint64_t n_mat,
                             const float **out, woolly_error *err)
{
    *out = NULL;
    for (size_t i = 0; im && i < im->n; i++) {
        const imatrix_entry *e = &im->entries[i];
        if (strcmp(e->name, name) != 0)
            continue;
        if (e->ne0 != ne0 || e->n_mat != n_mat)
            return woolly_fail(
                err,
                "importance matrix: tensor '%s' has %llu columns x %llu matrices, the importance "
                "matrix %llu x %llu (made for another model?)",
                name, (unsigned long long)ne0, (unsigned long long)n_mat, (unsigned long long)e->ne0,
                (unsigned long long)e->n_mat);
        *out = e->importance;
        return 0;
    }
    return 0;
}
