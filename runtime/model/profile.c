#include "profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cpu.h"
#include "profile_text.h"
#include "user_cache.h"
#include "woolly.h"

/* ---- building ----------------------------------------------------------------------------------- */

woolly_profile *woolly_profile_new(bool strict, const int32_t mix[WOOLLY_TOKENS_CLASSES])
{
    woolly_profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->isa = woolly_isa_active();
    p->strict = strict;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        p->mix[c] = mix[c];
    return p;
}

void woolly_profile_free(woolly_profile *p)
{
    if (!p)
        return;
    free(p->layouts);
    free(p->matmuls);
    free(p->attns);
    free(p);
}

unsigned woolly_profile_act_mask(const woolly_profile *p)
{
    return p && p->strict ? WOOLLY_ACT_MASK_STRICT : WOOLLY_ACT_MASK_ALL;
}

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

const woolly_profile_layout *woolly_profile_find_layout(const woolly_profile *p, enum woolly_type type,
                                                        int64_t rows, int64_t cols)
{
    for (int32_t i = 0; p && i < p->n_layouts; i++) {
        const woolly_profile_layout *l = &p->layouts[i];
        if (l->type == type && l->rows == rows && l->cols == cols)
            return l;
    }
    return NULL;
}

const woolly_profile_matmul *woolly_profile_find_matmul(const woolly_profile *p, enum woolly_type type,
                                                        int64_t rows, int64_t cols,
                                                        enum woolly_tokens_class cls, int32_t threads)
{
    for (int32_t i = 0; p && i < p->n_matmuls; i++) {
        const woolly_profile_matmul *r = &p->matmuls[i];
        if (r->type == type && r->rows == rows && r->cols == cols && r->cls == cls && r->threads == threads)
            return r;
    }
    return NULL;
}

const char *woolly_attn_phase_name(enum woolly_attn_phase ph)
{
    return ph == WOOLLY_ATTN_DECODE ? "decode" : ph == WOOLLY_ATTN_PREFILL ? "prefill" : "?";
}

const woolly_profile_attn *woolly_profile_find_attn(const woolly_profile *p, enum woolly_type cache,
                                                    int32_t head_dim, enum woolly_attn_phase phase,
                                                    int32_t threads)
{
    for (int32_t i = 0; p && i < p->n_attns; i++) {
        const woolly_profile_attn *r = &p->attns[i];
        if (r->cache == cache && r->head_dim == head_dim && r->phase == phase && r->threads == threads)
            return r;
    }
    return NULL;
}

/* Room for one more element of an array that grows by doubling. */
static int grow(void **arr, int32_t n, int32_t *cap, size_t elem, woolly_error *err)
{
    if (n < *cap)
        return 0;
    const int32_t cap2 = *cap ? 2 * *cap : 16;
    void *bigger = realloc(*arr, (size_t)cap2 * elem);
    if (!bigger)
        return woolly_fail(err, "out of memory");
    *arr = bigger;
    *cap = cap2;
    return 0;
}

static int check_shape(enum woolly_type type, int64_t rows, int64_t cols, woolly_error *err)
{
    if (!woolly_type_get(type))
        return woolly_fail(err, "weight type %d is unknown", (int)type);
    if (rows < 1 || rows > WOOLLY_STEP_MAX_BLOCK || cols < 1 || cols > WOOLLY_STEP_MAX_BLOCK)
        return woolly_fail(err, "shape %lldx%lld is outside [1, %d]", (long long)rows, (long long)cols,
                           WOOLLY_STEP_MAX_BLOCK);
    if (!woolly_row_bytes(type, cols))
        return woolly_fail(err, "rows of %lld are not whole %s blocks", (long long)cols, type_name(type));
    return 0;
}

int woolly_profile_add_layout(woolly_profile *p, const woolly_profile_layout *row, woolly_error *err)
{
    if (check_shape(row->type, row->rows, row->cols, err))
        return -1;
    if (woolly_profile_find_layout(p, row->type, row->rows, row->cols))
        return woolly_fail(err, "a second layout for %s %lldx%lld", type_name(row->type),
                           (long long)row->rows, (long long)row->cols);
    if (row->layout && row->layout->wtype != row->type)
        return woolly_fail(err, "layout %s holds %s weights, not %s", row->layout->name,
                           type_name(row->layout->wtype), type_name(row->type));
    enum woolly_act act;
    woolly_error why;
    if (woolly_matmul_layout_format(row->type, row->cols, row->layout, woolly_profile_act_mask(p), &act,
                                    &why))
        return woolly_fail(err, "%s%s", why.msg,
                           p->strict ? " under strict accuracy (F16/F32 activations)" : "");
    if (grow((void **)&p->layouts, p->n_layouts, &p->cap_layouts, sizeof *p->layouts, err))
        return -1;
    p->layouts[p->n_layouts++] = *row;
    return 0;
}

