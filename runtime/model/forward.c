/* The forward pass of a decoder, top to bottom as in the papers, with the steps an architecture adds
 * (arch.h's woolly_arch_steps, in brackets) in their places:
 *
 *   x = embed(tokens) * embedding_scale                      (gemma3: sqrt(n_embd); granite: its scale)
 *   for each layer:
 *       h = rmsnorm(x) * attn_norm
 *       q, k, v = h Wq [+ bq], h Wk [+ bk], h Wv [+ bv]      (qwen2's biases; phi3: Wq, Wk, Wv are views of
 *                                                             one fused attn_qkv)
 *       [q, k = rmsnorm(each head of q, k) * q_norm, k_norm]  (qwen3, gemma3)
 *       rope(q), rope(k);   cache k, v                      (adjacent pairs, or the halves of each head:
 *                                                             NEOX; the layer's RoPE setting, rope.h)
 *       a = attention(q, cache) Wo
 *       [a = rmsnorm(a) * attn_post_norm]                    (gemma3)
 *       x += residual_scale * a
 *       h = rmsnorm(x) * ffn_norm
 *       f = (act(h Wgate) * (h Wup)) Wdown                   (act: SiLU, or GELU (tanh form) for gemma3;
 *                                                             phi3: Wgate, Wup are views of one ffn_up)
 *         or f = sum over h's top-k experts e of w_e * (silu(h Wgate_e) * (h Wup_e)) Wdown_e
 *                                                            (a mixture of experts: qwen3moe, granitemoe,
 *                                                             llama with expert_count; moe.c)
 *       [f = rmsnorm(f) * ffn_post_norm]                     (gemma3)
 *       x += residual_scale * f
 *   logits = (rmsnorm(x) * output_norm) Wout / logit_scale
 *   [logits = cap * tanh(logits / cap)]                      (gemma3's final_logit_softcapping)
 *
 * The bias add, the head norm and RoPE run in one pass over each head, while it is in cache.
 *
 * A batch of n tokens runs at once, which may belong to several sequences (each with its own KV cache):
 * every matrix product is one call through the kernel registry over all the batch's tokens (GEMM for a
 * batch, GEMV for one token), so that the weights stream from memory once per step however many
 * sequences decode together (the feed-forward's take WOOLLY_FFN_TOKENS tokens a call); attention runs per run
 * of one sequence's consecutive tokens, over that sequence's cache: the registry's flash kernel per (run, KV
 * head, block of queries), and per (KV head, chunk of the cache) for a lone token at long context, whose
 * partial results are then combined (that split across the threads is attn_run.c's, which the tuner measures
 * through too). Nothing is allocated here: every buffer lives in the context's run state. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "context.h"
#include "imatrix.h"
#include "quant.h"

/* The optional steps (arch.h) woolly_forward does not run yet. A step is written in its place in
 * woolly_forward, then struck from this list; until then, a model whose table needs it is refused at
 * load. (Every step runs now.) */
bool woolly_forward_runs(const woolly_arch *a, char *why, size_t n)
{
    (void)a;
    const char *lacks = NULL;
    if (lacks)
        snprintf(why, n, "%s", lacks);
    return !lacks;
}

static void matmul(woolly_context *c, const woolly_matrix *w, const float *x, int32_t n, float *y)
{
    if (c->imatrix)
        woolly_imatrix_add(c->imatrix, w, x, n);
    woolly_matmul(c->pool, &c->plans[w->id], w, x, n, y, (size_t)w->rows, c->s.pack);
}

/* Several matrices that read the same input: packed once, one dispatch (woolly_matmul_n splits them
 * when their kernels read different activation formats). */
static void matmul_same_input(woolly_context *c, const woolly_matrix *const *ws, float *const *ys, int n,
                              const float *x, int32_t m)
{
    woolly_matmul_out outs[4];
    for (int i = 0; i < n; i++) {
        if (c->imatrix)
            woolly_imatrix_add(c->imatrix, ws[i], x, m);
        outs[i] = (woolly_matmul_out){ws[i], &c->plans[ws[i]->id], ys[i], (size_t)ws[i]->rows};
    }
    woolly_matmul_n(c->pool, outs, n, x, m, c->s.pack);
}

