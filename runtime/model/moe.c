/* The mixture-of-experts FFN of qwen3moe, granitemoe and llama with experts (Mixtral), as llama.cpp runs
 * these three:
 *
 *   p = softmax(h Wrouter)                       over all n_expert experts
 *   E = the k largest of p                       (k = expert_used_count; a tie goes to the lower index)
 *   f = sum over e in E of  p_e / sum_E(p) * (silu(h Wgate_e) * (h Wup_e)) Wdown_e
 *
 * Each expert is a matrix of its own (model.h's woolly_experts), repacked into its kernels' layout and
 * planned like any other, so every ISA level's kernels run it. A batch's (token, expert) pairs are
 * grouped by expert; each expert that any token chose runs once over its tokens (their rows gathered,
 * WOOLLY_FFN_TOKENS at a time), which is a GEMV reading only that expert's rows when one token chose it
 * and a GEMM of the group's size otherwise; its outputs are added to their tokens' sums with the
 * routing weights. An expert no token chose is not read.
 *
 * Decoding one token, its k experts run as one dispatch when the threads divide them evenly (one thread
 * included): each thread takes the next expert free and runs its gate, up, activation and down, every
 * matrix one sequential stream from its start, with no barrier between gate/up and down (measured
 * on the Zen 5, granitemoe-3b tg128: 79.2 t/s against 75.3 with the two dispatches below, medians of 5
 * alternated runs, every pair 1.02-1.20x); a thread left without an expert takes chunks of rows from
 * the back of the others' (expert_job). Otherwise as two dispatches rather than k of each: the gate
 * and up matrices of all k in one (the input packed once, all their rows split across the threads),
 * then the activation, then the down matrices of all k in one whose threads each own a range of the
 * output's rows, compute it for every expert and sum the k results there with the routing weights.
 * Either way the k down outputs are added in expert order, as the batched path adds them: the same
 * arithmetic, bit for bit.
 *
 * A batch of several tokens (a server step, a prompt) does the same for all its experts, a slice of at
 * most s->slice tokens at a time (the step's buffers' size): the slice's inputs packed once, then in one
 * dispatch each thread takes the next chosen expert free and runs it whole over the tokens routed to it
 * (their packed inputs gathered, gate, up, the activation, down's input packed, down), and the threads
 * help each other with the last ones, as a lone token's do (the same expert_job). (For the tests'
 * comparison, the two-dispatch form: their groups' inputs packed, then gate and up of every chosen expert
 * in one dispatch, the activation, down of every one in another.) Then the weighted sum in the general
 * path's order. The general path takes two matmuls per expert (gate and up, then down), each a dispatch
 * ending at a barrier and, for more than one token, another before it packing its input, with the
 * gathering, the activation and the weighted sum on the calling thread between them: with 8 tokens
 * choosing 8 of 128 experts each, some 100 dispatches of a GEMV or two per layer; on a prompt of 512
 * tokens, the one dispatch ran granitemoe-3b's pp512 1.11x as fast, qwen3moe-30b-a3b-12l's 1.06x
 * (bench/journal/2026-12-06-zen5.md). The general path remains for an importance matrix's collection
 * (it observes each expert's input) and where a profile gives an expert's gate and up different
 * activation formats. */
#include "moe.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "imatrix.h"

/* A grouped step's buffers (moe.h: gate, up and down outputs and packed inputs, a few floats of n_embd
 * and n_ff_exp a pair) take at most about this many bytes; a longer batch runs as slices of tokens,
 * each at least the small-batch class's largest. At 128 MiB granitemoe-3b's and qwen3moe-30b-a3b-12l's
 * slices are 910 and 655 tokens (a default batch of 512 in one), Mixtral's 273. */
enum { MOE_STEP_BYTES = 128 << 20, MOE_SLICE_MIN = WOOLLY_TOKENS_SMALL_MAX };

/* One of the experts of a dispatch (expert_job below): the chunks of its rows still to claim, of gate
 * and up (one list) and of down, and whether the inputs of gate and up, and of down, are ready. */
typedef _Atomic uint64_t expert_chunks; /* chunks [lo, hi) not yet claimed: lo in the low 32 bits */

struct woolly_moe_expert_rows {
    expert_chunks gu, down;
    atomic_int gu_done;   /* gate's and up's chunks finished */
    atomic_bool in_ready; /* the expert's tokens' inputs are packed */
    atomic_bool ready;    /* down's input is packed */
};

int woolly_moe_state_alloc(woolly_moe_state *s, const woolly_config *p, size_t n_batch, size_t n_ffn,
                           woolly_error *err)
{
    *s = (woolly_moe_state){0};
    if (p->n_expert == 0)
        return 0;
    const size_t n_exp = (size_t)p->n_expert, k = (size_t)p->n_expert_used, d = (size_t)p->n_embd;
    s->logits = malloc(sizeof(float) * n_batch * n_exp);
    s->chosen = malloc(sizeof(int32_t) * n_batch * k);
    s->weight = malloc(sizeof(float) * n_batch * k);
    s->start = malloc(sizeof(int32_t) * (n_exp + 1));
    s->token = malloc(sizeof(int32_t) * n_batch * k);
    s->pair_w = malloc(sizeof(float) * n_batch * k);
    s->pair_at = malloc(sizeof(int32_t) * n_batch * k);
    s->in = malloc(sizeof(float) * n_ffn * d);
    s->out = malloc(sizeof(float) * n_ffn * d);
    s->sum = malloc(sizeof(float) * n_batch * d);
    const size_t ffe = (size_t)p->n_ff_exp, widest = ffe > d ? ffe : d;
    /* the pairs of one step: a lone token's k, or those of a slice of a batch */
    size_t slice = MOE_STEP_BYTES / (sizeof(float) * (3 * ffe + d + widest) * k);
    slice = slice > MOE_SLICE_MIN ? slice : MOE_SLICE_MIN;
    slice = slice < n_batch ? slice : n_batch;
    s->slice = (int32_t)slice;
    const size_t pairs = slice * k;
    const size_t chosen = pairs < n_exp ? pairs : n_exp; /* the most experts one step chooses */
    s->one_e = malloc(sizeof(int32_t) * k);
    s->one_w = malloc(sizeof(float) * k);
    s->outs = malloc(sizeof(woolly_matmul_out) * 3 * chosen);
    s->rows = malloc(sizeof *s->rows * chosen);
    s->row0 = malloc(sizeof(int32_t) * (chosen + 1));
    s->units = malloc(sizeof(woolly_moe_unit) * 2 * chosen); /* gate and up of each */
    s->gate = malloc(sizeof(float) * pairs * ffe);
    s->up = malloc(sizeof(float) * pairs * ffe);
    s->down = malloc(sizeof(float) * pairs * d);
    /* packed inputs: F32, the widest format, of the experts' inputs (n_embd) or down's (n_ff_exp) */
    s->pack = malloc(sizeof(float) * pairs * widest);
    s->pack_down = malloc(sizeof(float) * pairs * ffe);
    s->pack_tokens = malloc(sizeof(float) * slice * d);
    if (!s->logits || !s->chosen || !s->weight || !s->start || !s->token || !s->pair_w || !s->pair_at ||
        !s->in || !s->out || !s->sum || !s->one_e || !s->one_w || !s->outs || !s->rows || !s->row0 ||
        !s->units || !s->gate || !s->up || !s->down || !s->pack || !s->pack_down || !s->pack_tokens)
        return woolly_fail(err, "out of memory for the experts' buffers; try a smaller --batch-size");
    return 0;
}

