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
 * (decoding) and a GEMM of the group's size otherwise; its outputs are added to their tokens' sums with
 * the routing weights. An expert no token chose is not read. */
#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

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
    s->in = malloc(sizeof(float) * n_ffn * d);
    s->out = malloc(sizeof(float) * n_ffn * d);
    s->sum = malloc(sizeof(float) * n_batch * d);
    if (!s->logits || !s->chosen || !s->weight || !s->start || !s->token || !s->pair_w || !s->in || !s->out ||
        !s->sum)
        return woolly_fail(err, "out of memory for the experts' buffers; try a smaller --batch-size");
    return 0;
}

void woolly_moe_state_free(woolly_moe_state *s)
{
    free(s->logits), free(s->chosen), free(s->weight), free(s->start), free(s->token), free(s->pair_w);
    free(s->in), free(s->out), free(s->sum);
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

/* Groups the batch's (token, expert) pairs by expert, tokens in batch order: a counting sort. */
static void group_by_expert(woolly_moe_state *s, int32_t n, int32_t n_expert, int32_t k)
{
    memset(s->start, 0, sizeof(int32_t) * (size_t)(n_expert + 1));
    for (int32_t i = 0; i < n * k; i++)
        s->start[s->chosen[i] + 1]++;
    for (int32_t e = 0; e < n_expert; e++)
        s->start[e + 1] += s->start[e];
    int32_t *next = s->start; /* advanced as pairs land, then restored */
    for (int32_t t = 0; t < n; t++)
        for (int32_t j = 0; j < k; j++) {
            const int32_t e = s->chosen[(size_t)t * k + j], at = next[e]++;
            s->token[at] = t;
            s->pair_w[at] = s->weight[(size_t)t * k + j];
        }
    for (int32_t e = n_expert; e > 0; e--)
        s->start[e] = s->start[e - 1];
    s->start[0] = 0;
}

static void matmul(woolly_context *c, const woolly_matrix *w, const float *x, int32_t m, float *y)
{
    woolly_matmul(c->pool, &c->plans[w->id], w, x, m, y, (size_t)w->rows, c->s.pack);
}

void woolly_moe_ffn(woolly_context *c, const woolly_layer *L, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    woolly_run_state *rs = &c->s;
    woolly_moe_state *s = &rs->moe;
    const int32_t d = p->n_embd, n_expert = p->n_expert, k = p->n_expert_used;
    const float *h = rs->xb;

    matmul(c, &L->router, h, n, s->logits);
    for (int32_t t = 0; t < n; t++)
        woolly_moe_route(s->logits + (size_t)t * n_expert, n_expert, k, s->chosen + (size_t)t * k,
                         s->weight + (size_t)t * k);
    group_by_expert(s, n, n_expert, k);

    memset(s->sum, 0, sizeof(float) * (size_t)n * d);
    for (int32_t e = 0; e < n_expert; e++)
        for (int32_t i0 = s->start[e]; i0 < s->start[e + 1]; i0 += WOOLLY_FFN_TOKENS) {
            const int32_t m = s->start[e + 1] - i0 < WOOLLY_FFN_TOKENS ? s->start[e + 1] - i0 : WOOLLY_FFN_TOKENS;
            /* A lone token's row is read in place; a group's rows are gathered. */
            const float *in = h + (size_t)s->token[i0] * d;
            if (m > 1) {
                for (int32_t i = 0; i < m; i++)
                    memcpy(s->in + (size_t)i * d, h + (size_t)s->token[i0 + i] * d, sizeof(float) * (size_t)d);
                in = s->in;
            }
            const woolly_matrix *gate = &L->gate_exps.each[e], *up = &L->up_exps.each[e];
            woolly_matmul_n(c->pool,
                            (const woolly_matmul_out[]){{gate, &c->plans[gate->id], rs->hb, (size_t)gate->rows},
                                                        {up, &c->plans[up->id], rs->hb2, (size_t)up->rows}},
                            2, in, m, rs->pack);
            c->ops.swiglu(rs->hb, rs->hb2, (int64_t)m * p->n_ff_exp);
            matmul(c, &L->down_exps.each[e], rs->hb, m, s->out);
            for (int32_t i = 0; i < m; i++) {
                float *dst = s->sum + (size_t)s->token[i0 + i] * d;
                const float *src = s->out + (size_t)i * d, w = s->pair_w[i0 + i];
                for (int32_t j = 0; j < d; j++)
                    dst[j] += w * src[j];
            }
        }
    memcpy(rs->xb, s->sum, sizeof(float) * (size_t)n * d);
}