/* Token t's embedding row as floats, whatever the matrix's type and layout. A matrix left in the file is
 * read with pread, not through the mapping: a fault there maps the file's cached pages around the row
 * too, and a prompt of 512 tokens left 24 MiB of llama-1b's file resident (peak RSS 708 -> 678 MiB). */
static void embed(woolly_context *c, int32_t id, float *out)
{
    const woolly_matrix *te = &c->model->w.token_embd;
    const char *row = (const char *)te->data + (size_t)id * te->row_bytes;
    woolly_error err;
    if (te->layout)
        te->layout->unpack(te->data, te->row_bytes, te->cols, id, c->s.embd_row);
    else if (gguf_read(c->model->file, row, te->row_bytes, c->s.embd_row, &err) != 0)
        memcpy(c->s.embd_row, row, te->row_bytes); /* the mapping has the same bytes (the file was checked) */
    woolly_dequantize_row(te->type, c->s.embd_row, out, te->cols);
}

/* out[t] = x[t] / rms(x[t]) * weight, for n rows of d (the registry's vectorized op). */
static void rmsnorm(const woolly_context *c, float *out, const float *x, const float *weight, int32_t n,
                    int32_t d, float eps)
{
    for (int32_t t = 0; t < n; t++)
        c->ops.rmsnorm(out + (size_t)t * d, x + (size_t)t * d, weight, d, eps);
}

/* The rotation angles of the batch's positions under one RoPE setting: pos * inv_freq[i] in double, so
 * that long contexts keep their precision; cos and sin carry the setting's factor (rope.h). */
static void rope_angles(const woolly_config *p, const int32_t *positions, int32_t n, const double *inv_freq,
                        double mscale, float *cos_out, float *sin_out)
{
    const int32_t half = p->n_rot / 2;
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < half; i++) {
            const double theta = (double)positions[t] * inv_freq[i];
            cos_out[(size_t)t * half + i] = (float)(cos(theta) * mscale);
            sin_out[(size_t)t * half + i] = (float)(sin(theta) * mscale);
        }
}

/* RoPE on one head: each pair i < n_rot/2 turned by its angle, the pairs (x[2i], x[2i+1]) (adjacent)
 * or (x[i], x[i + n_rot/2]) (the halves, NEOX). */
static void rotate_adjacent(float *v, const float *cs, const float *sn, int32_t half)
{
    for (int32_t i = 0; i < half; i++) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cs[i] - x1 * sn[i];
        v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
    }
}

static void rotate_halves(float *v, const float *cs, const float *sn, int32_t half)
{
    for (int32_t i = 0; i < half; i++) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[i] - x1 * sn[i];
        v[i + half] = x0 * sn[i] + x1 * cs[i];
    }
}

/* The heads of n rows of x (n_heads heads of head_dim per row) made ready for attention in one pass
 * over each head: + bias (NULL: none), RMSNorm times norm (NULL: none), then RoPE by the angles cs, sn
 * ([n][n_rot / 2]). */
static void prepare_heads(const woolly_context *c, float *x, int32_t n, int32_t n_heads, const float *bias,
                          const float *norm, const float *cs, const float *sn)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t half = p->n_rot / 2, hd = p->head_dim;
    const bool neox = p->arch->rope == WOOLLY_ROPE_NEOX;
    for (int32_t t = 0; t < n; t++)
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)t * n_heads + h) * hd;
            if (bias)
                for (int32_t i = 0; i < hd; i++)
                    v[i] += bias[(size_t)h * hd + i];
            if (norm)
                c->ops.rmsnorm(v, v, norm, hd, p->rms_eps);
            if (neox)
                rotate_halves(v, cs + (size_t)t * half, sn + (size_t)t * half, half);
            else
                rotate_adjacent(v, cs + (size_t)t * half, sn + (size_t)t * half, half);
        }
}

/* KV chunks per head for one token: the tests' forced split (attn_split), else the tuning profile's or
 * the automatic one (woolly_attn_kv_split), never more than s.att_part holds. */
static int32_t attn_n_split(const woolly_context *c, int nth, int64_t n_kv)
{
    if (c->attn_split > 0)
        return c->attn_split < c->attn_parts ? c->attn_split : c->attn_parts;
    return woolly_attn_kv_split(c->model->cfg.n_head_kv, nth, n_kv, c->attn_tuned_split, c->attn_parts);
}