void woolly_moe_state_free(woolly_moe_state *s)
{
    free(s->logits), free(s->chosen), free(s->weight), free(s->start), free(s->token), free(s->pair_w);
    free(s->pair_at);
    free(s->in), free(s->out), free(s->sum);
    free(s->one_e), free(s->one_w), free(s->outs), free(s->rows), free(s->row0), free(s->units);
    free(s->gate), free(s->up), free(s->down);
    free(s->pack), free(s->pack_down), free(s->pack_tokens);
    *s = (woolly_moe_state){0};
}

void woolly_moe_route(const float *logits, int32_t n_expert, int32_t k, int32_t *chosen, float *weight)
{
    /* The softmax's denominator cancels in the renormalized weights, so the k largest logits and their
     * exponentials relative to the largest are all it takes: exp(l_e - max) / sum over E. (llama.cpp
     * clamps that sum at 2^-14; the chosen probabilities sum to at least k / n_expert, far above it.) */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j; i++)
                taken |= chosen[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best]))
                best = e;
        }
        chosen[j] = best;
    }
    const float top = logits[chosen[0]];
    double sum = 0.0;
    for (int32_t j = 0; j < k; j++) {
        weight[j] = expf(logits[chosen[j]] - top);
        sum += weight[j];
    }
    for (int32_t j = 0; j < k; j++)
        weight[j] = (float)(weight[j] / sum);
}

/* Groups the (token, expert) pairs of the batch's tokens t0 .. t0 + n by expert, tokens in batch order
 * and numbered from 0 at t0 (a slice's own rows): a counting sort. Each token's k places in that order
 * go to pair_at, ascending (the order add_weighted meets them in). */
static void group_by_expert(woolly_moe_state *s, int32_t t0, int32_t n, int32_t n_expert, int32_t k)
{
    const int32_t *chosen = s->chosen + (size_t)t0 * k;
    const float *weight = s->weight + (size_t)t0 * k;
    memset(s->start, 0, sizeof(int32_t) * (size_t)(n_expert + 1));
    for (int32_t i = 0; i < n * k; i++)
        s->start[chosen[i] + 1]++;
    for (int32_t e = 0; e < n_expert; e++)
        s->start[e + 1] += s->start[e];
    int32_t *next = s->start; /* advanced as pairs land, then restored */
    for (int32_t t = 0; t < n; t++)
        for (int32_t j = 0; j < k; j++) {
            const int32_t e = chosen[(size_t)t * k + j], at = next[e]++;
            s->token[at] = t;
            s->pair_w[at] = weight[(size_t)t * k + j];
            int32_t *places = s->pair_at + (size_t)t * k, i = j;
            for (; i > 0 && places[i - 1] > at; i--) /* insertion: k is a few */
                places[i] = places[i - 1];
            places[i] = at;
        }
    for (int32_t e = n_expert; e > 0; e--)
        s->start[e] = s->start[e - 1];
    s->start[0] = 0;
}

static void matmul(woolly_context *c, const woolly_matrix *w, const float *x, int32_t m, float *y)
{
    if (c->imatrix)
        woolly_imatrix_add(c->imatrix, w, x, m);
    woolly_matmul(c->pool, &c->plans[w->id], w, x, m, y, (size_t)w->rows, c->s.pack);
}

/* y += w * x over n values: every path sums a token's experts with this loop, in one order, so that
 * they give the same bits. */
static inline void add_scaled(float *restrict y, float w, const float *restrict x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        y[j] += w * x[j];
}

/* Adds pairs i0 .. i0 + m of the grouped order (one expert's tokens, or several experts' in a row) to
 * their tokens' rows of sum with their weights: out holds their outputs, a row of n_embd each. Experts in
 * index order and each one's tokens in batch order, the one order every path adds them in. */
static void add_weighted(const woolly_moe_state *s, float *sum, int32_t i0, int32_t m, const float *out,
                         int64_t d)
{
    for (int32_t i = 0; i < m; i++)
        add_scaled(sum + (size_t)s->token[i0 + i] * d, s->pair_w[i0 + i], out + (size_t)i * d, d);
}

static bool g_one_step = true;

void woolly_moe_set_one_step(bool on)
{
    g_one_step = on;
}

static bool g_whole_experts = true;

void woolly_moe_set_whole_experts(bool on)
{
    g_whole_experts = on;
}

static int32_t g_slice_cap;

void woolly_moe_set_slice_cap(int32_t tokens)
{
    g_slice_cap = tokens;
}

/* ---- one token: its k experts as one step ------------------------------------------------------- */

/* Multiply-adds below which another thread does not pay for waking it (matmul.c's threshold). */
#define MIN_WORK_PER_THREAD 65536.0

/* The threads for one token's products outs[0 .. n) of `work` multiply-adds, as woolly_matmul_n counts
 * them: the most a step asks for (a tuning profile's split), else as many as the work repays. */
