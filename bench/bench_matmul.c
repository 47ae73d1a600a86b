/* Kernel micro-benchmarks: every matmul kernel of the registry that this CPU runs, on the shapes of the
 * benchmark presets, at 1 and 2 threads, through the runtime's own matmul call (packing, thread split).
 *
 *   GEMV (1 token):  GB/s of weights streamed, and its share of this machine's DRAM read bandwidth,
 *                    measured here with the same thread count. The weights rotate over enough copies
 *                    that every call reads them from DRAM, as decode does; with --cached every call
 *                    (GEMM too) reads one copy, from the caches when it fits them: the kernel's own
 *                    speed, which tells a kernel short of the DRAM bandwidth by its work from one short
 *                    by its loads (its share of the DRAM limit then exceeds 100% and means only that).
 *   GEMM (2 .. 512 tokens): 1e9 multiply-adds per second (and microseconds per call), and the share
 *                    of the int8 dot-product peak, measured here.
 *   The limits are measured before the table and again after it, to show how far they drifted.
 *   The baseline columns: the scalar reference kernel, and BLIS sgemm on the dequantized F32 weights
 *   (when this build registers a BLIS kernel).
 *
 *   bench_matmul [--preset llama-1b|granite-8b|gemma3-1b|granitemoe-3b|qwen3moe-30b-a3b|all]
 *                [--shape ROWSxCOLS]
 *                [--weights TYPE,...] [--threads 1,2] [--tokens 1,4,16,512] [--filter SUBSTRING]
 *                [--min-time SECONDS] [--no-reference] [--cached]
 * Prints markdown tables (the form bench/journal/ keeps); "(default)" marks the kernel a run without
 * a tuning profile takes for that many tokens. --filter A,B keeps the kernels whose names contain A or
 * B (and the scalar references, unless --no-reference); --shape keeps one shape of the presets;
 * --weights (type names: Q4_K,Q6_K,Q8_0,F16,...) replaces the types Q4_K_M gives each shape. The
 * "x scalar" column is the kernel's speed over that of the scalar reference with the same activation
 * format, at the last thread count (the references are timed first, up to 16 tokens). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "huge_map.h"
#include "machine_limits.h"
#include "matmul.h"
#include "quant.h"
#include "registry.h"
#include "timing.h"

typedef struct shape {
    const char *what; /* the tensors it stands for */
    int64_t rows, cols;
    int n_types;
    enum woolly_type types[2]; /* the weight types Q4_K_M gives it */
} shape;

/* Q4_K_M: Q4_K everywhere but output (Q6_K), and attn_v / ffn_down in some layers (Q6_K). */
static const shape LLAMA_1B[] = {
    {"attn_q, attn_output", 2048, 2048, 1, {WOOLLY_TYPE_Q4_K}},
    {"attn_k, attn_v", 512, 2048, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"ffn_gate, ffn_up", 8192, 2048, 1, {WOOLLY_TYPE_Q4_K}},
    {"ffn_down", 2048, 8192, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"output", 32000, 2048, 1, {WOOLLY_TYPE_Q6_K}},
};
static const shape GRANITE_8B[] = {
    {"attn_q, attn_output", 4096, 4096, 1, {WOOLLY_TYPE_Q4_K}},
    {"attn_k, attn_v", 1024, 4096, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"ffn_gate, ffn_up", 12800, 4096, 1, {WOOLLY_TYPE_Q4_K}},
    {"ffn_down", 4096, 12800, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"output (tied)", 49152, 4096, 1, {WOOLLY_TYPE_Q6_K}},
};
/* Gemma 3 1B's Q4_K_M: rows of 1152 values are no whole Q4_K or Q6_K super-blocks, so the matrices that
 * read the residual stream fall back to Q5_0 (for Q4_K) and Q8_0 (for Q6_K: attn_v, the output). */