int woolly_profile_add_matmul(woolly_profile *p, const woolly_profile_matmul *row, woolly_error *err)
{
    if (check_shape(row->type, row->rows, row->cols, err))
        return -1;
    const char *tn = type_name(row->type);
    const woolly_profile_layout *l = woolly_profile_find_layout(p, row->type, row->rows, row->cols);
    if (!l)
        return woolly_fail(err, "no layout row for %s %lldx%lld before its matmul row", tn,
                           (long long)row->rows, (long long)row->cols);
    if (row->threads < 1 || row->threads > WOOLLY_MAX_THREADS)
        return woolly_fail(err, "threads=%d is outside [1, %d]", row->threads, WOOLLY_MAX_THREADS);
    if (woolly_profile_find_matmul(p, row->type, row->rows, row->cols, row->cls, row->threads))
        return woolly_fail(err, "a second matmul row for %s %lldx%lld, %s tokens, %d threads", tn,
                           (long long)row->rows, (long long)row->cols, woolly_tokens_class_name(row->cls),
                           row->threads);
    if (woolly_matmul_step_check(&row->step, row->type, l->layout, row->cols, row->cls, err))
        return -1;
    if (!(woolly_profile_act_mask(p) >> row->step.kernel->act & 1))
        return woolly_fail(err, "kernel %s reads %s activations, which strict accuracy excludes",
                           row->step.kernel->name, woolly_act_name(row->step.kernel->act));
    const woolly_kernel *d = row->default_kernel;
    if (!d || d->op != row->step.kernel->op || d->wtype != row->type)
        return woolly_fail(err, "default kernel %s is not a %s kernel for %s weights", d ? d->name : "(none)",
                           row->step.kernel->op == WOOLLY_OP_GEMV ? "GEMV" : "GEMM", tn);
    if (!(row->us >= 0 && row->us < 1e12) || !(row->default_us >= 0 && row->default_us < 1e12))
        return woolly_fail(err, "times %g and %g us are not in [0, 1e12)", row->us, row->default_us);
    if (grow((void **)&p->matmuls, p->n_matmuls, &p->cap_matmuls, sizeof *p->matmuls, err))
        return -1;
    p->matmuls[p->n_matmuls++] = *row;
    return 0;
}

/* Whether k is an attention kernel this CPU runs for a cache type and head dimension. */
static int check_attn_kernel(const woolly_kernel *k, enum woolly_type cache, int32_t head_dim,
                             const char *what, woolly_error *err)
{
    if (!k || k->op != WOOLLY_OP_ATTN || k->wtype != cache || (k->head_dim && k->head_dim != head_dim))
        return woolly_fail(err,
                           "%s kernel %s is not an attention kernel for a %s cache and head dimension %d",
                           what, k ? k->name : "(none)", type_name(cache), head_dim);
    if (!woolly_kernel_runs(k))
        return woolly_fail(err, "%s kernel %s does not run on this CPU at level %s", what, k->name,
                           woolly_isa_name(woolly_isa_active()));
    return 0;
}