static int one_token_threads(const woolly_context *c, const woolly_matmul_out *outs, int n, double work)
{
    int threads = 0;
    for (int i = 0; i < n; i++) {
        const int t = outs[i].plan->step[WOOLLY_TOKENS_1].threads;
        threads = t > threads ? t : threads;
    }
    return threads > 0 ? threads : woolly_threads_for(c->pool, work, MIN_WORK_PER_THREAD);
}

/* Rows [r0, r1) of the weighted sum of a token's k experts' down outputs, in expert order (that of
 * add_weighted, so that every path gives the same bits). An expert at a time, so that the row loop
 * vectorizes: summed a row at a time, through the outputs' pointers, it took 16 us a layer (2048 rows,
 * 8 experts) on the calling thread while the others waited. */
static void sum_experts(const woolly_matmul_out *down, const float *w, int k, int64_t r0, int64_t r1,
                        float *restrict y)
{
    for (int64_t r = r0; r < r1; r++)
        y[r] = 0.0f;
    for (int e = 0; e < k; e++)
        add_scaled(y + r0, w[e], down[e].y + r0, r1 - r0);
}

/* The down matrices of a token's k experts and the weighted sum of their outputs, for the rows a
 * thread owns. */
typedef struct down_job {
    const woolly_matmul_out *outs; /* [k]: expert j's down matrix, into its own row of outputs */
    const float *w;                /* [k] the routing weights */
    int k;
    const char *xk; /* expert j's packed input at xk + j * x_row_bytes */
    size_t x_row_bytes;
    float *y; /* [d] the weighted sum */
    int64_t d, align;
    atomic_int next_chunk;
} down_job;

static void down_rows(down_job *j, int64_t u0, int64_t u1, int ith, int nth)
{
    const int64_t r0 = u0 * j->align < j->d ? u0 * j->align : j->d;
    const int64_t r1 = u1 * j->align < j->d ? u1 * j->align : j->d;
    if (r0 >= r1)
        return;
    for (int e = 0; e < j->k; e++)
        woolly_matmul_rows(&j->outs[e], 1, j->xk + (size_t)e * j->x_row_bytes, r0, r1, ith, nth);
    sum_experts(j->outs, j->w, j->k, r0, r1, j->y);
}

static void down_span(void *arg, int64_t u0, int64_t u1, int ith, int nth)
{
    down_rows(arg, u0, u1, ith, nth);
}

/* As matmul.c splits a dispatch (woolly_split_run), rows in units of the kernel's tile. */
static void down_job_run(void *arg, int ith, int nth)
{
    down_job *j = arg;
    woolly_split_run((j->d + j->align - 1) / j->align, &j->next_chunk, down_span, j, ith, nth);
}

/* Experts shared out whole among the threads, each running gate, up, the activation and down of its
 * experts with no barrier between them: one dispatch instead of two, the activation and the packing of
 * down's input done in parallel, and every matrix read by one thread from its start, one sequential
 * stream. Expert e runs over its tokens, rows row0[e] .. row0[e + 1] of the gate, up and down outputs
 * (a lone token's k experts: one row each); the caller adds the down rows with the routing weights.
 *
 * A thread that finds no expert left helps the others finish theirs: an expert's rows are chunks, its
 * owner claims them from the front and a helper from the back, so that the threads end within a chunk
 * of each other rather than an expert (timed in place on qwen3moe-30b-a3b-12l, the threads' waits at the
 * end of the dispatch added up to 60-80 us a layer, an expert taking about 100; with the helpers the
 * experts' dispatch read its weights at 0.89 of the output matrix's rate in the same run, against 0.86
 * without, medians of 8 runs, 7 of 8 pairs ahead: bench/journal/2026-12-05-zen5-6.md). Gate's and up's chunks
 * are one list (gate's first), open once the owner has packed the expert's tokens' inputs (a lone token's
 * input is packed once, before the dispatch); down's open once the owner has packed down's input. Which
 * thread runs a chunk changes no bits: every row is one kernel call's, with the same input. */
typedef struct expert_job {
    const woolly_matmul_out *gu, *down; /* [2n]: gate, up of expert e at 2e, 2e + 1; [n] down */
    int n;
    const int32_t *row0; /* [n + 1] */
    const void *hk;      /* a lone token's input, packed for every gate and up; NULL: each expert's own */
    const float *h;      /* the tokens' inputs (d floats a row) ... */
    const int32_t *token; /* ... and each row's token, for an expert to pack its own */
    const char *packed;   /* the tokens' inputs packed once (as every expert's gate and up read), or NULL */
    char *xk, *dk; /* expert e's packed inputs of gate and up, of down, from row row0[e] of F32-wide rows */
    woolly_swiglu_fn swiglu;
    int64_t d, ffe;
    struct woolly_moe_expert_rows *rows; /* [n] */
    int64_t gu_rows, down_rows;          /* rows per chunk: whole tiles of every kernel involved */
    int32_t gu_chunks, down_chunks;      /* gate's chunks (up has as many), down's */
    atomic_int next;                     /* the next expert no thread has taken */
} expert_job;

static int64_t tokens_of(const expert_job *j, int e)
{
    return j->row0[e + 1] - j->row0[e];
}

/* Rows a chunk of the products outs[0 .. n), product i of expert i / per (whose tokens are rows row0[e] ..
 * row0[e + 1]): about 64 (a Q4_K chunk of 2048 columns is 72 KiB, some 3 us of one core's stream), whole
 * tiles of each one's kernel for its expert's token count. */
static int64_t chunk_rows(const woolly_matmul_out *outs, int n, const int32_t *row0, int per)
{
    int64_t r = 64;
    for (int i = 0; i < n; i++) {
        const int64_t m = row0[i / per + 1] - row0[i / per];
        const int64_t t = woolly_matmul_plan_step(outs[i].plan, m)->kernel->tile_n;
        while (t > 1 && r % t)
            r += 64;
    }
    return r;
}

/* Claims chunks [*i, *i + n) of c, n > 0 (false if none is left): a helper one from the back; the owner
 * from the front all that is left (all), or half of it. Each claim is a call of the kernel, so the
 * owner makes few while there is much to do, and near the end the halves are single chunks, which keeps
 * the threads' finish within one. */
