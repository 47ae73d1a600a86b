#include "matmul.h"

#include <stdatomic.h>
#include <string.h>

woolly_matrix woolly_matrix_rows(const void *data, enum woolly_type type, int64_t rows, int64_t cols,
                                 const char *name)
{
    return (woolly_matrix){data, type,           rows, cols, woolly_row_bytes(type, cols),
                           NULL, WOOLLY_ACT_F32, name, -1};
}

size_t woolly_act_row_bytes(enum woolly_act act, int64_t k)
{
    switch (act) {
    case WOOLLY_ACT_F32:
        return (size_t)k * sizeof(float);
    case WOOLLY_ACT_F16:
    case WOOLLY_ACT_BF16:
        return (size_t)k * sizeof(uint16_t);
    case WOOLLY_ACT_Q8:
        return k % 32 ? 0 : (size_t)(k / 32) * sizeof(woolly_block_q8x32);
    case WOOLLY_ACT_Q8K:
        return k % 256 ? 0 : (size_t)(k / 256) * sizeof(woolly_block_q8x256);
    case WOOLLY_ACT_COUNT:
        break;
    }
    return 0;
}

/* ---- token classes ------------------------------------------------------------------------------ */

enum woolly_tokens_class woolly_tokens_class_of(int64_t m)
{
    return m <= 1                         ? WOOLLY_TOKENS_1
           : m <= WOOLLY_TOKENS_SMALL_MAX ? WOOLLY_TOKENS_SMALL
                                          : WOOLLY_TOKENS_LARGE;
}

const char *woolly_tokens_class_name(enum woolly_tokens_class c)
{
    static const char *const NAMES[WOOLLY_TOKENS_CLASSES] = {"1", "2-16", "17+"};
    return (unsigned)c < WOOLLY_TOKENS_CLASSES ? NAMES[c] : "?";
}

int woolly_tokens_class_from_name(const char *name)
{
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        if (!strcmp(name, woolly_tokens_class_name((enum woolly_tokens_class)c)))
            return c;
    return -1;
}

enum woolly_op woolly_tokens_class_op(enum woolly_tokens_class c)
{
    return c == WOOLLY_TOKENS_1 ? WOOLLY_OP_GEMV : WOOLLY_OP_GEMM;
}

/* ---- choosing formats and kernels --------------------------------------------------------------- */

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *ti = woolly_type_get(t);
    return ti ? ti->name : "?";
}

/* Whether activations in `act` can feed a matrix with rows of cols: whole blocks, and a packer. */
static bool act_usable(enum woolly_act act, int64_t cols, unsigned act_mask)
{
    return (act_mask >> act & 1) && woolly_act_row_bytes(act, cols) &&
           (act == WOOLLY_ACT_F32 || woolly_kernel_choose_pack(act));
}

/* k is at least as good a default as best: a higher level, or the spec's default at the same one. */
static bool better_default(const woolly_kernel *k, const woolly_kernel *best)
{
    return !best || k->isa > best->isa ||
           (k->isa == best->isa && woolly_kernel_is_default(k) && !woolly_kernel_is_default(best));
}

/* The best GEMV on `layout` (any_layout: on whatever layout) among the usable formats, each with a
 * GEMM of the same format and layout. Formats are tried F32 first, so that a tie keeps the reference. */
static const woolly_kernel *best_gemv(enum woolly_type type, int64_t cols, unsigned act_mask, bool any_layout,
                                      const woolly_layout *layout)
{
    const woolly_kernel *best = NULL;
    for (int a = 0; a < WOOLLY_ACT_COUNT; a++) {
        if (!act_usable((enum woolly_act)a, cols, act_mask))
            continue;
        const woolly_kernel *k = any_layout
                                     ? woolly_kernel_default_gemv(type, a)
                                     : woolly_kernel_choose(WOOLLY_OP_GEMV, type, (enum woolly_act)a, layout);
        if (k && woolly_kernel_choose(WOOLLY_OP_GEMM, type, k->act, k->layout) && better_default(k, best))
            best = k;
    }
    return best;
}

int woolly_matmul_default_format(enum woolly_type type, int64_t cols, unsigned act_mask, enum woolly_act *act,
                                 const woolly_layout **layout, woolly_error *err)
{
    return woolly_matmul_preferred_format(type, cols, act_mask, -1, act, layout, err);
}

