/* The forward pass of a Llama/Granite decoder, top to bottom as in the papers:
 *
 *   x = embed(tokens) * embedding_scale
 *   for each layer:
 *       h = rmsnorm(x) * attn_norm
 *       q, k, v = h Wq, h Wk, h Wv;   rope(q), rope(k);   cache k, v
 *       x += residual_scale * attention(q, cache) Wo
 *       h = rmsnorm(x) * ffn_norm
 *       x += residual_scale * (silu(h Wgate) * (h Wup)) Wdown
 *   logits = (rmsnorm(x) * output_norm) Wout / logit_scale
 *
 * for a batch of n tokens at once, which may belong to several sequences (each with its own KV cache):
 * every matrix product is one call through the kernel registry over all the batch's tokens (GEMM for a
 * batch, GEMV for one token), so that the weights stream from memory once per step however many
 * sequences decode together; attention runs per run of one sequence's consecutive tokens, over that
 * sequence's cache: the registry's flash kernel per (run, KV head, block of queries), and per (KV head,
 * chunk of the cache) for a lone token at long context, whose partial results are then combined.
 * Nothing is allocated here: every buffer lives in the context's run state. */
#include <math.h>

#include "context.h"
#include "quant.h"

static void matmul(woolly_context *c, const woolly_matrix *w, const float *x, int32_t n, float *y)
{
    woolly_matmul(c->pool, &c->plans[w->id], w, x, n, y, (size_t)w->rows, c->s.pack);
}

/* Several matrices that read the same input: packed once, one dispatch (woolly_matmul_n splits them
 * when their kernels read different activation formats). */
static void matmul_same_input(woolly_context *c, const woolly_matrix *const *ws, float *const *ys, int n,
                              const float *x, int32_t m)
{
    woolly_matmul_out outs[4];
    for (int i = 0; i < n; i++)
        outs[i] = (woolly_matmul_out){ws[i], &c->plans[ws[i]->id], ys[i], (size_t)ws[i]->rows};
    woolly_matmul_n(c->pool, outs, n, x, m, c->s.pack);
}

/* Token t's embedding row as floats, whatever the matrix's type and layout. */
static void embed(woolly_context *c, int32_t id, float *out)
{
    const woolly_matrix *te = &c->model->w.token_embd;
    if (te->layout) {
        te->layout->unpack(te->data, te->row_bytes, te->cols, id, c->s.embd_row);
        woolly_dequantize_row(te->type, c->s.embd_row, out, te->cols);
    } else {
        woolly_dequantize_row(te->type, (const char *)te->data + (size_t)id * te->row_bytes, out, te->cols);
    }
}

/* out[t] = x[t] / rms(x[t]) * weight, for n rows of d (the registry's vectorized op). */
static void rmsnorm(const woolly_context *c, float *out, const float *x, const float *weight, int32_t n,
                    int32_t d, float eps)
{
    for (int32_t t = 0; t < n; t++)
        c->ops.rmsnorm(out + (size_t)t * d, x + (size_t)t * d, weight, d, eps);
}

/* The rotation angles of the batch's positions: pos * base^(-2i/n_rot), in double so that long
 * contexts keep their precision. */
static void rope_angles(woolly_context *c, const int32_t *positions, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t half = p->n_rot / 2;
    for (int32_t t = 0; t < n; t++) {
        const double pos = (double)positions[t] / p->rope_scale;
        for (int32_t i = 0; i < half; i++) {
            const double theta = pos * c->s.inv_freq[i];
            c->s.rope_cos[(size_t)t * half + i] = (float)cos(theta);
            c->s.rope_sin[(size_t)t * half + i] = (float)sin(theta);
        }
    }
}