static bool claim(expert_chunks *c, bool back, bool all, int32_t *i, int32_t *n)
{
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    for (;;) {
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi)
            return false;
        const uint32_t take = all ? hi - lo : back || hi - lo < 2 ? 1 : (hi - lo) / 2;
        const uint64_t w = back ? (uint64_t)(hi - take) << 32 | lo : (uint64_t)hi << 32 | (lo + take);
        if (atomic_compare_exchange_weak_explicit(c, &v, w, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *i = (int32_t)(back ? hi - take : lo);
            *n = (int32_t)take;
            return true;
        }
    }
}

/* Rows [i * rows, (i + n) * rows) of o (its last row at most) for m tokens. */
static void run_chunks(const woolly_matmul_out *o, int64_t m, const void *xk, int64_t rows, int32_t i,
                       int32_t n, int ith, int nth)
{
    const int64_t r0 = (int64_t)i * rows, r1 = (int64_t)(i + n) * rows;
    woolly_matmul_rows(o, m, xk, r0, r1 < o->w->rows ? r1 : o->w->rows, ith, nth);
}

static const void *gu_input(const expert_job *j, int e)
{
    return j->hk ? j->hk : j->xk + (size_t)j->row0[e] * (size_t)j->d * sizeof(float);
}

/* Chunks [i, i + n) of expert e's gate and up (gate's chunks first), then marks them done. */
static void run_gu_chunks(expert_job *j, int e, int32_t i, int32_t n, int ith, int nth)
{
    const int64_t m = tokens_of(j, e);
    const void *xk = gu_input(j, e);
    const int32_t cg = j->gu_chunks, gate_end = i + n < cg ? i + n : cg;
    if (i < cg)
        run_chunks(&j->gu[2 * e], m, xk, j->gu_rows, i, gate_end - i, ith, nth);
    if (i + n > cg) {
        const int32_t u0 = i > cg ? i - cg : 0;
        run_chunks(&j->gu[2 * e + 1], m, xk, j->gu_rows, u0, i + n - cg - u0, ith, nth);
    }
    atomic_fetch_add_explicit(&j->rows[e].gu_done, n, memory_order_release);
}

/* Expert e's down input: its gate rows (F32), or their packing. */
static const void *down_input(const expert_job *j, int e)
{
    if (woolly_matmul_plan_step(j->down[e].plan, tokens_of(j, e))->kernel->act == WOOLLY_ACT_F32)
        return j->gu[2 * e].y;
    return j->dk + (size_t)j->row0[e] * (size_t)j->ffe * sizeof(float);
}

/* Expert e run by its owner: its tokens' inputs packed (unless shared), gate and up from the front, the
 * activation and down's packing once every chunk of them is done (a helper may still be running one),
 * then down from the front. */
static void run_expert(expert_job *j, int e, int ith, int nth)
{
    struct woolly_moe_expert_rows *r = &j->rows[e];
    const int64_t m = tokens_of(j, e);
    /* Helpers come only once every expert is taken, so only the last nth can have one: the others' owner
     * claims each list whole (on qwen3moe-30b-a3b-12l, 2 sequences decoding together, timed in place,
     * the even steps' experts took 3-6% less time than with halves throughout, in each of 3 runs; 1, 4, 8
     * sequences level: bench/journal/2026-12-05-zen5-7.md). */
    const bool all = e < j->n - nth;
    if (!j->hk) {
        const woolly_matmul_plan *plan = j->gu[2 * e].plan;
        const size_t row = woolly_act_row_bytes(woolly_matmul_plan_step(plan, m)->kernel->act, j->d);
        char *xk = (char *)gu_input(j, e);
        for (int64_t i = 0; i < m; i++) {
            const size_t t = (size_t)j->token[j->row0[e] + i];
            char *dst = xk + (size_t)i * row;
            if (j->packed)
                memcpy(dst, j->packed + t * row, row);
            else
                woolly_matmul_plan_pack(plan, m, j->h + t * (size_t)j->d, 0, 1, j->d, dst, row);
        }
        atomic_store_explicit(&r->in_ready, true, memory_order_release);
    }
    int32_t i, n;
    while (claim(&r->gu, false, all, &i, &n))
        run_gu_chunks(j, e, i, n, ith, nth);
    while (atomic_load_explicit(&r->gu_done, memory_order_acquire) < 2 * j->gu_chunks)
        woolly_cpu_relax();
    float *g = j->gu[2 * e].y;
    woolly_gated_rows(j->swiglu, g, j->gu[2 * e + 1].y, m, j->ffe);
    const void *dk = down_input(j, e);
    if (dk != g) {
        const woolly_matmul_plan *plan = j->down[e].plan;
        const size_t row = woolly_act_row_bytes(woolly_matmul_plan_step(plan, m)->kernel->act, j->ffe);
        woolly_matmul_plan_pack(plan, m, g, (size_t)j->ffe, m, j->ffe, (void *)dk, row);
    }
    atomic_store_explicit(&r->ready, true, memory_order_release);
    while (claim(&r->down, false, all, &i, &n))
        run_chunks(&j->down[e], m, dk, j->down_rows, i, n, ith, nth);
}

/* With every expert taken: chunks from the back of the others' until none is left to claim. Waits
 * (spinning) only while an expert's gate and up are all claimed but its down's input is not packed, or
 * its tokens' inputs are not packed yet. */
static void help_experts(expert_job *j, int ith, int nth)
{
    for (bool waiting = true; waiting;) {
        waiting = false;
        for (int e = 0; e < j->n; e++) {
            struct woolly_moe_expert_rows *r = &j->rows[e];
            int32_t i, n;
            if (!atomic_load_explicit(&r->in_ready, memory_order_acquire)) {
                waiting = true;
                continue;
            }
            if (claim(&r->gu, true, false, &i, &n)) {
                run_gu_chunks(j, e, i, n, ith, nth);
                waiting = true;
                break;
            }
            if (!atomic_load_explicit(&r->ready, memory_order_acquire)) {
                waiting = true;
                continue;
            }
            if (claim(&r->down, true, false, &i, &n)) {
                run_chunks(&j->down[e], tokens_of(j, e), down_input(j, e), j->down_rows, i, n, ith, nth);
                waiting = true;
                break;
            }
        }
        if (waiting)
            woolly_cpu_relax();
    }
}