static const shape GEMMA3_1B[] = {
    {"attn_q", 1024, 1152, 1, {WOOLLY_TYPE_Q5_0}},
    {"attn_k, attn_v", 256, 1152, 2, {WOOLLY_TYPE_Q5_0, WOOLLY_TYPE_Q8_0}},
    {"attn_output", 1152, 1024, 1, {WOOLLY_TYPE_Q4_K}},
    {"ffn_gate, ffn_up", 6912, 1152, 1, {WOOLLY_TYPE_Q5_0}},
    {"ffn_down", 1152, 6912, 2, {WOOLLY_TYPE_Q6_K, WOOLLY_TYPE_Q4_K}},
    {"output (tied)", 262144, 1152, 1, {WOOLLY_TYPE_Q8_0}},
};
/* Granite 3.0 3B-A800M (granitemoe-3b): each expert is a matrix of its own, gate and up 512 x 1536, down
 * 1536 x 512 (Q6_K in half the layers), as small as attn_k; a token reads 8 of each layer's 40. */
static const shape GRANITEMOE_3B[] = {
    {"attn_q, attn_output", 1536, 1536, 1, {WOOLLY_TYPE_Q4_K}},
    {"attn_k, attn_v, one expert's ffn_gate, ffn_up", 512, 1536, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"one expert's ffn_down", 1536, 512, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"output (tied)", 49152, 1536, 1, {WOOLLY_TYPE_Q6_K}},
};
/* Qwen3-30B-A3B (qwen3moe-30b-a3b): 32 query heads and 4 KV heads of 128 values over a residual of 2048;
 * each expert's gate and up 768 x 2048, down 2048 x 768 (Q6_K in half the layers); a token reads 8 of
 * each layer's 128 experts, and the output matrix (151936 rows, Q6_K) is as many bytes as they are. */
static const shape QWEN3MOE_30B_A3B[] = {
    {"attn_q", 4096, 2048, 1, {WOOLLY_TYPE_Q4_K}},
    {"attn_k, attn_v", 512, 2048, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"attn_output", 2048, 4096, 1, {WOOLLY_TYPE_Q4_K}},
    {"one expert's ffn_gate, ffn_up", 768, 2048, 1, {WOOLLY_TYPE_Q4_K}},
    {"one expert's ffn_down", 2048, 768, 2, {WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q6_K}},
    {"output", 151936, 2048, 1, {WOOLLY_TYPE_Q6_K}},
};

enum { MAX_LIST = 8 };

typedef struct opts {
    const char *preset;
    int threads[MAX_LIST], n_threads;
    int tokens[MAX_LIST], n_tokens;
    const char *filter;
    int64_t shape_rows, shape_cols;     /* --shape, 0: every shape */
    enum woolly_type weights[MAX_LIST]; /* --weights, instead of the shapes' own types */
    int n_weights;
    double min_time;
    bool no_reference; /* skip the scalar reference kernels */
    bool cached;       /* --cached: the weights in one copy */
} opts;

static int parse_list(const char *s, int *out)
{
    int n = 0;
    for (char *end; *s && n < MAX_LIST; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
    }
    return n;
}

/* A comma-separated list of type names (Q4_K, F16, ...): how many, or -1 if one is unknown. */
static int parse_types(const char *s, enum woolly_type *out)
{
    int n = 0;
    while (*s && n < MAX_LIST) {
        char name[16];
        const size_t len = strcspn(s, ",");
        if (len == 0 || len >= sizeof name)
            return -1;
        memcpy(name, s, len);
        name[len] = '\0';
        const int t = woolly_type_from_name(name);
        if (t < 0)
            return -1;
        out[n++] = (enum woolly_type)t;
        s += len + (s[len] == ',');
    }
    return n;
}

/* ---- one shape and weight type: the weights in every layout the kernels want ------------------- */

typedef struct weights {
    enum woolly_type type;
    int64_t rows, cols;
    void *gguf; /* GGUF rows, random values quantized */
    float *f32; /* the same, dequantized (the BLIS baseline's input) */
    struct {
        const woolly_layout *layout;
        woolly_huge_map map; /* every copy, in 2 MiB pages as the model's repacked weights are */
        char *data;          /* copy c at data + c * stride */
        int copies;
        size_t bytes, stride; /* of one copy; between copies (bytes in whole 4 KiB pages) */
    } lay[8];
    int n_lay;
    bool cached; /* one copy of each layout (--cached), not enough to stream from DRAM */
} weights;