int woolly_profile_add_attn(woolly_profile *p, const woolly_profile_attn *row, woolly_error *err)
{
    const enum woolly_type c = row->cache;
    if (c != WOOLLY_TYPE_F16 && c != WOOLLY_TYPE_F32 && c != WOOLLY_TYPE_Q8_0)
        return woolly_fail(err, "'%s' is not a KV cache type (F16, F32, Q8_0)", type_name(c));
    if (row->head_dim < 1 || row->head_dim > WOOLLY_MAX_HEAD_DIM || row->head_dim % 2 ||
        (c == WOOLLY_TYPE_Q8_0 && row->head_dim % WOOLLY_QK8_0))
        return woolly_fail(err, "head dimension %d is not one a %s cache holds (even, at most %d%s)",
                           row->head_dim, type_name(c), WOOLLY_MAX_HEAD_DIM,
                           c == WOOLLY_TYPE_Q8_0 ? ", a multiple of 32" : "");
    if (row->phase != WOOLLY_ATTN_DECODE && row->phase != WOOLLY_ATTN_PREFILL)
        return woolly_fail(err, "attention phase %d is not decode or prefill", (int)row->phase);
    if (row->threads < 1 || row->threads > WOOLLY_MAX_THREADS)
        return woolly_fail(err, "threads=%d is outside [1, %d]", row->threads, WOOLLY_MAX_THREADS);
    const char *ph = woolly_attn_phase_name(row->phase);
    if (woolly_profile_find_attn(p, c, row->head_dim, row->phase, row->threads))
        return woolly_fail(err, "a second attn row for a %s cache, head dimension %d, %s, %d threads",
                           type_name(c), row->head_dim, ph, row->threads);
    if (check_attn_kernel(row->kernel, c, row->head_dim, "the", err) ||
        check_attn_kernel(row->default_kernel, c, row->head_dim, "default", err))
        return -1;
    if (p->strict && row->kernel->act != WOOLLY_ACT_F32)
        return woolly_fail(err, "kernel %s rounds attention to %s, which strict accuracy excludes", row->kernel->name,
                           woolly_act_name(row->kernel->act));
    const bool decode = row->phase == WOOLLY_ATTN_DECODE;
    if (decode ? row->queries_per_call != 1
               : row->queries_per_call < 1 || row->queries_per_call > WOOLLY_PROFILE_MAX_QUERIES_PER_CALL)
        return woolly_fail(err, "queries_per_call=%d: %s", row->queries_per_call,
                           decode ? "decode runs one query per call" : "not in [1, 4096]");
    if (decode ? row->kv_split < 1 || row->kv_split > WOOLLY_ATTN_MAX_PARTS : row->kv_split != 1)
        return woolly_fail(err, "kv_split=%d: %s", row->kv_split,
                           decode ? "not in [1, 64]" : "prefill does not split the cache");
    if ((decode && row->queries != 1) || row->queries < 1 || row->positions < row->queries ||
        row->positions > WOOLLY_PROFILE_MAX_POSITIONS)
        return woolly_fail(err, "queries=%d positions=%d: %s", row->queries, row->positions,
                           decode ? "decode is one query over at least one position"
                                  : "queries must be at least 1 and at most the positions (at most 2^24)");
    if (!(row->us >= 0 && row->us < 1e12) || !(row->default_us >= 0 && row->default_us < 1e12))
        return woolly_fail(err, "times %g and %g us are not in [0, 1e12)", row->us, row->default_us);
    if (grow((void **)&p->attns, p->n_attns, &p->cap_attns, sizeof *p->attns, err))
        return -1;
    p->attns[p->n_attns++] = *row;
    return 0;
}

void woolly_profile_header_registry(char *buf, size_t n)
{
    snprintf(buf, n, "%016llx", woolly_registry_hash());
}

/* ---- parsing ------------------------------------------------------------------------------------ */

/* "TYPE ROWSxCOLS" */
static int parse_shape(char **w, enum woolly_type *type, int64_t *rows, int64_t *cols, woolly_error *err)
{
    const int t = woolly_type_from_name(w[0]);
    if (t < 0)
        return woolly_fail(err, "'%s' is not a weight type", w[0]);
    *type = (enum woolly_type)t;
    char shape[64];
    snprintf(shape, sizeof shape, "%s", w[1]);
    char *x = strchr(shape, 'x');
    if (!x)
        return woolly_fail(err, "'%s' is not a shape ROWSxCOLS", w[1]);
    *x = 0;
    if (woolly_profile_parse_i64(shape, 1, WOOLLY_STEP_MAX_BLOCK, rows) ||
        woolly_profile_parse_i64(x + 1, 1, WOOLLY_STEP_MAX_BLOCK, cols))
        return woolly_fail(err, "'%s' is not a shape ROWSxCOLS", w[1]);
    return 0;
}

static int parse_layout_row(woolly_profile *p, char **w, int n, woolly_error *err)
{
    if (n != 4)
        return woolly_fail(err, "a layout row is 'layout TYPE ROWSxCOLS LAYOUT'");
    woolly_profile_layout row = {0};
    if (parse_shape(w + 1, &row.type, &row.rows, &row.cols, err))
        return -1;
    if (strcmp(w[3], "rows") && !(row.layout = woolly_layout_by_name(w[3])))
        return woolly_fail(err, "layout '%s' is not in this build", w[3]);
    return woolly_profile_add_layout(p, &row, err);
}