/* Each thread takes the next expert free until none is left: one slowed by something outside the job
 * (a busy sibling, another process) takes fewer, rather than keeping the others waiting for its share;
 * then it helps with the rest. */
static void expert_job_run(void *arg, int ith, int nth)
{
    expert_job *j = arg;
    for (int e; (e = atomic_fetch_add(&j->next, 1)) < j->n;)
        run_expert(j, e, ith, nth);
    if (nth > 1)
        help_experts(j, ith, nth);
}

/* Runs the n experts of gu and down (their tokens rows row0[e] .. row0[e + 1]) on nth threads: with hk,
 * a lone token's packed input for every gate and up; without, each expert gathers its tokens' rows
 * (token[] gives each row's) at rows row0[e] of s->pack, from packed (the tokens' rows packed once) or
 * packing them from h. Down's inputs go to s->pack_down. */
static void run_expert_job(woolly_context *c, const woolly_matmul_out *gu, const woolly_matmul_out *down,
                           int n, const int32_t *row0, const void *hk, const float *h, const void *packed,
                           int nth)
{
    woolly_moe_state *s = &c->s.moe;
    const int64_t d = c->model->cfg.n_embd, ffe = c->model->cfg.n_ff_exp;
    expert_job j = {.gu = gu,
                    .down = down,
                    .n = n,
                    .row0 = row0,
                    .hk = hk,
                    .h = h,
                    .token = s->token,
                    .packed = packed,
                    .xk = s->pack,
                    .dk = s->pack_down,
                    .swiglu = c->ops.swiglu,
                    .d = d,
                    .ffe = ffe,
                    .rows = s->rows,
                    .gu_rows = chunk_rows(gu, 2 * n, row0, 2),
                    .down_rows = chunk_rows(down, n, row0, 1)};
    j.gu_chunks = (int32_t)((ffe + j.gu_rows - 1) / j.gu_rows);
    j.down_chunks = (int32_t)((d + j.down_rows - 1) / j.down_rows);
    for (int32_t e = 0; e < n; e++) {
        atomic_init(&s->rows[e].gu, (uint64_t)(2 * j.gu_chunks) << 32);
        atomic_init(&s->rows[e].down, (uint64_t)j.down_chunks << 32);
        atomic_init(&s->rows[e].gu_done, 0);
        atomic_init(&s->rows[e].in_ready, hk != NULL);
        atomic_init(&s->rows[e].ready, false);
    }
    atomic_init(&j.next, 0);
    woolly_threadpool_run_n(c->pool, expert_job_run, &j, nth);
}

/* A token's experts shared out whole (expert_job) when the threads divide them evenly and gate and up
 * read one activation format: its output to y, the k down rows added in expert order as down_rows adds
 * them. False, and nothing done, otherwise. */
static bool ffn_experts_whole(woolly_context *c, const woolly_matmul_out *gu, const woolly_matmul_out *down,
                              const float *h, float *y)
{
    woolly_moe_state *s = &c->s.moe;
    const int32_t k = c->model->cfg.n_expert_used;
    const int64_t d = c->model->cfg.n_embd, ffe = c->model->cfg.n_ff_exp;
    if (!g_whole_experts)
        return false;
    const double work = (double)k * (double)d * (double)ffe;
    const int t_gu = one_token_threads(c, gu, 2 * k, 2.0 * work);
    const int t_down = one_token_threads(c, down, k, work);
    const int nth = t_gu > t_down ? t_gu : t_down;
    const enum woolly_act act = gu[0].plan->step[WOOLLY_TOKENS_1].kernel->act;
    for (int32_t i = 1; i < 2 * k; i++)
        if (gu[i].plan->step[WOOLLY_TOKENS_1].kernel->act != act)
            return false;
    if (k % nth != 0)
        return false;
    const void *hk = h;
    if (act != WOOLLY_ACT_F32) {
        woolly_matmul_plan_pack(gu[0].plan, 1, h, 0, 1, d, c->s.pack, woolly_act_row_bytes(act, d));
        hk = c->s.pack;
    }
    for (int32_t e = 0; e <= k; e++)
        s->row0[e] = e;
    run_expert_job(c, gu, down, k, s->row0, hk, h, NULL, nth);
    sum_experts(down, s->one_w, k, 0, d, y);
    return true;
}
/* The FFN of one token (h, its normalized row) whose experts are chosen: its output to y. False, and
 * nothing done, if the experts' down matrices do not all read one activation format (a tuning profile
 * gave them different kernels): then the general path runs. */
static bool ffn_one_token(woolly_context *c, const woolly_layer *L, const float *h, float *y)
{
    const woolly_config *p = &c->model->cfg;
    woolly_moe_state *s = &c->s.moe;
    const int32_t k = p->n_expert_used;
    const int64_t d = p->n_embd, ffe = p->n_ff_exp;
    const woolly_kernel *k0 = c->plans[L->down_exps.each[s->chosen[0]].id].step[WOOLLY_TOKENS_1].kernel;
    for (int32_t j = 1; j < k; j++)
        if (c->plans[L->down_exps.each[s->chosen[j]].id].step[WOOLLY_TOKENS_1].kernel->act != k0->act)
            return false;

    /* the experts in index order, the order in which the batched path adds them */
    for (int32_t j = 0; j < k; j++) {
        int32_t i = j;
        for (; i > 0 && s->one_e[i - 1] > s->chosen[j]; i--)
            s->one_e[i] = s->one_e[i - 1], s->one_w[i] = s->one_w[i - 1];
        s->one_e[i] = s->chosen[j], s->one_w[i] = s->weight[j];
    }
    woolly_matmul_out *gu = s->outs, *down = s->outs + 2 * k;
    for (int32_t j = 0; j < k; j++) {
        const woolly_matrix *g = &L->gate_exps.each[s->one_e[j]], *u = &L->up_exps.each[s->one_e[j]],
                            *dn = &L->down_exps.each[s->one_e[j]];
        gu[2 * j] = (woolly_matmul_out){g, &c->plans[g->id], s->gate + (size_t)j * ffe, (size_t)g->rows};
        gu[2 * j + 1] = (woolly_matmul_out){u, &c->plans[u->id], s->up + (size_t)j * ffe, (size_t)u->rows};
        down[j] = (woolly_matmul_out){dn, &c->plans[dn->id], s->down + (size_t)j * d, (size_t)d};
    }
    if (ffn_experts_whole(c, gu, down, h, y))
        return true;
    woolly_matmul_n(c->pool, gu, 2 * k, h, 1, c->s.pack);
    woolly_gated_rows(c->ops.swiglu, s->gate, s->up, k, ffe);

    down_job j = {.outs = down,
                  .w = s->one_w,
                  .k = k,
                  .xk = (const char *)s->gate,
                  .x_row_bytes = (size_t)ffe * sizeof(float),
                  .y = y,
                  .d = d,
                  .align = k0->tile_n > 0 ? k0->tile_n : 1};
    const woolly_pack_fn pack = down[0].plan->pack[WOOLLY_TOKENS_1];
    if (k0->act != WOOLLY_ACT_F32) {
        j.x_row_bytes = woolly_act_row_bytes(k0->act, ffe);
        for (int32_t e = 0; e < k; e++)
            pack(s->gate + (size_t)e * ffe, ffe, (char *)s->pack + (size_t)e * j.x_row_bytes);
        j.xk = s->pack;
    }
    atomic_init(&j.next_chunk, 0);
    woolly_threadpool_run_n(c->pool, down_job_run, &j,
                            one_token_threads(c, down, k, (double)k * (double)d * (double)ffe));
    return true;
}