static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_matmul: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void weights_make(weights *w, enum woolly_type type, int64_t rows, int64_t cols, bool cached)
{
    memset(w, 0, sizeof *w);
    w->type = type, w->rows = rows, w->cols = cols, w->cached = cached;
    const size_t rb = woolly_row_bytes(type, cols);
    w->gguf = xmalloc(rb * (size_t)rows);
    float *row = xmalloc(sizeof(float) * (size_t)cols);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            row[i] = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 0.05f;
        }
        woolly_quantize_row(type, row, (char *)w->gguf + (size_t)r * rb, cols);
    }
    free(row);
}

/* The copies of the weights in `layout` (NULL: GGUF rows), made once. */
static int weights_layout(weights *w, const woolly_layout *layout, size_t *bytes)
{
    for (int i = 0; i < w->n_lay; i++)
        if (w->lay[i].layout == layout) {
            *bytes = w->lay[i].bytes;
            return i;
        }
    const int i = w->n_lay++;
    const size_t rb = woolly_row_bytes(w->type, w->cols),
                 lrb = woolly_layout_row_bytes(layout, w->type, w->cols);
    const int64_t g = layout ? layout->rows : 1, padded = (w->rows + g - 1) / g * g;
    w->lay[i].layout = layout;
    w->lay[i].bytes = lrb * (size_t)padded;
    w->lay[i].stride = (w->lay[i].bytes + 4095) / 4096 * 4096;
    /* GEMV rotates over copies that add up to 4x the L3 (at least 384 MiB), so that every call reads
     * them from DRAM: an Intel Xeon here has 260 MiB of L3. */
    const size_t copies =
        (woolly_dram_stream_bytes((size_t)384 << 20) + w->lay[i].stride - 1) / w->lay[i].stride;
    w->lay[i].copies = w->cached ? 1 : copies < 2 ? 2 : (int)copies;
    w->lay[i].data = woolly_huge_map_open(&w->lay[i].map, w->lay[i].stride * (size_t)w->lay[i].copies);
    if (!w->lay[i].data) {
        fprintf(stderr, "bench_matmul: out of memory (%d copies of %zu bytes)\n", w->lay[i].copies,
                w->lay[i].bytes);
        exit(1);
    }
    for (int c = 0; c < w->lay[i].copies; c++) {
        char *copy = w->lay[i].data + (size_t)c * w->lay[i].stride;
        if (layout)
            layout->repack(&(woolly_repack_args){w->gguf, rb, copy, lrb, w->cols, 0, w->rows});
        else
            memcpy(copy, w->gguf, w->lay[i].bytes);
    }
    *bytes = w->lay[i].bytes;
    return i;
}

static void weights_free(weights *w)
{
    free(w->gguf);
    free(w->f32);
    for (int i = 0; i < w->n_lay; i++)
        woolly_huge_map_close(&w->lay[i].map);
}

/* ---- timing one kernel ------------------------------------------------------------------------- */

typedef struct run {
    woolly_threadpool *pool;
    woolly_matrix *mats; /* one per copy */
    woolly_matmul_plan plan;
    int copies, next;
    const float *x;
    int64_t m;
    float *y;
    void *pack;
} run;

static void run_once(void *p)
{
    run *r = p;
    woolly_matmul(r->pool, &r->plan, &r->mats[r->next], r->x, r->m, r->y, (size_t)r->mats[0].rows, r->pack);
    r->next = (r->next + 1) % r->copies;
}