int woolly_matmul_preferred_format(enum woolly_type type, int64_t cols, unsigned act_mask, int prefer,
                                   enum woolly_act *act, const woolly_layout **layout, woolly_error *err)
{
    const int forced = woolly_act_forced();
    const woolly_kernel *gemv = NULL;
    if (forced >= 0 && act_usable((enum woolly_act)forced, cols, act_mask))
        gemv = woolly_kernel_default_gemv(type, forced);
    if (!gemv && forced < 0 && prefer >= 0 && act_usable((enum woolly_act)prefer, cols, act_mask)) {
        gemv = woolly_kernel_default_gemv(type, prefer);
        if (gemv && !woolly_kernel_choose(WOOLLY_OP_GEMM, type, gemv->act, gemv->layout))
            gemv = NULL; /* a GEMV alone would leave prompts on the reference */
    }
    if (!gemv) {
        gemv = woolly_kernel_default_gemv(type, -1);
        if (gemv && (!act_usable(gemv->act, cols, act_mask) ||
                     !woolly_kernel_choose(WOOLLY_OP_GEMM, type, gemv->act, gemv->layout)))
            gemv = best_gemv(type, cols, act_mask, true, NULL);
    }
    if (!gemv)
        return woolly_fail(err, "no matrix kernel for %s weights with rows of %lld", type_name(type),
                           (long long)cols);
    *act = gemv->act;
    *layout = gemv->layout;
    return 0;
}

int woolly_matmul_layout_format(enum woolly_type type, int64_t cols, const woolly_layout *layout,
                                unsigned act_mask, enum woolly_act *act, woolly_error *err)
{
    const woolly_kernel *gemv = best_gemv(type, cols, act_mask, false, layout);
    if (!gemv)
        return woolly_fail(
            err, "no GEMV and GEMM kernels that run here for %s weights in layout %s with rows of %lld",
            type_name(type), layout ? layout->name : "rows", (long long)cols);
    *act = gemv->act;
    return 0;
}

int woolly_matmul_step_check(const woolly_matmul_step *s, enum woolly_type type, const woolly_layout *layout,
                             int64_t cols, enum woolly_tokens_class c, woolly_error *err)
{
    const woolly_kernel *k = s->kernel;
    if ((unsigned)c >= WOOLLY_TOKENS_CLASSES)
        return woolly_fail(err, "token class %d is unknown", (int)c);
    if (!k)
        return woolly_fail(err, "no kernel");
    const enum woolly_op op = woolly_tokens_class_op(c);
    if (k->op != op)
        return woolly_fail(err, "kernel %s is not a %s kernel (%s tokens)", k->name,
                           op == WOOLLY_OP_GEMV ? "GEMV" : "GEMM", woolly_tokens_class_name(c));
    if (k->wtype != type)
        return woolly_fail(err, "kernel %s does not take %s weights", k->name, type_name(type));
    if (k->layout != layout)
        return woolly_fail(err, "kernel %s reads layout %s, the weights are in %s", k->name,
                           k->layout ? k->layout->name : "rows", layout ? layout->name : "rows");
    if (!woolly_kernel_runs(k))
        return woolly_fail(err, "kernel %s does not run on this CPU at level %s", k->name,
                           woolly_isa_name(woolly_isa_active()));
    if (!act_usable(k->act, cols, WOOLLY_ACT_MASK_ALL))
        return woolly_fail(err, "kernel %s: %s activations do not fit rows of %lld", k->name,
                           woolly_act_name(k->act), (long long)cols);
    if (s->rows_per_call < 0 || s->rows_per_call > WOOLLY_STEP_MAX_BLOCK || s->rows_per_call % k->tile_n)
        return woolly_fail(err, "kernel %s: rows_per_call %d is not a multiple of its %d-row tile in [0, %d]",
                           k->name, s->rows_per_call, k->tile_n, WOOLLY_STEP_MAX_BLOCK);
    if (layout && s->rows_per_call % layout->rows)
        return woolly_fail(err, "rows_per_call %d is not a multiple of layout %s's %d-row group",
                           s->rows_per_call, layout->name, layout->rows);
    if (c == WOOLLY_TOKENS_1 && s->tokens_per_call)
        return woolly_fail(err, "tokens_per_call %d for one token (GEMV takes no token blocking)",
                           s->tokens_per_call);
    if (s->tokens_per_call < 0 || s->tokens_per_call > WOOLLY_STEP_MAX_BLOCK ||
        s->tokens_per_call % k->tile_m)
        return woolly_fail(err,
                           "kernel %s: tokens_per_call %d is not a multiple of its %d-token tile in [0, %d]",
                           k->name, s->tokens_per_call, k->tile_m, WOOLLY_STEP_MAX_BLOCK);
    if (s->k_per_call < 0 || s->k_per_call > WOOLLY_STEP_MAX_BLOCK || s->k_per_call % WOOLLY_QK_K)
        return woolly_fail(err, "k_per_call %d is not a multiple of %d in [0, %d]", s->k_per_call,
                           WOOLLY_QK_K, WOOLLY_STEP_MAX_BLOCK);
    if (s->prefetch < 0 || s->prefetch > WOOLLY_STEP_MAX_PREFETCH)
        return woolly_fail(err, "prefetch %d is outside [0, %d]", s->prefetch, WOOLLY_STEP_MAX_PREFETCH);
    if (s->threads < 0 || s->threads > WOOLLY_MAX_THREADS)
        return woolly_fail(err, "threads %d is outside [0, %d]", s->threads, WOOLLY_MAX_THREADS);
    return 0;
}