/* ---- a batch: all its experts as one step per slice -------------------------------------------- */

/* The rows of a list of products, each with its own packed input and token count, in one dispatch, their
 * row tiles split as matmul.c splits one product's rows (woolly_split_run). */
typedef struct units_job {
    const woolly_moe_unit *u;
    int n;
    int64_t tiles;
    atomic_int next_chunk;
} units_job;

static void units_span(void *arg, int64_t t0, int64_t t1, int ith, int nth)
{
    const units_job *j = arg;
    for (int i = 0; i < j->n && t0 < t1; i++) {
        const woolly_moe_unit *u = &j->u[i];
        if (t0 >= u->tile0 + u->n_tiles)
            continue;
        const int64_t a = t0 - u->tile0, b = (t1 < u->tile0 + u->n_tiles ? t1 : u->tile0 + u->n_tiles) - u->tile0;
        const int64_t rows = u->o.w->rows, r0 = a * u->align, r1 = b * u->align < rows ? b * u->align : rows;
        woolly_matmul_rows(&u->o, u->m, u->xk, r0, r1, ith, nth);
        t0 = u->tile0 + b;
    }
}

static void units_job_run(void *arg, int ith, int nth)
{
    units_job *j = arg;
    woolly_split_run(j->tiles, &j->next_chunk, units_span, j, ith, nth);
}

/* Adds unit i: matrix w of one expert, for m tokens whose input is packed at xk, into y (rows ystride
 * apart). Returns its multiply-adds. */
static double add_unit(woolly_context *c, int i, const woolly_matrix *w, int32_t m, const void *xk, float *y,
                       size_t ystride)
{
    woolly_moe_unit *u = &c->s.moe.units[i];
    const woolly_matmul_plan *plan = &c->plans[w->id];
    const woolly_kernel *kn = woolly_matmul_plan_step(plan, m)->kernel;
    u->o = (woolly_matmul_out){w, plan, y, ystride};
    u->m = m;
    u->xk = xk;
    u->align = kn->tile_n > 0 ? kn->tile_n : 1;
    u->n_tiles = (w->rows + u->align - 1) / u->align;
    u->tile0 = i > 0 ? u[-1].tile0 + u[-1].n_tiles : 0;
    return (double)m * (double)w->rows * (double)w->cols;
}

static void run_units(woolly_context *c, int n_units, double work)
{
    const woolly_moe_unit *u = c->s.moe.units;
    units_job j = {.u = u, .n = n_units, .tiles = u[n_units - 1].tile0 + u[n_units - 1].n_tiles};
    int threads = 0; /* as woolly_matmul_n: the most a step asks for, else as many as the work repays */
    for (int i = 0; i < n_units; i++) {
        const int t = woolly_matmul_plan_step(u[i].o.plan, u[i].m)->threads;
        threads = t > threads ? t : threads;
    }
    atomic_init(&j.next_chunk, 0);
    woolly_threadpool_run_n(c->pool, units_job_run, &j,
                            threads > 0 ? threads : woolly_threads_for(c->pool, work, MIN_WORK_PER_THREAD));
}

/* The activation format of matrix w's kernel for m tokens. */
static enum woolly_act act_of(const woolly_context *c, const woolly_matrix *w, int32_t m)
{
    return woolly_matmul_plan_step(&c->plans[w->id], m)->kernel->act;
}

/* The threads for a batch's experts: as run_units counts them, the most any of their steps asks for,
 * else as many as the work repays. The chosen experts' count to *groups. */
static int grouped_threads(const woolly_context *c, const woolly_layer *L, int *groups)
{
    const woolly_moe_state *s = &c->s.moe;
    const woolly_config *p = &c->model->cfg;
    int threads = 0;
    double work = 0;
    *groups = 0;
    for (int32_t e = 0; e < p->n_expert; e++) {
        const int32_t m = s->start[e + 1] - s->start[e];
        if (m == 0)
            continue;
        ++*groups;
        const woolly_matrix *w[3] = {&L->gate_exps.each[e], &L->up_exps.each[e], &L->down_exps.each[e]};
        for (int i = 0; i < 3; i++) {
            const int t = woolly_matmul_plan_step(&c->plans[w[i]->id], m)->threads;
            threads = t > threads ? t : threads;
            work += (double)m * (double)w[i]->rows * (double)w[i]->cols;
        }
    }
    return threads > 0 ? threads : woolly_threads_for(c->pool, work, MIN_WORK_PER_THREAD);
}

/* A batch's routing and the weighted sum of a slice's pairs, token by token across the threads. On the
 * calling thread alone they took 1.0% and 2.9% of granitemoe-3b's pp512 samples while the other thread
 * waited; split, the sum reads memory-bound (4.7% of the samples over two threads: about 2.3% of the
 * time) and the routing halves (bench/journal/2026-12-06-zen5-2.md). Each token's pairs are added in
 * the grouped order (pair_at), as add_weighted adds them, so the bits are the same. */