/* Median seconds per call of kernel k on weights w with m tokens and nth threads. */
static double time_kernel(const woolly_kernel *k, weights *w, int64_t m, int nth, const float *x, float *y,
                          void *pack, double min_time)
{
    size_t bytes;
    const int li = weights_layout(w, k->layout, &bytes);
    run r = {.m = m, .x = x, .y = y, .pack = pack, .copies = w->lay[li].copies};
    r.pool = woolly_threadpool_open(nth, NULL);
    if (!r.pool)
        return -1;
    r.mats = xmalloc(sizeof *r.mats * (size_t)r.copies);
    for (int c = 0; c < r.copies; c++) {
        r.mats[c] = woolly_matrix_rows(w->lay[li].data + (size_t)c * w->lay[li].stride, w->type, w->rows,
                                       w->cols, "bench");
        r.mats[c].layout = k->layout;
        r.mats[c].row_bytes = woolly_layout_row_bytes(k->layout, w->type, w->cols);
        r.mats[c].act = k->act;
    }
    woolly_error err;
    woolly_matmul_step steps[WOOLLY_TOKENS_CLASSES] = {{0}};
    steps[woolly_tokens_class_of(m)].kernel = k;
    int rc = woolly_matmul_plan_init(&r.plan, &r.mats[0], steps, &err);
    enum woolly_act layout_act;
    if (rc && !woolly_matmul_layout_format(w->type, w->cols, k->layout, WOOLLY_ACT_MASK_ALL, &layout_act, &err)) {
        /* a GEMM whose activations no GEMV on its layout takes (q8k): the matrix as a model has it,
         * in its layout's format, with k for this token count */
        for (int c = 0; c < r.copies; c++)
            r.mats[c].act = layout_act;
        rc = woolly_matmul_plan_init(&r.plan, &r.mats[0], steps, &err);
    }
    if (rc) {
        fprintf(stderr, "bench_matmul: %s\n", err.msg);
        woolly_threadpool_close(r.pool);
        free(r.mats);
        return -1;
    }
    run_once(&r); /* warm-up: page faults, thread start */
    const woolly_timing t = woolly_time_fn(run_once, &r, min_time, 5, 20 * min_time);
    woolly_threadpool_close(r.pool);
    free(r.mats);
    return t.median_s;
}

/* Whether k's name contains one of the filter's comma-separated substrings. */
static bool filter_match(const char *name, const char *filter)
{
    for (const char *f = filter; *f;) {
        const size_t n = strcspn(f, ",");
        for (const char *p = name; n && *p; p++)
            if (!strncmp(p, f, n))
                return true;
        f += n + (f[n] == ',');
    }
    return false;
}

static bool wanted(const woolly_kernel *k, const opts *o)
{
    return !o->filter || filter_match(k->name, o->filter) || (k->isa == WOOLLY_ISA_SCALAR && !k->layout);
}

/* The BLIS baseline kernel (F32 weights), if this build registers one. */
static const woolly_kernel *blis_kernel(enum woolly_op op)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++)
        if (ks[i].op == op && ks[i].wtype == WOOLLY_TYPE_F32 && strstr(ks[i].name, "blis") &&
            woolly_kernel_runs(&ks[i]))
            return &ks[i];
    return NULL;
}

/* ---- the tables ------------------------------------------------------------------------------- */