/* Causal attention of the batch, each run over its own sequence's cache: the token at position pos
 * sees its sequence's positions 0 .. pos, or in a sliding layer its window's pos - W + 1 .. pos. */
static void attention(woolly_context *c, int32_t layer, const woolly_seq_run *runs, int32_t n_runs)
{
    const woolly_config *p = &c->model->cfg;
    woolly_attn_layer a = {
        .n_head = p->n_head,
        .n_head_kv = p->n_head_kv,
        .head_dim = p->head_dim,
        .scale = p->attention_scale,
        .q = c->s.q,
        .out = c->s.att,
        .runs = runs,
        .n_runs = n_runs,
        .kv = &c->kv,
        .layer = layer,
        .window = woolly_layer_window(p, layer),
        .kernel = c->attn,
        .kernel_decode = c->attn_decode,
        .q_per_call = c->attn_q_per_call,
        .decode_l2_blocks = c->attn_decode_l2,
        .n_split = 1,
        .part = c->s.att_part,
        .ml = c->s.att_ml,
    };
    const int nth = woolly_attn_threads(c->pool, &a);
    if (n_runs == 1 && runs[0].generated)
        a.n_split = attn_n_split(c, nth, woolly_attn_visible(runs[0].pos0, a.window));
    woolly_attn_run(c->pool, &a, nth);
}

/* x += scale * y over n * d values: a loop the compiler vectorizes at any level (bench/bench_ops). */
static void residual_add(float *x, const float *y, size_t len, float scale)
{
    for (size_t i = 0; i < len; i++)
        x[i] += scale * y[i];
}

/* x += residual_scale * FFN(xb) of n tokens, WOOLLY_FFN_TOKENS at a time: act(xb Wgate) * (xb Wup) in
 * the hidden buffers, then times Wdown into the same rows of xb, whose input they no longer need, and
 * normalized there by ffn_post_norm where the layer has one. */
static void feed_forward(woolly_context *c, const woolly_layer *L, int32_t n)
{
    const woolly_config *p = &c->model->cfg;
    woolly_run_state *s = &c->s;
    for (int32_t t0 = 0; t0 < n; t0 += WOOLLY_FFN_TOKENS) {
        const int32_t m = n - t0 < WOOLLY_FFN_TOKENS ? n - t0 : WOOLLY_FFN_TOKENS;
        float *h = s->xb + (size_t)t0 * p->n_embd;
        matmul_same_input(c, (const woolly_matrix *const[]){&L->w_gate, &L->w_up},
                          (float *const[]){s->hb, s->hb2}, 2, h, m);
        woolly_gated_rows(p->arch->steps.gelu_ffn ? c->ops.geglu : c->ops.swiglu, s->hb, s->hb2, m, p->n_ff);
        matmul(c, &L->w_down, s->hb, m, h);
        if (L->ffn_post_norm)
            rmsnorm(c, h, h, L->ffn_post_norm, m, p->n_embd, p->rms_eps);
    }
    residual_add(s->x, s->xb, (size_t)n * p->n_embd, p->residual_scale);
}

/* Cuts the batch into runs of consecutive tokens of one sequence (the batch is checked: their positions
 * are consecutive too). A lone token that follows the last token whose logits its sequence kept was
 * sampled from them, or stands where such a token would: it is a generated token, and takes the decode
 * path. Any other run is a prompt's (or a part of one), and takes the tiles. A token of a sequence that
 * decode_runs or decode_seqs marks is a generated run of its own. Returns how many. */