enum woolly_tokens_class woolly_matmul_plan_class(const woolly_matmul_plan *p, int64_t m)
{
    const enum woolly_tokens_class c = woolly_tokens_class_of(m);
    const woolly_kernel *large = p->step[WOOLLY_TOKENS_LARGE].kernel;
    return c == WOOLLY_TOKENS_LARGE && large && m < large->min_tokens && p->step[WOOLLY_TOKENS_SMALL].kernel
               ? WOOLLY_TOKENS_SMALL
               : c;
}

const woolly_matmul_step *woolly_matmul_plan_step(const woolly_matmul_plan *p, int64_t m)
{
    return &p->step[woolly_matmul_plan_class(p, m)];
}

const woolly_kernel *woolly_matmul_default_kernel(enum woolly_tokens_class c, enum woolly_type type,
                                                  enum woolly_act act, const woolly_layout *layout)
{
    if (c == WOOLLY_TOKENS_SMALL)
        return woolly_kernel_choose_small(type, act, layout);
    return woolly_kernel_choose(woolly_tokens_class_op(c), type, act, layout);
}

int woolly_matmul_plan_init(woolly_matmul_plan *p, const woolly_matrix *w, const woolly_matmul_step *tuned,
                            woolly_error *err)
{
    if ((unsigned)w->act >= WOOLLY_ACT_COUNT)
        return woolly_fail(err, "matmul: activation format %d is unknown", (int)w->act);
    *p = (woolly_matmul_plan){0};
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++) {
        woolly_matmul_step *s = &p->step[c];
        const enum woolly_op op = woolly_tokens_class_op((enum woolly_tokens_class)c);
        if (tuned && tuned[c].kernel) {
            woolly_error why;
            if (woolly_matmul_step_check(&tuned[c], w->type, w->layout, w->cols, (enum woolly_tokens_class)c,
                                         &why))
                return woolly_fail(err, "matmul: tensor '%s': %s", w->name ? w->name : "?", why.msg);
            *s = tuned[c];
        } else if (!(s->kernel = woolly_matmul_default_kernel((enum woolly_tokens_class)c, w->type, w->act,
                                                              w->layout))) {
            return woolly_fail(err, "matmul: no %s kernel for %s weights (layout %s) with %s activations",
                               op == WOOLLY_OP_GEMV ? "GEMV" : "GEMM", type_name(w->type),
                               w->layout ? w->layout->name : "rows", woolly_act_name(w->act));
        }
        if (s->kernel->act != WOOLLY_ACT_F32) {
            const woolly_kernel *pk = woolly_kernel_choose_pack(s->kernel->act);
            if (!pk)
                return woolly_fail(err, "matmul: no packer for %s activations",
                                   woolly_act_name(s->kernel->act));
            p->pack[c] = pk->pack;
        }
    }
    return 0;
}

size_t woolly_matmul_plan_pack_bytes(const woolly_matmul_plan *p, int64_t k)
{
    size_t most = 0;
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        if (p->step[c].kernel && p->step[c].kernel->act != WOOLLY_ACT_F32) {
            const size_t b = woolly_act_row_bytes(p->step[c].kernel->act, k);
            most = b > most ? b : most;
        }
    return most;
}