static const woolly_kernel *kernel_named(const char *name, woolly_error *err)
{
    const woolly_kernel *k = woolly_kernel_by_name(name);
    if (!k)
        woolly_fail(err, "kernel '%s' is not in this build", name);
    return k;
}

static int parse_matmul_row(woolly_profile *p, char **w, int n, woolly_error *err)
{
    static const char *const KEYS[] = {
        "tokens",   "threads", "kernel", "rows_per_call", "tokens_per_call", "k_per_call",
        "prefetch", "split",   "us",     "default",       "default_us"};
    enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };
    if (n != 3 + N_KEYS)
        return woolly_fail(err, "a matmul row is 'matmul TYPE ROWSxCOLS' and %d KEY=VALUE words", N_KEYS);
    woolly_profile_matmul row = {0};
    if (parse_shape(w + 1, &row.type, &row.rows, &row.cols, err))
        return -1;
    const char *v[N_KEYS];
    for (int i = 0; i < N_KEYS; i++)
        if (!(v[i] = woolly_profile_value_of(w[3 + i], KEYS[i])))
            return woolly_fail(err, "word %d is '%s', expected %s=...", 4 + i, w[3 + i], KEYS[i]);
    const int c = woolly_tokens_class_from_name(v[0]);
    if (c < 0)
        return woolly_fail(err, "tokens=%s is not a class (1, 2-16, 17+)", v[0]);
    row.cls = (enum woolly_tokens_class)c;
    woolly_matmul_step *s = &row.step;
    if (woolly_profile_parse_i32(v[1], 1, WOOLLY_MAX_THREADS, &row.threads))
        return woolly_fail(err, "threads=%s is not in [1, %d]", v[1], WOOLLY_MAX_THREADS);
    if (!(s->kernel = kernel_named(v[2], err)) || !(row.default_kernel = kernel_named(v[9], err)))
        return -1;
    int32_t *ints[] = {&s->rows_per_call, &s->tokens_per_call, &s->k_per_call, &s->prefetch, &s->threads};
    for (int i = 0; i < 5; i++)
        if (woolly_profile_parse_i32(v[3 + i], 0, WOOLLY_STEP_MAX_BLOCK, ints[i]))
            return woolly_fail(err, "%s=%s is not an integer in [0, %d]", KEYS[3 + i], v[3 + i],
                               WOOLLY_STEP_MAX_BLOCK);
    if (woolly_profile_parse_double(v[8], &row.us) || woolly_profile_parse_double(v[10], &row.default_us))
        return woolly_fail(err, "us=%s or default_us=%s is not a number of microseconds", v[8], v[10]);
    return woolly_profile_add_matmul(p, &row, err);
}

/* "dHEAD_DIM" */
static int parse_head_dim(const char *w, int32_t *out)
{
    return w[0] == 'd' ? woolly_profile_parse_i32(w + 1, 1, WOOLLY_MAX_HEAD_DIM, out) : -1;
}