/* Rotates the adjacent pairs (x[2i], x[2i+1]), i < n_rot/2, of every head of n rows. */
static void rope(const woolly_context *c, float *x, int32_t n, int32_t n_heads)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t half = p->n_rot / 2, hd = p->head_dim;
    for (int32_t t = 0; t < n; t++) {
        const float *cs = c->s.rope_cos + (size_t)t * half, *sn = c->s.rope_sin + (size_t)t * half;
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)t * n_heads + h) * hd;
            for (int32_t i = 0; i < half; i++) {
                const float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * cs[i] - x1 * sn[i];
                v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

/* Multiply-adds below which another thread does not pay for waking it. */
#define ATTN_MIN_WORK_PER_THREAD 65536.0
/* Cache positions below which one token's KV range is not worth splitting across threads. */
#define ATTN_MIN_SPLIT_POSITIONS 256

typedef struct attn_job {
    woolly_context *c;
    int32_t layer;
    const woolly_seq_run *runs;
    int32_t n_runs;
    int32_t q_block; /* queries per work item (a batch) */
    int32_t n_split; /* KV chunks per head (a lone token), each a partial result */
} attn_job;

/* The kernel arguments for KV head h and queries [t0, t0 + nq) of run r over its sequence's cache
 * [kv0, kv1). */
static woolly_attn_args attn_args(const attn_job *j, const woolly_seq_run *r, int32_t h, int32_t t0,
                                  int32_t nq, int64_t kv0, int64_t kv1)
{
    const woolly_context *c = j->c;
    const woolly_config *p = &c->model->cfg;
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    const size_t q_dim = (size_t)p->n_head * hd,
                 first_q = (size_t)(r->row0 + t0) * q_dim + (size_t)h * group * hd;
    return (woolly_attn_args){
        .q = c->s.q + first_q,
        .q_stride = (size_t)hd,
        .q_row_stride = q_dim,
        .k = woolly_kv_cache_k(&c->kv, j->layer, r->seq, h),
        .v = woolly_kv_cache_v(&c->kv, j->layer, r->seq, h),
        .kv_row_bytes = c->kv.head_bytes,
        .n_q = nq,
        .pos0 = r->pos0 + t0,
        .kv0 = kv0,
        .kv1 = kv1,
        .head_dim = hd,
        .n_group = group,
        .scale = p->attention_scale,
        .out = c->s.att + first_q,
        .out_stride = (size_t)hd,
        .out_row_stride = q_dim,
        .ml = NULL,
    };
}

/* The positions run r's queries see, summed over its blocks of q_block queries (a block costs the
 * positions its last query sees, so the early blocks of a causal prompt are cheap). */
static double run_cost(const woolly_seq_run *r, int32_t q_block)
{
    double total = 0.0;
    for (int32_t t0 = 0; t0 < r->n; t0 += q_block)
        total += (double)r->pos0 + (r->n - t0 < q_block ? r->n : t0 + q_block);
    return total;
}

/* A batch: the items (run, KV head, block of q_block queries), run- then head-major, split across the
 * threads in contiguous stretches of nearly equal cost. */
static void attn_batch_run(void *arg, int ith, int nth)
{
    const attn_job *j = arg;
    const woolly_config *p = &j->c->model->cfg;
    double total = 0.0;
    for (int32_t r = 0; r < j->n_runs; r++)
        total += run_cost(&j->runs[r], j->q_block);
    total *= p->n_head_kv;
    const double lo = total * ith / nth, hi = total * (ith + 1) / nth;
    double at = 0.0;
    for (int32_t r = 0; r < j->n_runs; r++) {
        const woolly_seq_run *run = &j->runs[r];
        if (at + run_cost(run, j->q_block) * p->n_head_kv < lo) { /* all of this run is before ours */
            at += run_cost(run, j->q_block) * p->n_head_kv;
            continue;
        }
        for (int32_t h = 0; h < p->n_head_kv && at < hi; h++)
            for (int32_t t0 = 0; t0 < run->n; t0 += j->q_block) {
                const int32_t nq = run->n - t0 < j->q_block ? run->n - t0 : j->q_block;
                const double cost = (double)run->pos0 + t0 + nq, mid = at + cost / 2;
                at += cost;
                if (mid < lo || mid >= hi)
                    continue;
                const woolly_attn_args a = attn_args(j, run, h, t0, nq, 0, (int64_t)run->pos0 + t0 + nq);
                woolly_attn_call(run->n == 1 ? j->c->attn_decode : j->c->attn, &a, ith, nth);
            }
        if (at >= hi)
            break;
    }
}

/* One token: the items (KV head, chunk of its cache positions), n_head_kv * n_split of them, split evenly
 * across the threads; each chunk leaves a partial result (its maximum, sum and unnormalized output) in
 * s.att_part / s.att_ml, which attn_combine merges. */
static void attn_split_run(void *arg, int ith, int nth)
{
    const attn_job *j = arg;
    const woolly_context *c = j->c;
    const woolly_config *p = &c->model->cfg;
    const int32_t group = p->n_head / p->n_head_kv, q_dim = p->n_head * p->head_dim;
    const woolly_seq_run *run = &j->runs[0];
    const int64_t n_kv = (int64_t)run->pos0 + 1;
    long long lo, hi;
    woolly_split_range((long long)p->n_head_kv * j->n_split, 1, ith, nth, &lo, &hi);
    for (long long idx = lo; idx < hi; idx++) {
        const int32_t h = (int32_t)(idx / j->n_split), part = (int32_t)(idx % j->n_split);
        const int64_t kv0 = n_kv * part / j->n_split, kv1 = n_kv * (part + 1) / j->n_split;
        woolly_attn_args a = attn_args(j, run, h, 0, 1, kv0, kv1);
        a.out = c->s.att_part + (size_t)part * q_dim + (size_t)h * group * p->head_dim;
        a.ml = c->s.att_ml + 2 * ((size_t)part * p->n_head + (size_t)h * group);
        if (kv0 < kv1)
            woolly_attn_call(c->attn_decode, &a, ith, nth);
        else
            for (int32_t g = 0; g < group; g++)
                a.ml[2 * g] = -INFINITY, a.ml[2 * g + 1] = 0.0f;
    }
}

static void attn_combine(woolly_context *c, int32_t n_split)
{
    const woolly_config *p = &c->model->cfg;
    const size_t q_dim = (size_t)p->n_head * p->head_dim;
    const float *outs[WOOLLY_ATTN_MAX_PARTS], *mls[WOOLLY_ATTN_MAX_PARTS];
    for (int32_t h = 0; h < p->n_head; h++) {
        for (int32_t i = 0; i < n_split; i++) {
            outs[i] = c->s.att_part + (size_t)i * q_dim + (size_t)h * p->head_dim;
            mls[i] = c->s.att_ml + 2 * ((size_t)i * p->n_head + (size_t)h);
        }
        woolly_attn_combine(n_split, outs, mls, p->head_dim, c->s.att + (size_t)h * p->head_dim);
    }
}

/* KV chunks per head for one token: the tuning profile's, else enough that the n_head_kv * chunks items
 * divide evenly among the threads (none when they already do); each at least ATTN_MIN_SPLIT_POSITIONS
 * long. */
static int32_t attn_n_split(const woolly_context *c, int nth, int64_t n_kv)
{
    if (c->attn_split > 0)
        return c->attn_split < c->attn_parts ? c->attn_split : c->attn_parts;
    int32_t a = c->model->cfg.n_head_kv, b = nth;
    while (b) {
        const int32_t r = a % b;
        a = b, b = r;
    }
    int32_t split = c->attn_tuned_split > 0 ? c->attn_tuned_split : nth / a;
    while (split > 1 && n_kv < (int64_t)split * ATTN_MIN_SPLIT_POSITIONS)
        split--;
    return split < c->attn_parts ? split : c->attn_parts;
}

/* Causal attention of the batch, each run over its own sequence's cache: the token at position pos
 * sees its sequence's positions 0 .. pos. */
static void attention(woolly_context *c, int32_t layer, const woolly_seq_run *runs, int32_t n_runs)
{
    const woolly_config *p = &c->model->cfg;
    /* Work ~ query heads x visible positions x head_dim, summed over the batch's tokens. */
    double work = 0.0;
    for (int32_t r = 0; r < n_runs; r++)
        work += (double)runs[r].n * (runs[r].pos0 + (runs[r].n + 1) / 2.0) * p->n_head * p->head_dim;
    const int nth = woolly_threads_for(c->pool, work, ATTN_MIN_WORK_PER_THREAD);
    attn_job job = {c, layer, runs, n_runs, c->attn_q_per_call, 1};
    if (n_runs == 1 && runs[0].n == 1)
        job.n_split = attn_n_split(c, nth, (int64_t)runs[0].pos0 + 1);
    if (job.n_split > 1) {
        woolly_threadpool_run_n(c->pool, attn_split_run, &job, nth);
        attn_combine(c, job.n_split);
    } else {
        woolly_threadpool_run_n(c->pool, attn_batch_run, &job, nth);
    }
}

/* x += scale * y over n * d values: a loop the compiler vectorizes at any level (bench/bench_ops). */
static void residual_add(float *x, const float *y, size_t len, float scale)
{
    for (size_t i = 0; i < len; i++)
        x[i] += scale * y[i];
}

/* Cuts the batch into runs of consecutive tokens of one sequence (the batch is checked: their positions
 * are consecutive too). Returns how many. */
static int32_t split_runs(woolly_seq_run *runs, const woolly_batch *b)
{
    int32_t n_runs = 0;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        if (n_runs > 0 && runs[n_runs - 1].seq == b->seq_id[t]) {
            runs[n_runs - 1].n++;
            continue;
        }
        runs[n_runs++] = (woolly_seq_run){.row0 = t, .n = 1, .seq = b->seq_id[t], .pos0 = b->pos[t]};
    }
    return n_runs;
}

