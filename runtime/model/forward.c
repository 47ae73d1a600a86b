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
 * for a batch of n tokens at once: every matrix product is one call through the kernel registry (GEMM
 * for a batch, GEMV for one token), attention runs one registry kernel per (token, KV head). Nothing is
 * allocated here: every buffer lives in the context's run state. */
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

/* out[t] = x[t] / rms(x[t]) * weight, for n rows of d. */
static void rmsnorm(float *out, const float *x, const float *weight, int32_t n, int32_t d, float eps)
{
    for (int32_t t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * d;
        float *ot = out + (size_t)t * d;
        double ss = 0.0;
        for (int32_t i = 0; i < d; i++)
            ss += (double)xt[i] * xt[i];
        const float inv = (float)(1.0 / sqrt(ss / d + eps));
        for (int32_t i = 0; i < d; i++)
            ot[i] = xt[i] * inv * weight[i];
    }
}

/* The rotation angles of the batch's positions: pos * base^(-2i/n_rot), in double so that long
 * contexts keep their precision. */
static void rope_angles(woolly_context *c, int32_t pos0, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t half = p->n_rot / 2;
    for (int32_t t = 0; t < n; t++) {
        const double pos = (double)(pos0 + t) / p->rope_scale;
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

typedef struct attn_job {
    woolly_context *c;
    int32_t layer, pos0, n;
} attn_job;

/* Causal attention of the batch over the cache: the pairs (token t, KV head h) are split across the
 * threads; token t sees positions 0 .. pos0 + t. */
static void attn_job_run(void *arg, int ith, int nth)
{
    const attn_job *j = arg;
    const woolly_context *c = j->c;
    const woolly_config *p = &c->model->cfg;
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    const size_t q_dim = (size_t)p->n_head * hd;
    long long lo, hi;
    woolly_split_range((long long)j->n * p->n_head_kv, 1, ith, nth, &lo, &hi);
    for (long long idx = lo; idx < hi; idx++) {
        const int32_t t = (int32_t)(idx / p->n_head_kv), h = (int32_t)(idx % p->n_head_kv);
        const size_t first_q = (size_t)t * q_dim + (size_t)h * group * hd;
        const woolly_attn_args a = {
            .q = c->s.q + first_q,
            .q_stride = (size_t)hd,
            .k = woolly_kv_cache_k(&c->kv, j->layer, h),
            .v = woolly_kv_cache_v(&c->kv, j->layer, h),
            .kv_stride = c->kv.row_elems,
            .n_kv = j->pos0 + t + 1,
            .head_dim = hd,
            .n_group = group,
            .scale = p->attention_scale,
            .out = c->s.att + first_q,
            .out_stride = (size_t)hd,
        };
        c->attn->attn(&a);
    }
}

/* x += scale * y over n * d values. */
static void residual_add(float *x, const float *y, size_t len, float scale)
{
    for (size_t i = 0; i < len; i++)
        x[i] += scale * y[i];
}

/* SwiGLU: gate = silu(gate) * up. */
static void swiglu(float *gate, const float *up, size_t len)
{
    for (size_t i = 0; i < len; i++)
        gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void woolly_forward(woolly_context *c, const woolly_token *ids, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    const woolly_weights *w = &c->model->w;
    woolly_run_state *s = &c->s;
    const int32_t d = p->n_embd, pos0 = c->n_past;
    const size_t kv_dim = (size_t)p->n_head_kv * p->head_dim;

    /* Token embeddings: one dequantized row per token. */
    for (int32_t t = 0; t < n; t++) {
        float *xt = s->x + (size_t)t * d;
        embed(c, ids[t], xt);
        if (p->embedding_scale != 1.0f)
            for (int32_t i = 0; i < d; i++)
                xt[i] *= p->embedding_scale;
    }
    rope_angles(c, pos0, n);

    for (int32_t l = 0; l < p->n_layer; l++) {
        const woolly_layer *L = &w->layers[l];

        /* Attention. */
        rmsnorm(s->xb, s->x, L->attn_norm, n, d, p->rms_eps);
        matmul_same_input(c, (const woolly_matrix *const[]){&L->wq, &L->wk, &L->wv},
                          (float *const[]){s->q, s->k, s->v}, 3, s->xb, n);
        rope(c, s->q, n, p->n_head);
        rope(c, s->k, n, p->n_head_kv);
        for (int32_t t = 0; t < n; t++)
            woolly_kv_cache_store(&c->kv, l, pos0 + t, s->k + (size_t)t * kv_dim, s->v + (size_t)t * kv_dim);
        attn_job job = {c, l, pos0, n};
        /* Work ~ query heads x visible positions x head_dim, summed over the batch's tokens. */
        const double work = (double)n * (pos0 + (n + 1) / 2.0) * p->n_head * p->head_dim;
        woolly_threadpool_run_n(c->pool, attn_job_run, &job,
                                woolly_threads_for(c->pool, work, ATTN_MIN_WORK_PER_THREAD));
        matmul(c, &L->wo, s->att, n, s->xb2);
        residual_add(s->x, s->xb2, (size_t)n * d, p->residual_scale);

        /* Feed-forward. */
        rmsnorm(s->xb, s->x, L->ffn_norm, n, d, p->rms_eps);
        matmul_same_input(c, (const woolly_matrix *const[]){&L->w_gate, &L->w_up},
                          (float *const[]){s->hb, s->hb2}, 2, s->xb, n);
        swiglu(s->hb, s->hb2, (size_t)n * p->n_ff);
        matmul(c, &L->w_down, s->hb, n, s->xb2);
        residual_add(s->x, s->xb2, (size_t)n * d, p->residual_scale);
    }

    /* Logits of every token, or of the last one only. */
    const int32_t first = c->params.logits_all ? 0 : n - 1, rows = n - first;
    rmsnorm(s->xb, s->x + (size_t)first * d, w->output_norm, rows, d, p->rms_eps);
    matmul(c, &w->output, s->xb, rows, s->logits);
    if (p->logit_scale != 1.0f)
        for (size_t i = 0; i < (size_t)rows * p->n_vocab; i++)
            s->logits[i] /= p->logit_scale;
    c->n_logits = rows;
    c->last_n = n;
    c->n_past += n;
}