static int parse_attn_row(woolly_profile *p, char **w, int n, woolly_error *err)
{
    static const char *const KEYS[] = {"threads",   "kernel", "queries_per_call", "kv_split",  "queries",
                                       "positions", "us",     "default",          "default_us"};
    enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };
    if (n != 4 + N_KEYS)
        return woolly_fail(err, "an attn row is 'attn CACHE dHEAD_DIM decode|prefill' and %d KEY=VALUE words",
                           N_KEYS);
    woolly_profile_attn row = {0};
    const int t = woolly_type_from_name(w[1]);
    if (t < 0)
        return woolly_fail(err, "'%s' is not a KV cache type (F16, F32, Q8_0)", w[1]);
    row.cache = (enum woolly_type)t;
    if (parse_head_dim(w[2], &row.head_dim))
        return woolly_fail(err, "'%s' is not a head dimension dN (N in [1, %d])", w[2], WOOLLY_MAX_HEAD_DIM);
    if (!strcmp(w[3], "decode"))
        row.phase = WOOLLY_ATTN_DECODE;
    else if (!strcmp(w[3], "prefill"))
        row.phase = WOOLLY_ATTN_PREFILL;
    else
        return woolly_fail(err, "'%s' is not decode or prefill", w[3]);
    const char *v[N_KEYS];
    for (int i = 0; i < N_KEYS; i++)
        if (!(v[i] = woolly_profile_value_of(w[4 + i], KEYS[i])))
            return woolly_fail(err, "word %d is '%s', expected %s=...", 5 + i, w[4 + i], KEYS[i]);
    if (woolly_profile_parse_i32(v[0], 1, WOOLLY_MAX_THREADS, &row.threads))
        return woolly_fail(err, "threads=%s is not in [1, %d]", v[0], WOOLLY_MAX_THREADS);
    if (!(row.kernel = kernel_named(v[1], err)) || !(row.default_kernel = kernel_named(v[7], err)))
        return -1;
    int32_t *ints[] = {&row.queries_per_call, &row.kv_split, &row.queries, &row.positions};
    for (int i = 0; i < 4; i++)
        if (woolly_profile_parse_i32(v[2 + i], 0, WOOLLY_PROFILE_MAX_POSITIONS, ints[i]))
            return woolly_fail(err, "%s=%s is not an integer in [0, %d]", KEYS[2 + i], v[2 + i],
                               WOOLLY_PROFILE_MAX_POSITIONS);
    if (woolly_profile_parse_double(v[6], &row.us) || woolly_profile_parse_double(v[8], &row.default_us))
        return woolly_fail(err, "us=%s or default_us=%s is not a number of microseconds", v[6], v[8]);
    return woolly_profile_add_attn(p, &row, err);
}

/* The header lines, in order: each is "KEY VALUE" with the value this process has. */
static int check_header(void *ctx, int idx, const char *line, woolly_error *err)
{
    woolly_profile *p = ctx;
    char expect[1024];
    switch (idx) {
    case 0:
        snprintf(expect, sizeof expect, "%s %d", WOOLLY_PROFILE_MAGIC, WOOLLY_PROFILE_FORMAT);
        if (strncmp(line, WOOLLY_PROFILE_MAGIC " ", sizeof WOOLLY_PROFILE_MAGIC))
            return woolly_fail(err, "not a Woolly tuning profile (it starts '%.40s')", line);
        if (strcmp(line, expect))
            return woolly_fail(err, "format '%s', this build reads '%s'", line, expect);
        return 0;
    case 1:
        snprintf(expect, sizeof expect, "woolly %s", woolly_version());
        if (strcmp(line, expect))
            return woolly_fail(err, "written by '%.60s', this is '%s': tune again", line, expect);
        return 0;
    case 2: {
        char sig[512];
        woolly_cpu_signature(sig, sizeof sig);
        if (strncmp(line, "cpu ", 4) || strcmp(line + 4, sig))
            return woolly_fail(err, "measured on another CPU ('%.200s'; this one is '%s')", line, sig);
        return 0;
    }
    case 3: {
        char reg[32];
        woolly_profile_header_registry(reg, sizeof reg);
        if (strncmp(line, "registry ", 9) || strcmp(line + 9, reg))
            return woolly_fail(err, "made for another build ('%.60s'; this build's kernel registry is %s)",
                               line, reg);
        return 0;
    }
    case 4: {
        const char *isa = woolly_isa_name(woolly_isa_active());
        if (strncmp(line, "isa ", 4) || strcmp(line + 4, isa))
            return woolly_fail(err, "measured at another ISA level ('%.40s'; this run's is %s)", line, isa);
        return 0;
    }
    case 5:
        if (!strcmp(line, "accuracy default") || !strcmp(line, "accuracy strict")) {
            p->strict = !strcmp(line, "accuracy strict");
            return 0;
        }
        return woolly_fail(err, "'%.60s' is not 'accuracy default' or 'accuracy strict'", line);
    case 6: {
        char *w[WOOLLY_PROFILE_MAX_WORDS];
        char buf[WOOLLY_PROFILE_LINE_MAX];
        snprintf(buf, sizeof buf, "%s", line);
        if (woolly_profile_split_words(buf, w) != 2 || strcmp(w[0], "mix"))
            return woolly_fail(err, "'%.60s' is not 'mix D,S,L'", line);
        char *s = w[1];
        for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
            char *end = strchr(s, ',');
            if ((c < WOOLLY_TOKENS_CLASSES - 1) != (end != NULL))
                return woolly_fail(err, "'%.60s' is not 'mix D,S,L'", line);
            if (end)
                *end = 0;
            if (woolly_profile_parse_i32(s, 0, 1 << 30, &p->mix[c]))
                return woolly_fail(err, "'%.60s' is not 'mix D,S,L'", line);
            s = end + 1;
        }
        return 0;
    }
    }
    return 0;
}