/* Rows [t0, t1) of x packed with `pack` (NULL: copied as F32). */
static void pack_rows(woolly_pack_fn pack, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                      void *dst, size_t row_bytes)
{
    for (int64_t t = t0; t < t1; t++) {
        const float *src = x + (size_t)t * x_stride;
        void *row = (char *)dst + (size_t)t * row_bytes;
        if (pack)
            pack(src, k, row);
        else
            memcpy(row, src, (size_t)k * sizeof(float));
    }
}

void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes)
{
    const woolly_kernel *pk = woolly_kernel_choose_pack(act);
    pack_rows(pk ? pk->pack : NULL, x, x_stride, t0, t1, k, dst, row_bytes);
}

void woolly_matmul_plan_pack(const woolly_matmul_plan *p, int64_t m, const float *x, size_t x_stride,
                             int64_t n, int64_t k, void *dst, size_t row_bytes)
{
    pack_rows(p->pack[woolly_matmul_plan_class(p, m)], x, x_stride, 0, n, k, dst, row_bytes);
}

/* ---- running ------------------------------------------------------------------------------------ */

static woolly_matmul_observer g_observer;

void woolly_matmul_set_observer(woolly_matmul_observer fn)
{
    g_observer = fn;
}

typedef struct matmul_job {
    const woolly_matmul_out *outs;
    int n;
    const void *xk; /* what the kernels read: the input or its packed form */
    size_t x_row_bytes;
    int64_t m, k, total_rows;
    enum woolly_act act;
    int chunks_per_thread; /* of the shared rows (woolly_split_run) */
    atomic_int next_chunk; /* the chunks of the shared rows taken so far */
} matmul_job;

typedef struct pack_job {
    woolly_pack_fn pack;
    const float *x;
    int64_t m, k;
    char *dst;
    size_t row_bytes;
} pack_job;

static void pack_job_run(void *arg, int ith, int nth)
{
    const pack_job *j = arg;
    long long t0, t1;
    woolly_split_range(j->m, 1, ith, nth, &t0, &t1);
    for (long long t = t0; t < t1; t++)
        j->pack(j->x + (size_t)t * (size_t)j->k, j->k, j->dst + (size_t)t * j->row_bytes);
}

void woolly_pack_rows_threaded(woolly_threadpool *pool, int nth, woolly_pack_fn pack, const float *x,
                               int64_t m, int64_t k, void *dst, size_t row_bytes)
{
    if (m == 1) {
        pack(x, k, dst);
        return;
    }
    pack_job j = {.pack = pack, .x = x, .m = m, .k = k, .dst = dst, .row_bytes = row_bytes};
    woolly_threadpool_run_n(pool, pack_job_run, &j, nth);
}

static const woolly_matmul_step *step_of(const matmul_job *j, int i)
{
    return woolly_matmul_plan_step(j->outs[i].plan, j->m);
}

/* Where the split point p (a row of all the outputs' rows, end to end) falls: output *i, at a row
 * rounded down to that kernel's tile, so that only the last call of a matrix has a partial tile. Two
 * threads that meet at p compute the same place. */
static int64_t split_point(const matmul_job *j, int64_t p, int *i)
{
    for (*i = 0; *i < j->n; (*i)++) {
        const int64_t rows = j->outs[*i].w->rows;
        if (p < rows) {
            const int64_t tile = step_of(j, *i)->kernel->tile_n;
            return p / tile * tile;
        }
        p -= rows;
    }
    return 0;
}