static int32_t split_runs(const woolly_context *c, woolly_seq_run *runs, const woolly_batch *b)
{
    int32_t n_runs = 0;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const int32_t seq = b->seq_id[t], pos = b->pos[t];
        const bool own = c->decode_runs || (c->decode_seqs && c->decode_seqs[seq]);
        if (!own && n_runs > 0 && runs[n_runs - 1].seq == seq) { /* its run goes on: a prompt's */
            runs[n_runs - 1].n++;
            runs[n_runs - 1].generated = false;
            continue;
        }
        const bool generated = pos > 0 && (own || c->logits_pos[seq] == pos - 1);
        runs[n_runs++] = (woolly_seq_run){.row0 = t, .n = 1, .seq = seq, .pos0 = pos, .generated = generated};
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
    const int32_t n_runs = split_runs(c, c->runs, b);
    if (c->imatrix)
        woolly_imatrix_next_pass(c->imatrix);

    /* Token embeddings: one dequantized row per token. */
    for (int32_t t = 0; t < n; t++) {
        float *xt = s->x + (size_t)t * d;
        embed(c, b->token[t], xt);
        if (p->embedding_scale != 1.0f)
            for (int32_t i = 0; i < d; i++)
                xt[i] *= p->embedding_scale;
    }
    rope_angles(p, b->pos, n, s->inv_freq, s->rope_mscale, s->rope_cos, s->rope_sin);
    if (s->inv_freq_swa)
        rope_angles(p, b->pos, n, s->inv_freq_swa, s->rope_mscale_swa, s->rope_cos_swa, s->rope_sin_swa);

    for (int32_t l = 0; l < p->n_layer; l++) {
        const woolly_layer *L = &w->layers[l];
        const bool sliding = s->inv_freq_swa && woolly_layer_window(p, l) > 0;
        const float *cs = sliding ? s->rope_cos_swa : s->rope_cos,
                    *sn = sliding ? s->rope_sin_swa : s->rope_sin;

        /* Attention. */
        rmsnorm(c, s->xb, s->x, L->attn_norm, n, d, p->rms_eps);
        matmul_same_input(c, (const woolly_matrix *const[]){&L->wq, &L->wk, &L->wv},
                          (float *const[]){s->q, s->k, s->v}, 3, s->xb, n);
        prepare_heads(c, s->q, n, p->n_head, L->bq, L->q_norm, cs, sn);
        prepare_heads(c, s->k, n, p->n_head_kv, L->bk, L->k_norm, cs, sn);
        for (int32_t t = 0; t < n; t++) {
            float *vt = s->v + (size_t)t * kv_dim;
            if (L->bv)
                for (size_t i = 0; i < kv_dim; i++)
                    vt[i] += L->bv[i];
            woolly_kv_cache_store(&c->kv, l, b->seq_id[t], b->pos[t], s->k + (size_t)t * kv_dim, vt);
        }
        attention(c, l, c->runs, n_runs);
        matmul(c, &L->wo, s->att, n, s->xb);
        if (L->attn_post_norm)
            rmsnorm(c, s->xb, s->xb, L->attn_post_norm, n, d, p->rms_eps);
        residual_add(s->x, s->xb, (size_t)n * d, p->residual_scale);

        /* Feed-forward: dense, or a mixture of experts (moe.c). */
        rmsnorm(c, s->xb, s->x, L->ffn_norm, n, d, p->rms_eps);
        if (p->n_expert > 0) {
            woolly_moe_ffn(c, L, n);
            residual_add(s->x, s->xb, (size_t)n * d, p->residual_scale);
        } else {
            feed_forward(c, L, n);
        }
    }

    /* The final hidden states, when asked for (embeddings): every token's, normed as for the logits. */
    c->embd_valid = c->embd_on;
    if (c->embd_on)
        for (int32_t t = 0; t < n; t++)
            c->ops.rmsnorm(s->embd + (size_t)t * d, s->x + (size_t)t * d, w->output_norm, d, p->rms_eps);

    /* Logits of the tokens that asked for them. */
    const int32_t rows = gather_logit_rows(c, b);
    if (rows > 0)
        matmul(c, &w->output, s->xb, rows, s->logits);
    if (p->logit_scale != 1.0f)
        for (size_t i = 0; i < (size_t)rows * p->n_vocab; i++)
            s->logits[i] /= p->logit_scale;
    if (p->logit_softcap > 0.0f)
        for (size_t i = 0; i < (size_t)rows * p->n_vocab; i++)
            s->logits[i] = p->logit_softcap * tanhf(s->logits[i] / p->logit_softcap);
    c->fwd_n = n;
    for (int32_t r = 0; r < n_runs; r++) {
        const woolly_seq_run *run = &c->runs[r];
        c->seq_len[run->seq] = run->pos0 + run->n;
        c->logits_pos[run->seq] = c->logits_row[run->row0 + run->n - 1] >= 0 ? run->pos0 + run->n - 1 : -1;
    }
}