/* The rows of a tuning profile. */
static int parse_row(void *ctx, char **w, int nw, woolly_error *err)
{
    woolly_profile *p = ctx;
    if (!strcmp(w[0], "layout"))
        return parse_layout_row(p, w, nw, err);
    if (!strcmp(w[0], "matmul"))
        return parse_matmul_row(p, w, nw, err);
    if (!strcmp(w[0], "attn"))
        return parse_attn_row(p, w, nw, err);
    return woolly_fail(err, "'%.40s' is not a profile row (layout, matmul, attn, end)", w[0]);
}

static const woolly_profile_grammar GRAMMAR = {7, check_header, parse_row};

woolly_profile *woolly_profile_parse(const char *text, size_t len, const char *path, woolly_error *err)
{
    woolly_profile *p = calloc(1, sizeof *p);
    if (!p) {
        woolly_fail(err, "%s: out of memory", path);
        return NULL;
    }
    snprintf(p->path, sizeof p->path, "%s", path);
    p->isa = woolly_isa_active();
    if (woolly_profile_text_read(text, len, path, &GRAMMAR, p, err)) {
        woolly_profile_free(p);
        return NULL;
    }
    return p;
}

woolly_profile *woolly_profile_read(const char *path, woolly_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        woolly_fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(WOOLLY_PROFILE_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        woolly_fail(err, "%s: out of memory", path);
        return NULL;
    }
    const size_t n = fread(buf, 1, WOOLLY_PROFILE_MAX_BYTES + 1, f);
    const bool failed = ferror(f) != 0;
    fclose(f);
    woolly_profile *p = NULL;
    if (failed)
        woolly_fail(err, "%s: cannot read", path);
    else if (n > WOOLLY_PROFILE_MAX_BYTES)
        woolly_fail(err, "%s: larger than %d bytes: not a profile", path, WOOLLY_PROFILE_MAX_BYTES);
    else
        p = woolly_profile_parse(buf, n, path, err);
    free(buf);
    return p;
}

/* ---- where runs find it ------------------------------------------------------------------------- */

int woolly_profile_default_path(char *buf, size_t n)
{
    const woolly_cpu *cpu = woolly_cpu_get();
    char dir[900];
    if (woolly_user_cache_dir(dir, sizeof dir))
        return -1;
    const int len = snprintf(buf, n, "%s/tune-%s-%u-%u-%016llx.profile", dir, cpu->arch, cpu->family,
                             cpu->model, woolly_cpu_signature_hash());
    return len > 0 && (size_t)len < n ? 0 : -1;
}

/* One warning line per file and reason per process: several models opened by one program say it once.
 * `why` may start with the path (the parser's "PATH line N: ..."), which the line already names. */
static void warn_once(const char *path, const char *why)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char last[2048];
    const size_t pl = strlen(path);
    if (!strncmp(why, path, pl) && (why[pl] == ' ' || why[pl] == ':'))
        why += pl + 1 + (why[pl] == ':');
    char msg[2048];
    snprintf(msg, sizeof msg, "woolly: warning: tuning profile %s rejected (%s); using the default kernels\n",
             path, why);
    pthread_mutex_lock(&lock);
    if (strcmp(last, msg)) {
        snprintf(last, sizeof last, "%s", msg);
        fputs(msg, stderr);
    }
    pthread_mutex_unlock(&lock);
}

woolly_profile *woolly_profile_load_for_run(void)
{
    const char *env = getenv("WOOLLY_TUNE_PROFILE");
    char path[1024];
    if (env && *env) {
        if (!strcmp(env, "none"))
            return NULL;
        snprintf(path, sizeof path, "%s", env);
    } else {
        struct stat st;
        if (woolly_profile_default_path(path, sizeof path) || stat(path, &st) != 0)
            return NULL; /* not tuned here: the defaults, silently */
    }
    if (woolly_act_forced() >= 0) {
        warn_once(path, "WOOLLY_ACT forces the activation formats");
        return NULL;
    }
    woolly_error err = {{0}};
    woolly_profile *p = woolly_profile_read(path, &err);
    if (!p)
        warn_once(path, err.msg);
    return p;
}