/* Rows [r0, r1) of one output, in the step's blocks of rows, tokens and columns. */
static void run_rows(const matmul_job *j, int i, int64_t r0, int64_t r1, int ith, int nth)
{
    const woolly_matmul_out *o = &j->outs[i];
    const woolly_matmul_step *st = step_of(j, i);
    const woolly_kernel *kern = st->kernel;
    const woolly_matrix *w = o->w;
    const int64_t rstep = st->rows_per_call > 0 ? st->rows_per_call : r1 - r0;
    const int64_t tstep = st->tokens_per_call > 0 && j->m > 1 ? st->tokens_per_call : j->m;
    const int64_t kstep = st->k_per_call > 0 ? st->k_per_call : j->k;
    const woolly_type_info *ti = woolly_type_get(w->type);
    /* Bytes of one weight block column (per row in GGUF rows, per group in a layout) and of 256
     * activations (k_per_call is a multiple of 256, every format's block): a k offset is a pointer
     * offset in both. */
    const size_t wblock = w->layout ? w->layout->block_bytes : ti->block_bytes;
    const size_t x_per_256 = woolly_act_row_bytes(j->act, 256);
    const woolly_matmul_observer observe = g_observer;
    for (int64_t ra = r0; ra < r1; ra += rstep)
        for (int64_t t = 0; t < j->m; t += tstep)
            for (int64_t k0 = 0; k0 < j->k; k0 += kstep) {
                const woolly_matmul_args a = {
                    .w = (const char *)w->data + (size_t)(k0 / ti->block_elems) * wblock,
                    .w_row_bytes = w->row_bytes,
                    .x = (const char *)j->xk + (size_t)t * j->x_row_bytes + (size_t)k0 / 256 * x_per_256,
                    .x_row_bytes = j->x_row_bytes,
                    .y = o->y + (size_t)t * o->y_stride,
                    .y_stride = o->y_stride,
                    .k = kstep < j->k - k0 ? kstep : j->k - k0,
                    .m = tstep < j->m - t ? tstep : j->m - t,
                    .r0 = ra,
                    .r1 = rstep < r1 - ra ? ra + rstep : r1,
                    .accumulate = k0 > 0,
                    .prefetch = st->prefetch,
                };
                if (observe)
                    observe(w, kern, &a, ith, nth);
                kern->matmul(&a);
            }
}

void woolly_matmul_rows(const woolly_matmul_out *o, int64_t m, const void *xk, int64_t r0, int64_t r1, int ith,
                        int nth)
{
    const enum woolly_act act = woolly_matmul_plan_step(o->plan, m)->kernel->act;
    const matmul_job j = {.outs = o,
                          .n = 1,
                          .xk = xk,
                          .x_row_bytes = woolly_act_row_bytes(act, o->w->cols),
                          .m = m,
                          .k = o->w->cols,
                          .act = act};
    run_rows(&j, 0, r0, r1, ith, nth);
}

/* The rows between split points p0 and p1, across as many outputs as they span. */
static void run_span(const matmul_job *j, int64_t p0, int64_t p1, int ith, int nth)
{
    int i0, i1;
    const int64_t o0 = split_point(j, p0, &i0);
    const int64_t o1 = split_point(j, p1, &i1);
    for (int i = i0; i <= i1 && i < j->n; i++) {
        const int64_t r0 = i == i0 ? o0 : 0, r1 = i == i1 ? o1 : j->outs[i].w->rows;
        if (r0 < r1)
            run_rows(j, i, r0, r1, ith, nth);
    }
}

/* The share of a job's rows run in chunks, and the chunks per thread: enough to even out one thread
 * running a quarter slower than another, in pieces small enough that the last one leaves little
 * waiting. */
enum { SHARED_PART = 4 /* the last quarter of the rows */, CHUNKS_PER_THREAD = 8 };

/* A GEMV's chunks: about this many bytes of weights each, 2 to 8 a thread (so a small matrix's are
 * smaller). Each chunk starts a new stream from DRAM, some 0.5-1 us on the Zen 5 by the differences
 * below: with 8 chunks a thread, the 1.3 MiB of gemma3-1b's Q, K and V took 37-42 us where a static
 * split took 33-35 in the same runs. Timed in place, the split's three forms alternating by layer and
 * token (bench/journal/2026-12-05-zen5-7.md), medians of 3 runs, 2 chunks a thread against 8: Q, K
 * and V 36.7 against 39.2 us, attention's output 19.9 against 21.6, gate and up 249.7 against 258.2,
 * down 127.3 against 134.3; the static split, fast on the small ones while both threads ran alike,
 * took 73 us for Q, K and V in a run where one was slowed, and 6.6 ms for the 321 MiB output matrix
 * against 6.2 with 8 chunks a thread, which it keeps. */
enum { GEMV_CHUNK_BYTES = 512 << 10, GEMV_CHUNKS_MIN = 2 };

