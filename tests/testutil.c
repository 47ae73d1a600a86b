#include "testutil.h"

#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"

const char *tu_data(const char *rel)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", WOOLLY_TESTDATA, rel);
    return path;
}

char *tu_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s (the shared test data must be beside the repository)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf != NULL);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
    fclose(f);
    buf[n] = 0;
    if (size)
        *size = (size_t)n;
    return buf;
}

void *tu_heap_copy(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    cr_assert(q != NULL);
    if (n)
        memcpy(q, p, n);
    return q;
}

const char *tu_tmp_path(const char *name)
{
    static char path[8192];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tmp", WOOLLY_BUILD_DIR);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%d-%.3000s", dir, (int)getpid(), name);
    return path;
}

static char *slurp_and_remove(const char *path)
{
    char *s = tu_read_file(path, NULL);
    remove(path);
    return s;
}

int tu_run_shell(const char *cmdline, char **out, char **err)
{
    char o[8192], e[8192], cmd[32768];
    snprintf(o, sizeof o, "%s", tu_tmp_path("shell.out"));
    snprintf(e, sizeof e, "%s", tu_tmp_path("shell.err"));
    snprintf(cmd, sizeof cmd, "%s >%s 2>%s </dev/null", cmdline, o, e);
    int st = system(cmd);
    char *so = slurp_and_remove(o), *se = slurp_and_remove(e);
    if (out)
        *out = so;
    else
        free(so);
    if (err)
        *err = se;
    else
        free(se);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int tu_run_cli(const char *args, char **out, char **err)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s", WOOLLY_CLI, args);
    return tu_run_shell(cmd, out, err);
}

void tu_cli_fails(const char *args, const char *message_part)
{
    char *so, *se;
    const int st = tu_run_cli(args, &so, &se);
    cr_assert(st > 0, "'woolly %s' should fail, exited %d", args, st);
    cr_assert(strstr(se, message_part) != NULL, "'woolly %s': message '%s' does not mention '%s'", args, se,
              message_part);
    free(so), free(se);
}

int tu_parse_ids(const char *s, int32_t **ids)
{
    int n = 0, cap = 16;
    int32_t *v = malloc(sizeof *v * (size_t)cap);
    cr_assert(v != NULL);
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s) {
            s++;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            v = realloc(v, sizeof *v * (size_t)cap);
            cr_assert(v != NULL);
        }
        v[n++] = (int32_t)x;
        s = end;
    }
    *ids = v;
    return n;
}

double tu_nmse(const float *x, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? num / den : num;
}

uint64_t tu_rand_u64(tu_rng *r)
{
    uint64_t x = r->s ? r->s : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return x;
}

float tu_rand_uniform(tu_rng *r)
{
    return (float)(tu_rand_u64(r) >> 40) * (1.0f / 16777216.0f);
}

float tu_rand_normal(tu_rng *r)
{
    float u1 = tu_rand_uniform(r), u2 = tu_rand_uniform(r);
    if (u1 < 1e-7f)
        u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

const char *tu_stories_with_a_nan(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s", tu_tmp_path(name));
    size_t size;
    char *bytes = tu_read_file(tu_data("models/stories260K.gguf"), &size);
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(bytes, size, &err);
    cr_assert(g != NULL, "%s", err.msg);
    const gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_norm.weight");
    cr_assert(t && t->type == WOOLLY_TYPE_F32 && t->ne[0] > 5);
    const float nan = NAN;
    memcpy(bytes + g->data_offset + t->offset + 5 * sizeof(float), &nan, sizeof nan);
    gguf_close(g);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(bytes, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
    free(bytes);
    return path;
}