static void bench_shape(const shape *s, enum woolly_type type, const opts *o, const woolly_limits *lim)
{
    weights w;
    weights_make(&w, type, s->rows, s->cols, o->cached);
    const int64_t max_m = 512;
    float *x = xmalloc(sizeof(float) * (size_t)(s->cols * max_m));
    float *y = xmalloc(sizeof(float) * (size_t)(s->rows * max_m));
    void *pack = xmalloc((size_t)(s->cols / 32 + 1) * sizeof(woolly_block_q8x32) * (size_t)max_m +
                         (size_t)s->cols * 4 * (size_t)max_m);
    for (int64_t i = 0; i < s->cols * max_m; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    weights wf = {0}; /* F32 copy for the BLIS column, made on first use */

    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    const char *tname = woolly_type_get(type)->name;
    for (int ti = 0; ti < o->n_tokens; ti++) {
        const int64_t m = o->tokens[ti];
        const enum woolly_op op = m == 1 ? WOOLLY_OP_GEMV : WOOLLY_OP_GEMM;
        /* What a run without a tuning profile takes for this many tokens on these weights. */
        enum woolly_act act0;
        const woolly_layout *lay0;
        woolly_error derr;
        const woolly_kernel *def = NULL;
        if (!woolly_matmul_default_format(type, s->cols, WOOLLY_ACT_MASK_ALL, &act0, &lay0, &derr)) {
            woolly_matmul_plan dp = {0}; /* the step it runs m tokens on (a prompt GEMM's min_tokens) */
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                dp.step[c].kernel =
                    woolly_matmul_default_kernel((enum woolly_tokens_class)c, type, act0, lay0);
            def = woolly_matmul_plan_step(&dp, m)->kernel;
        }
        double ref_sec[WOOLLY_ACT_COUNT] = {0}; /* per activation format: the scalar reference's time at
                                                   the last thread count, once timed */
        for (int i = -1; i < n; i++) {
            const woolly_kernel *k = i < 0 ? blis_kernel(op) : &ks[i];
            weights *ww = i < 0 ? &wf : &w;
            if (!k ||
                (i >= 0 && (k->op != op || k->wtype != type || !woolly_kernel_runs(k) || !wanted(k, o))))
                continue;
            /* The scalar reference at 512 tokens takes minutes on the big shapes: it is the 4x yardstick at
             * decode and small batches only. */
            if (k->isa == WOOLLY_ISA_SCALAR && (m > 16 || o->no_reference))
                continue;
            if (i < 0 && !wf.gguf)
                weights_make(&wf, WOOLLY_TYPE_F32, s->rows, s->cols, o->cached);
            char cells[MAX_LIST][64];
            double last = 0;
            for (int t = 0; t < o->n_threads; t++) {
                const double sec = time_kernel(k, ww, m, o->threads[t], x, y, pack, o->min_time);
                size_t bytes;
                weights_layout(ww, k->layout, &bytes);
                if (sec <= 0) {
                    snprintf(cells[t], sizeof cells[t], "n/a");
                } else if (m == 1) {
                    snprintf(cells[t], sizeof cells[t], "%.1f GB/s (%.0f us)", (double)bytes / sec / 1e9,
                             sec * 1e6);
                } else {
                    snprintf(cells[t], sizeof cells[t], "%.1f GMAC/s (%.0f us)",
                             (double)s->rows * s->cols * m / sec / 1e9, sec * 1e6);
                }
                last = sec;
            }
            size_t bytes;
            weights_layout(ww, k->layout, &bytes);
            double share = 0;
            if (last > 0)
                share = m == 1 ? (double)bytes / last / 1e9 / lim->dram_read_gbs
                               : (double)s->rows * s->cols * m / last / 1e9 / lim->int8_gmacs;
            printf("| %lldx%lld %s | %s | %s%s | %lld |", (long long)s->rows, (long long)s->cols, s->what,
                   i < 0 ? "F32 (dequantized)" : tname, k->name, k == def ? " (default)" : "", (long long)m);
            for (int t = 0; t < o->n_threads; t++)
                printf(" %s |", cells[t]);
            if (i >= 0 && k->isa == WOOLLY_ISA_SCALAR && last > 0)
                ref_sec[k->act] = last;
            if (i >= 0 && ref_sec[k->act] > 0 && last > 0)
                printf(" %.0f%% | %.1fx |\n", 100 * share, ref_sec[k->act] / last);
            else
                printf(" %.0f%% | - |\n", 100 * share);
            fflush(stdout);
        }
    }
    weights_free(&w);
    weights_free(&wf);
    free(x), free(y), free(pack);
}

int main(int argc, char **argv)
{
    opts o = {.preset = "all",
              .threads = {1, 2},
              .n_threads = 2,
              .tokens = {1, 4, 16, 512},
              .n_tokens = 4,
              .min_time = 0.15};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--preset") && v)
            o.preset = v, i++;
        else if (!strcmp(a, "--threads") && v && (o.n_threads = parse_list(v, o.threads)) > 0)
            i++;
        else if (!strcmp(a, "--tokens") && v && (o.n_tokens = parse_list(v, o.tokens)) > 0)
            i++;
        else if (!strcmp(a, "--filter") && v)
            o.filter = v, i++;
        else if (!strcmp(a, "--min-time") && v && (o.min_time = atof(v)) > 0)
            i++;
        else if (!strcmp(a, "--shape") && v &&
                 sscanf(v, "%" SCNd64 "x%" SCNd64, &o.shape_rows, &o.shape_cols) == 2)
            i++;
        else if (!strcmp(a, "--weights") && v && (o.n_weights = parse_types(v, o.weights)) > 0)
            i++;
        else if (!strcmp(a, "--no-reference"))
            o.no_reference = true;
        else if (!strcmp(a, "--cached"))
            o.cached = true;
        else {
            fprintf(stderr,
                    "usage: bench_matmul "
                    "[--preset llama-1b|granite-8b|gemma3-1b|granitemoe-3b|qwen3moe-30b-a3b|all] "
                    "[--shape ROWSxCOLS] [--weights TYPE,...] "
                    "[--threads 1,2] [--tokens 1,4,16,512] [--filter SUBSTRING] [--min-time SECONDS] "
                    "[--no-reference] [--cached]\n");
            return 2;
        }
    }
    woolly_error err;
    if (woolly_isa_init(&err)) {
        fprintf(stderr, "bench_matmul: %s\n", err.msg);
        return 1;
    }
    const int max_threads = o.threads[o.n_threads - 1];
    woolly_limits lim;
    if (woolly_measure_limits(max_threads, &lim)) {
        fprintf(stderr, "bench_matmul: cannot measure this machine's limits\n");
        return 1;
    }
    printf("ISA level %s; limits at %d threads: DRAM read %.1f GB/s, int8 %.0f GMAC/s (%s)\n\n",
           woolly_isa_name(woolly_isa_active()), max_threads, lim.dram_read_gbs, lim.int8_gmacs,
           lim.int8_instr);
    printf("| shape | weights | kernel | tokens |");
    for (int t = 0; t < o.n_threads; t++)
        printf(" %d thread%s |", o.threads[t], o.threads[t] > 1 ? "s" : "");
    printf(" share of limit at %d threads | x scalar |\n|---|---|---|---|", max_threads);
    for (int t = 0; t < o.n_threads; t++)
        printf("---|");
    printf("---|---|\n");
    const struct {
        const char *name;
        const shape *s;
        size_t n;
    } presets[] = {{"llama-1b", LLAMA_1B, sizeof LLAMA_1B / sizeof LLAMA_1B[0]},
                   {"granite-8b", GRANITE_8B, sizeof GRANITE_8B / sizeof GRANITE_8B[0]},
                   {"gemma3-1b", GEMMA3_1B, sizeof GEMMA3_1B / sizeof GEMMA3_1B[0]},
                   {"granitemoe-3b", GRANITEMOE_3B, sizeof GRANITEMOE_3B / sizeof GRANITEMOE_3B[0]},
                   {"qwen3moe-30b-a3b", QWEN3MOE_30B_A3B,
                    sizeof QWEN3MOE_30B_A3B / sizeof QWEN3MOE_30B_A3B[0]}};
    bool any = false;
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        if (strcmp(o.preset, "all") && strcmp(o.preset, presets[p].name))
            continue;
        any = true;
        for (size_t i = 0; i < presets[p].n; i++) {
            const shape *s = &presets[p].s[i];
            if (o.shape_rows && (s->rows != o.shape_rows || s->cols != o.shape_cols))
                continue;
            const int n_types = o.n_weights ? o.n_weights : s->n_types;
            for (int t = 0; t < n_types; t++)
                bench_shape(s, o.n_weights ? o.weights[t] : s->types[t], &o, &lim);
        }
    }
    if (!any) {
        fprintf(stderr, "bench_matmul: unknown preset '%s'\n", o.preset);
        return 2;
    }
    /* On a shared machine the limits drift over the minutes of a table: measured again, they show how
     * far the shares above (against the first measurement) can be off. */
    woolly_limits end;
    if (woolly_measure_limits(max_threads, &end) == 0)
        printf(
            "\nlimits again at the end: DRAM read %.1f GB/s, int8 %.0f GMAC/s (the shares use the first)\n",
            end.dram_read_gbs, end.int8_gmacs);
    return 0;
}