typedef struct token_job token_job;
struct token_job {
    void (*one)(const token_job *j, int64_t t); /* the work of token t */
    woolly_moe_state *s;
    int32_t n, n_expert, k;
    int64_t d;
    float *sum;       /* the slice's rows of the sum */
    const float *out; /* its pairs' outputs, a row of d each */
};

static void route_one(const token_job *j, int64_t t)
{
    const woolly_moe_state *s = j->s;
    woolly_moe_route(s->logits + (size_t)t * j->n_expert, j->n_expert, j->k, s->chosen + (size_t)t * j->k,
                     s->weight + (size_t)t * j->k);
}

static void combine_one(const token_job *j, int64_t t)
{
    const woolly_moe_state *s = j->s;
    for (int32_t i = 0; i < j->k; i++) {
        const int32_t at = s->pair_at[(size_t)t * j->k + i];
        add_scaled(j->sum + (size_t)t * j->d, s->pair_w[at], j->out + (size_t)at * j->d, j->d);
    }
}

static void token_job_run(void *arg, int ith, int nth)
{
    const token_job *j = arg;
    long long t0, t1;
    woolly_split_range(j->n, 1, ith, nth, &t0, &t1);
    for (long long t = t0; t < t1; t++)
        j->one(j, t);
}

/* Routes the n tokens whose logits are in s->logits. */
static void route_tokens(woolly_context *c, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    token_job j = {.one = route_one, .s = &c->s.moe, .n = n, .n_expert = p->n_expert, .k = p->n_expert_used};
    const double work = (double)n * p->n_expert * p->n_expert_used;
    woolly_threadpool_run_n(c->pool, token_job_run, &j,
                            woolly_threads_for(c->pool, work, MIN_WORK_PER_THREAD));
}

/* Adds the outputs of a slice's pairs (out, grouped by expert) to its n tokens' rows of sum. */
static void combine_pairs(woolly_context *c, float *sum, int32_t n, const float *out)
{
    const woolly_config *p = &c->model->cfg;
    token_job j = {.one = combine_one, .s = &c->s.moe, .n = n, .k = p->n_expert_used, .d = p->n_embd,
                   .sum = sum, .out = out};
    const double work = (double)n * p->n_expert_used * p->n_embd;
    woolly_threadpool_run_n(c->pool, token_job_run, &j,
                            woolly_threads_for(c->pool, work, MIN_WORK_PER_THREAD));
}

/* A batch's n token rows of h packed once into s->pack_tokens for the n_gu gate and up products, where
 * all of them pack their input alike: each token is the input of k experts, and packed by each it was
 * packed k times (7% of granitemoe-3b's pp512 samples). NULL where they do not, or read F32, or for a few
 * tokens (MOE_SLICE_MIN at most: a server step's, whose experts pack their own in parallel rather than
 * wait for a dispatch), and the experts pack their own. */
static const void *pack_tokens(woolly_context *c, const woolly_matmul_out *gu, int n_gu, const int32_t *row0,
                               const float *h, int32_t n, int nth)
{
    if (n <= MOE_SLICE_MIN)
        return NULL;
    const woolly_pack_fn pack = gu[0].plan->pack[woolly_matmul_plan_class(gu[0].plan, row0[1] - row0[0])];
    for (int i = 1; i < n_gu; i++)
        if (gu[i].plan->pack[woolly_matmul_plan_class(gu[i].plan, row0[i / 2 + 1] - row0[i / 2])] != pack)
            return NULL;
    if (!pack)
        return NULL;
    const int64_t d = c->model->cfg.n_embd;
    const enum woolly_act act = woolly_matmul_plan_step(gu[0].plan, row0[1] - row0[0])->kernel->act;
    const size_t row = woolly_act_row_bytes(act, d);
    woolly_pack_rows_threaded(c->pool, nth, pack, h, n, d, c->s.moe.pack_tokens, row);
    return c->s.moe.pack_tokens;
}

/* The FFN of a batch's n tokens (h, their normalized rows; routed and grouped by expert) added to their
 * rows of sum, as the general path computes it. False, and nothing done, if an expert's gate and up
 * matrices read different activation formats (a tuning profile gave them different kernels): then the
 * general path runs. */