/* Each thread first runs its own contiguous share of the first three quarters of the rows, one
 * sequential stream of weights; then the threads take the rest in chunks, each the next one free. A
 * thread slowed by something outside the job (a busy sibling hyperthread, another process, the
 * hypervisor) therefore no longer keeps the others waiting at the end of every matmul. Measured on a
 * shared 2-core VM, the time between the first and the last thread finishing, as a share of the matmul
 * time: a decode step 8-11% with every row split statically, 3-4% this way; a step of 8 tokens 16-20%,
 * 3%. */
static void split_run_chunks(int64_t total, int chunks_per_thread, atomic_int *next_chunk,
                             void (*span)(void *, int64_t, int64_t, int, int), void *arg, int ith, int nth)
{
    const int64_t shared = nth > 1 ? total / SHARED_PART : 0, own = total - shared;
    const int n_chunks = nth > 1 ? chunks_per_thread * nth : 0;
    span(arg, own * ith / nth, own * (ith + 1) / nth, ith, nth);
    for (int c; (c = atomic_fetch_add(next_chunk, 1)) < n_chunks;)
        span(arg, own + shared * c / n_chunks, own + shared * (c + 1) / n_chunks, ith, nth);
}

void woolly_split_run(int64_t total, atomic_int *next_chunk, void (*span)(void *, int64_t, int64_t, int, int),
                      void *arg, int ith, int nth)
{
    split_run_chunks(total, CHUNKS_PER_THREAD, next_chunk, span, arg, ith, nth);
}

static void matmul_span(void *arg, int64_t p0, int64_t p1, int ith, int nth)
{
    run_span(arg, p0, p1, ith, nth);
}

static void matmul_job_run(void *arg, int ith, int nth)
{
    matmul_job *j = arg;
    split_run_chunks(j->total_rows, j->chunks_per_thread, &j->next_chunk, matmul_span, j, ith, nth);
}

/* Multiply-adds below which another thread does not pay for waking it (a few microseconds). */
#define MATMUL_MIN_WORK_PER_THREAD 65536.0

void woolly_matmul_n(woolly_threadpool *pool, const woolly_matmul_out *outs, int n, const float *x, int64_t m,
                     void *pack)
{
    const enum woolly_tokens_class cls = woolly_matmul_plan_class(outs[0].plan, m);
    const woolly_kernel *k0 = outs[0].plan->step[cls].kernel;
    for (int i = 1; i < n; i++)
        if (woolly_matmul_plan_step(outs[i].plan, m)->kernel->act != k0->act) { /* different inputs */
            for (int o = 0; o < n; o++)
                woolly_matmul_n(pool, &outs[o], 1, x, m, pack);
            return;
        }
    const woolly_matrix *w0 = outs[0].w;
    matmul_job j = {
        .outs = outs,
        .n = n,
        .xk = x,
        .x_row_bytes = woolly_act_row_bytes(k0->act, w0->cols),
        .m = m,
        .k = w0->cols,
        .act = k0->act,
    };
    int threads = 0; /* the largest thread count the steps ask for, if any does */
    double bytes = 0;
    for (int i = 0; i < n; i++) {
        j.total_rows += outs[i].w->rows;
        bytes += (double)outs[i].w->rows * (double)outs[i].w->row_bytes;
        const int t = woolly_matmul_plan_step(outs[i].plan, m)->threads;
        threads = t > threads ? t : threads;
    }
    const int nth = threads > 0 ? threads
                                : woolly_threads_for(pool, (double)m * (double)j.total_rows * (double)j.k,
                                                     MATMUL_MIN_WORK_PER_THREAD);
    j.chunks_per_thread = CHUNKS_PER_THREAD;
    if (m == 1 && nth > 1) {
        const double per_thread = bytes / SHARED_PART / GEMV_CHUNK_BYTES / nth;
        j.chunks_per_thread = per_thread < GEMV_CHUNKS_MIN ? GEMV_CHUNKS_MIN
                              : per_thread > CHUNKS_PER_THREAD ? CHUNKS_PER_THREAD
                                                               : (int)per_thread;
    }
    atomic_init(&j.next_chunk, 0);
    if (j.act != WOOLLY_ACT_F32) {
        j.xk = pack;
        woolly_pack_rows_threaded(pool, nth, outs[0].plan->pack[cls], x, m, j.k, pack, j.x_row_bytes);
    }
    woolly_threadpool_run_n(pool, matmul_job_run, &j, nth);
}

void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack)
{
    const woolly_matmul_out o = {w, plan, y, y_stride};
    woolly_matmul_n(pool, &o, 1, x, m, pack);
}