/* Gathers into xb, normalized, the rows of the tokens that asked for logits (NULL flags: the last one),
 * and records where each token's logits go. Returns how many. */
static int32_t gather_logit_rows(woolly_context *c, const woolly_batch *b)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t d = p->n_embd;
    int32_t rows = 0;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const bool want = b->logits ? b->logits[t] : t == b->n_tokens - 1;
        c->logits_row[t] = want ? rows : -1;
        if (want)
            c->ops.rmsnorm(c->s.xb + (size_t)rows++ * d, c->s.x + (size_t)t * d, c->model->w.output_norm, d,
                           p->rms_eps);
    }
    return rows;
}

void woolly_forward(woolly_context *c, const woolly_batch *b)
{
    const woolly_config *p = &c->model->cfg;
    const woolly_weights *w = &c->model->w;
    woolly_run_state *s = &c->s;
    const int32_t d = p->n_embd, n = b->n_tokens;
    const size_t kv_dim = (size_t)p->n_head_kv * p->head_dim;
    const int32_t n_runs = split_runs(c->runs, b);

    /* Token embeddings: one dequantized row per token. */
    for (int32_t t = 0; t < n; t++) {
        float *xt = s->x + (size_t)t * d;
        embed(c, b->token[t], xt);
        if (p->embedding_scale != 1.0f)
            for (int32_t i = 0; i < d; i++)
                xt[i] *= p->embedding_scale;
    }
    rope_angles(c, b->pos, n);

    for (int32_t l = 0; l < p->n_layer; l++) {
        const woolly_layer *L = &w->layers[l];

        /* Attention. */
        rmsnorm(c, s->xb, s->x, L->attn_norm, n, d, p->rms_eps);
        matmul_same_input(c, (const woolly_matrix *const[]){&L->wq, &L->wk, &L->wv},
                          (float *const[]){s->q, s->k, s->v}, 3, s->xb, n);
        rope(c, s->q, n, p->n_head);
        rope(c, s->k, n, p->n_head_kv);
        for (int32_t t = 0; t < n; t++)
            woolly_kv_cache_store(&c->kv, l, b->seq_id[t], b->pos[t], s->k + (size_t)t * kv_dim,
                                  s->v + (size_t)t * kv_dim);
        attention(c, l, c->runs, n_runs);
        matmul(c, &L->wo, s->att, n, s->xb2);
        residual_add(s->x, s->xb2, (size_t)n * d, p->residual_scale);

        /* Feed-forward. */
        rmsnorm(c, s->xb, s->x, L->ffn_norm, n, d, p->rms_eps);
        matmul_same_input(c, (const woolly_matrix *const[]){&L->w_gate, &L->w_up},
                          (float *const[]){s->hb, s->hb2}, 2, s->xb, n);
        c->ops.swiglu(s->hb, s->hb2, (int64_t)n * p->n_ff);
        matmul(c, &L->w_down, s->hb, n, s->xb2);
        residual_add(s->x, s->xb2, (size_t)n * d, p->residual_scale);
    }

    /* Logits of the tokens that asked for them. */
    const int32_t rows = gather_logit_rows(c, b);
    if (rows > 0)
        matmul(c, &w->output, s->xb, rows, s->logits);
    if (p->logit_scale != 1.0f)
        for (size_t i = 0; i < (size_t)rows * p->n_vocab; i++)
            s->logits[i] /= p->logit_scale;
    c->fwd_n = n;
    for (int32_t r = 0; r < n_runs; r++)
        c->seq_len[c->runs[r].seq] = c->runs[r].pos0 + c->runs[r].n;
}