static bool ffn_grouped(woolly_context *c, const woolly_layer *L, const float *h, int32_t n, float *sum)
{
    const woolly_config *p = &c->model->cfg;
    woolly_moe_state *s = &c->s.moe;
    const int32_t n_expert = p->n_expert;
    const int64_t d = p->n_embd, ffe = p->n_ff_exp;
    for (int32_t e = 0; e < n_expert; e++) {
        const int32_t m = s->start[e + 1] - s->start[e];
        if (m > 0 && act_of(c, &L->gate_exps.each[e], m) != act_of(c, &L->up_exps.each[e], m))
            return false;
    }
    const int32_t n_pairs = s->start[n_expert];
    /* Whole experts, each by the next thread free over the tokens routed to it, the threads helping
     * each other with the last ones (expert_job); with whole experts off (the tests' comparison), the
     * two dispatches. On the Zen 5, qwen3moe-30b-a3b-12l, the steps that choose an odd count of experts
     * (which the threads cannot share evenly), timed in place with the two forms alternating: whole
     * took 5-9% less time with 2 sequences decoding together (3 of 3 runs), level with 4 and 8
     * (bench/journal/2026-12-05-zen5-7.md). Without the helpers, whole had lost there (granitemoe-3b,
     * 2 sequences, 0.90-1.05x), which is why the two dispatches were the rule for odd counts. */
    int groups;
    const int nth = grouped_threads(c, L, &groups);
    if (g_whole_experts) {
        woolly_matmul_out *gu = s->outs, *down = s->outs + 2 * groups;
        int i = 0;
        for (int32_t e = 0; e < n_expert; e++) {
            const int32_t i0 = s->start[e];
            if (s->start[e + 1] == i0)
                continue;
            const woolly_matrix *g = &L->gate_exps.each[e], *u = &L->up_exps.each[e],
                                *dn = &L->down_exps.each[e];
            gu[2 * i] = (woolly_matmul_out){g, &c->plans[g->id], s->gate + (size_t)i0 * ffe, (size_t)ffe};
            gu[2 * i + 1] = (woolly_matmul_out){u, &c->plans[u->id], s->up + (size_t)i0 * ffe, (size_t)ffe};
            down[i] = (woolly_matmul_out){dn, &c->plans[dn->id], s->down + (size_t)i0 * d, (size_t)d};
            s->row0[i++] = i0;
        }
        s->row0[groups] = n_pairs;
        const void *packed = pack_tokens(c, gu, 2 * groups, s->row0, h, n, nth);
        run_expert_job(c, gu, down, groups, s->row0, NULL, h, packed, nth);
        combine_pairs(c, sum, n, s->down);
        return true;
    }
    /* Gate and up of every chosen expert; each group's inputs packed once for both, its outputs rows
     * start[e] .. start[e + 1] of s->gate and s->up (pair order). */
    int nu = 0;
    double work = 0;
    char *packed = s->pack;
    for (int32_t e = 0; e < n_expert; e++) {
        const int32_t i0 = s->start[e], m = s->start[e + 1] - i0;
        if (m == 0)
            continue;
        const woolly_matrix *g = &L->gate_exps.each[e], *u = &L->up_exps.each[e];
        const enum woolly_act act = act_of(c, g, m);
        const size_t row = woolly_act_row_bytes(act, d);
        for (int32_t i = 0; i < m; i++)
            woolly_matmul_plan_pack(&c->plans[g->id], m, h + (size_t)s->token[i0 + i] * d, 0, 1, d,
                                    packed + (size_t)i * row, row);
        work += add_unit(c, nu++, g, m, packed, s->gate + (size_t)i0 * ffe, (size_t)ffe);
        work += add_unit(c, nu++, u, m, packed, s->up + (size_t)i0 * ffe, (size_t)ffe);
        packed += (size_t)m * row;
    }
    run_units(c, nu, work);
    woolly_gated_rows(c->ops.swiglu, s->gate, s->up, n_pairs, ffe);

    /* Down of every chosen expert, into rows of s->down in pair order. */
    nu = 0, work = 0, packed = s->pack;
    for (int32_t e = 0; e < n_expert; e++) {
        const int32_t i0 = s->start[e], m = s->start[e + 1] - i0;
        if (m == 0)
            continue;
        const woolly_matrix *dn = &L->down_exps.each[e];
        const enum woolly_act act = act_of(c, dn, m);
        const size_t row = woolly_act_row_bytes(act, ffe);
        woolly_matmul_plan_pack(&c->plans[dn->id], m, s->gate + (size_t)i0 * ffe, (size_t)ffe, m, ffe, packed,
                                row);
        work += add_unit(c, nu++, dn, m, packed, s->down + (size_t)i0 * d, (size_t)d);
        packed += (size_t)m * row;
    }
    run_units(c, nu, work);
    combine_pairs(c, sum, n, s->down);
    return true;
}

/* The FFN of a batch's tokens (h, their normalized rows; routed and grouped by expert) added to their
 * rows of sum, one expert at a time: each that any token chose runs over its tokens, WOOLLY_FFN_TOKENS
 * at a time. */
static void ffn_per_expert(woolly_context *c, const woolly_layer *L, const float *h, float *sum)
{
    const woolly_config *p = &c->model->cfg;
    woolly_run_state *rs = &c->s;
    woolly_moe_state *s = &rs->moe;
    const int32_t d = p->n_embd;
    for (int32_t e = 0; e < p->n_expert; e++)
        for (int32_t i0 = s->start[e]; i0 < s->start[e + 1]; i0 += WOOLLY_FFN_TOKENS) {
            const int32_t m =
                s->start[e + 1] - i0 < WOOLLY_FFN_TOKENS ? s->start[e + 1] - i0 : WOOLLY_FFN_TOKENS;
            /* A lone token's row is read in place; a group's rows are gathered. */
            const float *in = h + (size_t)s->token[i0] * d;
            if (m > 1) {
                for (int32_t i = 0; i < m; i++)
                    memcpy(s->in + (size_t)i * d, h + (size_t)s->token[i0 + i] * d,
                           sizeof(float) * (size_t)d);
                in = s->in;
            }
            const woolly_matrix *gate = &L->gate_exps.each[e], *up = &L->up_exps.each[e];
            if (c->imatrix) {
                woolly_imatrix_add(c->imatrix, gate, in, m);
                woolly_imatrix_add(c->imatrix, up, in, m);
            }
            woolly_matmul_n(
                c->pool,
                (const woolly_matmul_out[]){{gate, &c->plans[gate->id], rs->hb, (size_t)gate->rows},
                                            {up, &c->plans[up->id], rs->hb2, (size_t)up->rows}},
                2, in, m, rs->pack);
            woolly_gated_rows(c->ops.swiglu, rs->hb, rs->hb2, m, p->n_ff_exp);
            matmul(c, &L->down_exps.each[e], rs->hb, m, s->out);
            add_weighted(s, sum, i0, m, s->out, d);
        }
}

void woolly_moe_ffn(woolly_context *c, const woolly_layer *L, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    woolly_run_state *rs = &c->s;
    woolly_moe_state *s = &rs->moe;
    const int32_t d = p->n_embd, n_expert = p->n_expert, k = p->n_expert_used;
    const float *h = rs->xb;

    matmul(c, &L->router, h, n, s->logits);
    route_tokens(c, n);
    if (n == 1 && g_one_step && !c->imatrix && ffn_one_token(c, L, h, rs->xb))
        return;
    memset(s->sum, 0, sizeof(float) * (size_t)n * d);
    /* slices of equal size: a short last one would give its experts a few tokens each */
    const int32_t slice = g_slice_cap > 0 && g_slice_cap < s->slice ? g_slice_cap : s->slice;
    const int32_t n_slices = (n + slice - 1) / slice, per = (n + n_slices - 1) / n_slices;
    for (int32_t t0 = 0; t0 < n; t0 += per) {
        const int32_t m = n - t0 < per ? n - t0 : per;
        const float *hs = h + (size_t)t0 * d;
        float *sum = s->sum + (size_t)t0 * d;
        group_by_expert(s, t0, m, n_expert, k);
        if (!(g_one_step && !c->imatrix && ffn_grouped(c, L, hs, m, sum)))
            ffn_per_expert(c, L, hs, sum);
    }
    memcpy(rs->xb, s->sum, sizeof(float) * (size_t)n * d);
}
