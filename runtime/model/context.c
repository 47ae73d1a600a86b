#include "context.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "rope.h"

enum { DEFAULT_N_BATCH = 512, MAX_DEFAULT_N_CTX = 4096, MAX_N_BATCH = 1 << 16, MAX_N_SEQ = 1024 };

woolly_context_params woolly_context_default_params(void)
{
    return (woolly_context_params){
        .n_ctx = 0,
        .n_batch = DEFAULT_N_BATCH,
        .n_threads = 0,
        .kv_type = WOOLLY_KV_F16,
        .logits_all = false,
        .n_seq_max = 1,
    };
}

enum woolly_type woolly_kv_wtype(woolly_kv_type t)
{
    return t == WOOLLY_KV_F32 ? WOOLLY_TYPE_F32 : t == WOOLLY_KV_Q8_0 ? WOOLLY_TYPE_Q8_0 : WOOLLY_TYPE_F16;
}

static const char *kv_name(woolly_kv_type t)
{
    return t == WOOLLY_KV_F32 ? "f32" : t == WOOLLY_KV_Q8_0 ? "q8_0" : "f16";
}

/* Physical memory in bytes (0 if unknown). */
static double phys_bytes(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

int32_t woolly_default_n_ctx(const woolly_model *m, woolly_kv_type kv, int32_t n_seq)
{
    const woolly_config *p = &m->cfg;
    int32_t n = p->n_ctx_train < MAX_DEFAULT_N_CTX ? p->n_ctx_train : MAX_DEFAULT_N_CTX;
    const double budget = phys_bytes() / 4.0 / (n_seq > 0 ? n_seq : 1);
    int32_t n_global = 0; /* a sliding layer's ring does not grow with the context */
    for (int32_t l = 0; l < p->n_layer; l++)
        n_global += woolly_layer_window(p, l) == 0;
    const double per_pos = (double)woolly_kv_cache_bytes(woolly_kv_wtype(kv), 1, n_global > 0 ? n_global : 1,
                                                         p->n_head_kv, p->head_dim);
    if (budget > 0 && per_pos > 0 && per_pos * n > budget)
        n = (int32_t)(budget / per_pos);
    return n > 0 ? n : 1;
}

static int alloc_state(woolly_context *c, woolly_error *err)
{
    const woolly_config *p = &c->model->cfg;
    const size_t nb = (size_t)c->params.n_batch;
    const size_t q_dim = (size_t)p->n_head * p->head_dim, kv_dim = (size_t)p->n_head_kv * p->head_dim;
    const size_t n_ffn = nb < WOOLLY_FFN_TOKENS ? nb : WOOLLY_FFN_TOKENS;
    const size_t n_swa_rope = p->n_swa > 0 ? nb * (size_t)(p->n_rot / 2) : 0;
    const size_t n_hidden = (size_t)(p->n_ff_exp > p->n_ff ? p->n_ff_exp : p->n_ff);
    woolly_run_state *s = &c->s;
    struct {
        float **ptr;
        size_t n;
    } bufs[] = {
        {&s->x, nb * p->n_embd},
        {&s->xb, nb * p->n_embd},
        {&s->q, nb * q_dim},
        {&s->k, nb * kv_dim},
        {&s->v, nb * kv_dim},
        {&s->att, nb * q_dim},
        {&s->att_part, (size_t)c->attn_parts * q_dim},
        {&s->att_ml, (size_t)c->attn_parts * (size_t)p->n_head * 2},
        {&s->hb, n_ffn * n_hidden},
        {&s->hb2, n_ffn * n_hidden},
        {&s->rope_cos, nb * (size_t)(p->n_rot / 2)},
        {&s->rope_sin, nb * (size_t)(p->n_rot / 2)},
        {&s->rope_cos_swa, n_swa_rope},
        {&s->rope_sin_swa, n_swa_rope},
        {&s->logits, (size_t)c->n_logits_max * (size_t)p->n_vocab},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i].n)
            continue;
        *bufs[i].ptr = calloc(bufs[i].n, sizeof(float));
        if (!*bufs[i].ptr)
            return woolly_fail(
                err, "out of memory for the run state (%zu floats); try a smaller --batch-size", bufs[i].n);
    }
    if (woolly_moe_state_alloc(&s->moe, p, nb, n_ffn, err))
        return -1;
    s->inv_freq = malloc(sizeof(double) * (size_t)(p->n_rot / 2));
    if (!s->inv_freq)
        return woolly_fail(err, "out of memory");
    const woolly_rope_setting global = woolly_rope_global(c->model, c->params.n_ctx);
    s->rope_mscale = woolly_rope_inv_freqs(&global, s->inv_freq);
    if (n_swa_rope) {
        if (!(s->inv_freq_swa = malloc(sizeof(double) * (size_t)(p->n_rot / 2))))
            return woolly_fail(err, "out of memory");
        const woolly_rope_setting sliding = woolly_rope_sliding(c->model);
        s->rope_mscale_swa = woolly_rope_inv_freqs(&sliding, s->inv_freq_swa);
    }

    /* Packing scratch: the widest packed input of any matrix, for a full batch. */
    size_t pack = 0;
    for (int32_t i = 0; i < c->model->n_mats; i++) {
        const size_t b = nb * woolly_matmul_plan_pack_bytes(&c->plans[i], c->model->mats[i]->cols);
        pack = b > pack ? b : pack;
    }
    if (pack && !(s->pack = malloc(pack)))
        return woolly_fail(err, "out of memory for %zu bytes of packed activations", pack);
    const woolly_matrix *te = &c->model->w.token_embd;
    if (!(s->embd_row = malloc(woolly_row_bytes(te->type, te->cols))))
        return woolly_fail(err, "out of memory");

    const size_t n_seq = (size_t)c->params.n_seq_max;
    c->seq_len = calloc(n_seq, sizeof *c->seq_len);
    c->next_pos = calloc(n_seq, sizeof *c->next_pos);
    c->logits_pos = malloc(n_seq * sizeof *c->logits_pos);
    c->runs = calloc(nb, sizeof *c->runs);
    c->logits_row = calloc(nb, sizeof *c->logits_row);
    if (!c->seq_len || !c->next_pos || !c->logits_pos || !c->runs || !c->logits_row ||
        woolly_batch_init(&c->own, c->params.n_batch))
        return woolly_fail(err, "out of memory");
    for (size_t i = 0; i < n_seq; i++)
        c->logits_pos[i] = -1;
    return 0;
}

static void free_state(woolly_run_state *s)
{
    float *bufs[] = {s->x,      s->xb, s->q,   s->k,        s->v,        s->att,          s->att_part,
                     s->att_ml, s->hb, s->hb2, s->rope_cos, s->rope_sin, s->rope_cos_swa, s->rope_sin_swa,
                     s->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s->embd);
    woolly_moe_state_free(&s->moe);
    free(s->inv_freq);
    free(s->inv_freq_swa);
    free(s->pack);
    free(s->embd_row);
    memset(s, 0, sizeof *s);
}

static void free_batch_state(woolly_context *c)
{
    free(c->seq_len);
    free(c->next_pos);
    free(c->logits_pos);
    free(c->runs);
    free(c->logits_row);
    woolly_batch_free(&c->own);
}

/* Matrix i's plan: the tuning profile's steps for its type, shape and this context's thread count,
 * the defaults for the classes it has none for. */
static int init_plan(woolly_context *c, int32_t i, woolly_error *err)
{
    const woolly_matrix *w = c->model->mats[i];
    woolly_matmul_step tuned[WOOLLY_TOKENS_CLASSES] = {{0}};
    for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++) {
        const woolly_profile_matmul *row = woolly_profile_find_matmul(
            c->model->profile, w->type, w->rows, w->cols, (enum woolly_tokens_class)k, c->params.n_threads);
        if (row) {
            tuned[k] = row->step;
            c->n_tuned++;
        }
    }
    return woolly_matmul_plan_init(&c->plans[i], w, tuned, err);
}

/* The attention kernels, for decode and for prefill: the tuning profile's for this cache type, head
 * dimension and thread count, else the default (one kernel for both, its query tile per call, the split
 * automatic), with rounded (BF16, FP16 P V) tiles beside int8 or BF16 matmuls (woolly_attn_act) where they
 * pay (woolly_kernel_choose_attn). Runs before the run state is allocated: a tuned split may need more
 * partial results. */
static int init_attn(woolly_context *c, woolly_error *err)
{
    const enum woolly_type cache = woolly_kv_wtype(c->params.kv_type);
    const int32_t hd = c->model->cfg.head_dim;
    unsigned acts = 0;
    for (int32_t i = 0; i < c->model->n_mats; i++)
        acts |= 1u << c->model->mats[i]->act;
    const woolly_kernel *def = woolly_kernel_choose_attn(cache, hd, woolly_attn_act(acts));
    if (!def)
        return woolly_fail(err, "no attention kernel for a %s KV cache with head dimension %d",
                           kv_name(c->params.kv_type), hd);
    c->attn = c->attn_decode = def;
    c->attn_q_per_call = def->tile_m;
    c->attn_decode_l2 = woolly_kernel_attn_decode_l2();
    const woolly_profile_attn *dec =
        woolly_profile_find_attn(c->model->profile, cache, hd, WOOLLY_ATTN_DECODE, c->params.n_threads);
    const woolly_profile_attn *pre =
        woolly_profile_find_attn(c->model->profile, cache, hd, WOOLLY_ATTN_PREFILL, c->params.n_threads);
    if (dec) {
        c->attn_decode = dec->kernel;
        c->attn_tuned_split = dec->kv_split;
        if (c->attn_parts < dec->kv_split)
            c->attn_parts = dec->kv_split;
        c->n_tuned++;
    }
    if (pre) {
        c->attn = pre->kernel;
        c->attn_q_per_call = pre->queries_per_call;
        c->n_tuned++;
    }
    return 0;
}

/* Each layer's sliding window (woolly_layer_window) for the KV cache: [n_layer], NULL when no layer
 * slides (or without memory: then every layer keeps n_ctx positions, which only costs memory). */
static int32_t *layer_windows(const woolly_config *cfg)
{
    if (cfg->n_swa <= 0)
        return NULL;
    int32_t *w = malloc(sizeof *w * (size_t)cfg->n_layer);
    for (int32_t l = 0; w && l < cfg->n_layer; l++)
        w[l] = woolly_layer_window(cfg, l);
    return w;
}

woolly_context *woolly_context_create(woolly_model *m, const woolly_context_params *pp, woolly_error *err)
{
    woolly_context_params p = pp ? *pp : woolly_context_default_params();
    const woolly_config *cfg = &m->cfg;
    if (p.kv_type != WOOLLY_KV_F16 && p.kv_type != WOOLLY_KV_F32 && p.kv_type != WOOLLY_KV_Q8_0) {
        woolly_fail(err, "KV cache type %d is unknown (F16 = 0, F32 = 1, Q8_0 = 2)", (int)p.kv_type);
        return NULL;
    }
    if (p.kv_type == WOOLLY_KV_Q8_0 && cfg->head_dim % WOOLLY_QK8_0) {
        woolly_fail(
            err, "--kv-type q8_0 needs a head dimension that is a multiple of %d; %s has %d (use f16 or f32)",
            WOOLLY_QK8_0, m->label, cfg->head_dim);
        return NULL;
    }
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0 || p.n_seq_max < 0) {
        woolly_fail(err,
                    "context parameters must not be negative (n_ctx %d, n_batch %d, n_threads %d, "
                    "n_seq_max %d)",
                    p.n_ctx, p.n_batch, p.n_threads, p.n_seq_max);
        return NULL;
    }
    if (p.n_seq_max == 0)
        p.n_seq_max = 1;
    if (p.n_seq_max > MAX_N_SEQ) {
        woolly_fail(err, "%d sequences exceed the maximum %d per context", p.n_seq_max, MAX_N_SEQ);
        return NULL;
    }
    if (p.n_ctx == 0)
        p.n_ctx = woolly_default_n_ctx(m, p.kv_type, p.n_seq_max);
    if (p.n_batch == 0)
        p.n_batch = DEFAULT_N_BATCH;
    /* The caches must fit in physical memory beside the weights (a sliding layer's: its ring). */
    int32_t *windows = layer_windows(cfg);
    const double cache =
        (double)woolly_kv_cache_bytes_swa(woolly_kv_wtype(p.kv_type), p.n_ctx, p.n_batch, cfg->n_layer,
                                          windows, cfg->n_head_kv, cfg->head_dim) *
        p.n_seq_max;
    free(windows);
    const double mem = phys_bytes(), room = mem - (double)m->n_bytes;
    if (mem > 0 && cache > room) {
        woolly_fail(err,
                    "context size %d x %d sequences needs a %.1f MiB %s KV cache, more than the %.1f MiB of "
                    "memory left beside the model's %.1f MiB; use a smaller --ctx-size%s",
                    p.n_ctx, p.n_seq_max, cache / 1048576.0, kv_name(p.kv_type),
                    room > 0 ? room / 1048576.0 : 0.0, (double)m->n_bytes / 1048576.0,
                    p.kv_type == WOOLLY_KV_Q8_0 ? "" : " or --kv-type q8_0");
        return NULL;
    }
    if (p.n_batch > MAX_N_BATCH) {
        woolly_fail(err, "batch size %d exceeds the maximum %d", p.n_batch, MAX_N_BATCH);
        return NULL;
    }
    if ((int64_t)p.n_batch > (int64_t)p.n_ctx * p.n_seq_max) /* a batch never holds more than the caches */
        p.n_batch = p.n_ctx * p.n_seq_max;
    if (p.n_threads == 0)
        p.n_threads = woolly_cpu_get()->n_cores > 0 ? woolly_cpu_get()->n_cores : 1;
    if (p.n_threads > WOOLLY_MAX_THREADS) {
        woolly_fail(err, "thread count %d exceeds the maximum %d", p.n_threads, WOOLLY_MAX_THREADS);
        return NULL;
    }

    woolly_context *c = calloc(1, sizeof *c);
    if (!c) {
        woolly_fail(err, "out of memory");
        return NULL;
    }
    c->model = m;
    c->params = p;
    c->n_logits_max = p.logits_all ? p.n_batch : p.n_seq_max;
    c->ops = woolly_small_ops_choose();
    /* One token's attention splits into at most as many KV chunks per head as there are threads (4 at
     * least, for the tests' forced splits). */
    c->attn_parts = p.n_threads < 4                       ? 4
                    : p.n_threads > WOOLLY_ATTN_MAX_PARTS ? WOOLLY_ATTN_MAX_PARTS
                                                          : p.n_threads;
    int rc = 0;
    if (!(c->plans = calloc((size_t)m->n_mats, sizeof *c->plans)))
        rc = woolly_fail(err, "out of memory");
    for (int32_t i = 0; i < m->n_mats && !rc; i++)
        rc = init_plan(c, i, err);
    if (!rc)
        rc = init_attn(c, err);
    if (!rc) {
        int32_t *windows = layer_windows(cfg);
        rc = woolly_kv_cache_open_swa(&c->kv, woolly_kv_wtype(p.kv_type), p.n_ctx, p.n_seq_max, p.n_batch,
                                      cfg->n_layer, windows, cfg->n_head_kv, cfg->head_dim, err);
        free(windows);
    }
    if (!rc)
        rc = alloc_state(c, err);
    if (!rc && !(c->pool = woolly_threadpool_open(p.n_threads, err)))
        rc = -1;
    if (rc) {
        woolly_context_close(c);
        return NULL;
    }
    return c;
}

void woolly_context_close(woolly_context *c)
{
    if (!c)
        return;
    woolly_threadpool_close(c->pool);
    free_state(&c->s);
    free_batch_state(c);
    woolly_kv_cache_close(&c->kv);
    free(c->plans);
    free(c);
}

int woolly_context_eval(woolly_context *c, const woolly_token *ids, int32_t n, woolly_error *err)
{
    const woolly_config *p = &c->model->cfg;
    if (n < 1 || !ids)
        return woolly_fail(err, "nothing to evaluate (%d tokens)", n);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= p->n_vocab)
            return woolly_fail(err, "token id %d (at index %d) is out of range [0, %d)", ids[i], i,
                               p->n_vocab);
    if ((int64_t)c->seq_len[0] + n > c->params.n_ctx)
        return woolly_fail(err,
                           "context full: %d tokens in the cache + %d new ones exceed the context size %d "
                           "(raise --ctx-size)",
                           c->seq_len[0], n, c->params.n_ctx);
    if (c->params.logits_all && n > c->params.n_batch)
        return woolly_fail(
            err, "with logits for every token, evaluate at most n_batch = %d tokens per call (got %d)",
            c->params.n_batch, n);
    woolly_batch *b = &c->own;
    for (int32_t done = 0; done < n;) {
        const int32_t chunk = n - done < c->params.n_batch ? n - done : c->params.n_batch;
        b->n_tokens = 0;
        for (int32_t i = 0; i < chunk; i++)
            woolly_batch_add(b, ids[done + i], c->seq_len[0] + i, 0,
                             c->params.logits_all || done + i == n - 1);
        woolly_forward(c, b);
        c->fwd_first = done;
        done += chunk;
    }
    c->last_n = n;
    return 0;
}

int woolly_context_decode(woolly_context *c, const woolly_batch *b, woolly_error *err)
{
    const woolly_config *p = &c->model->cfg;
    const int32_t n = b ? b->n_tokens : 0, n_seq = c->params.n_seq_max;
    if (n < 1 || !b->token || !b->pos || !b->seq_id)
        return woolly_fail(err, "nothing to evaluate (a batch of %d tokens)", n);
    if (n > c->params.n_batch)
        return woolly_fail(err, "a batch of %d tokens exceeds the context's batch size %d (raise n_batch)", n,
                           c->params.n_batch);
    memcpy(c->next_pos, c->seq_len, sizeof *c->next_pos * (size_t)n_seq);
    int32_t n_logits = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t seq = b->seq_id[i], pos = b->pos[i];
        if (b->token[i] < 0 || b->token[i] >= p->n_vocab)
            return woolly_fail(err, "token id %d (at index %d) is out of range [0, %d)", b->token[i], i,
                               p->n_vocab);
        if (seq < 0 || seq >= n_seq)
            return woolly_fail(err, "sequence id %d (at index %d) is out of range [0, %d) (raise n_seq_max)",
                               seq, i, n_seq);
        if (pos != c->next_pos[seq])
            return woolly_fail(err,
                               "token %d of the batch is at position %d of sequence %d, which continues at "
                               "position %d: a sequence's tokens follow its cache in order",
                               i, pos, seq, c->next_pos[seq]);
        if (pos >= c->params.n_ctx) {
            int32_t adds = 0;
            for (int32_t k = 0; k < n; k++)
                adds += b->seq_id[k] == seq;
            return woolly_fail(
                err,
                "context full: sequence %d holds %d tokens, and the batch adds %d: more than the "
                "context size %d (raise --ctx-size)",
                seq, c->seq_len[seq], adds, c->params.n_ctx);
        }
        c->next_pos[seq]++;
        n_logits += b->logits ? b->logits[i] : i == n - 1;
    }
    if (n_logits > c->n_logits_max)
        return woolly_fail(err,
                           "the batch asks for the logits of %d tokens; the context keeps at most %d "
                           "(n_seq_max, or n_batch with logits_all)",
                           n_logits, c->n_logits_max);
    woolly_forward(c, b);
    c->fwd_first = 0;
    c->last_n = n;
    return 0;
}

/* ---- batches ------------------------------------------------------------------------------------- */

int woolly_batch_init(woolly_batch *b, int32_t cap)
{
    *b = (woolly_batch){0};
    if (cap < 1) {
        woolly_error err;
        woolly_fail(&err, "a batch needs room for at least one token (cap %d)", cap);
        woolly_set_last_error(&err);
        return -1;
    }
    b->cap = cap;
    b->token = malloc(sizeof *b->token * (size_t)cap);
    b->pos = malloc(sizeof *b->pos * (size_t)cap);
    b->seq_id = malloc(sizeof *b->seq_id * (size_t)cap);
    b->logits = malloc(sizeof *b->logits * (size_t)cap);
    if (!b->token || !b->pos || !b->seq_id || !b->logits) {
        woolly_batch_free(b);
        woolly_error err;
        woolly_fail(&err, "out of memory for a batch of %d tokens", cap);
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

void woolly_batch_free(woolly_batch *b)
{
    free(b->token);
    free(b->pos);
    free(b->seq_id);
    free(b->logits);
    *b = (woolly_batch){0};
}

int woolly_batch_add(woolly_batch *b, woolly_token t, int32_t pos, int32_t seq_id, bool logits)
{
    if (b->n_tokens >= b->cap) {
        woolly_error err;
        woolly_fail(&err, "the batch is full (%d tokens)", b->cap);
        woolly_set_last_error(&err);
        return -1;
    }
    const int32_t i = b->n_tokens++;
    b->token[i] = t;
    b->pos[i] = pos;
    b->seq_id[i] = seq_id;
    if (b->logits)
        b->logits[i] = logits;
    return 0;
}

/* ---- public API ---------------------------------------------------------------------------------- */

woolly_context *woolly_context_open(woolly_model *m, const woolly_context_params *p)
{
    woolly_error err = {{0}};
    if (!m) {
        woolly_fail(&err, "woolly_context_open: no model");
        woolly_set_last_error(&err);
        return NULL;
    }
    woolly_context *c = woolly_context_create(m, p, &err);
    if (!c)
        woolly_set_last_error(&err);
    return c;
}

int woolly_decode(woolly_context *c, const woolly_batch *b)
{
    woolly_error err = {{0}};
    if (woolly_context_decode(c, b, &err)) {
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

int woolly_eval(woolly_context *c, const woolly_token *ids, int32_t n)
{
    woolly_error err = {{0}};
    if (woolly_context_eval(c, ids, n, &err)) {
        woolly_set_last_error(&err);
        return -1;
    }
    return 0;
}

const float *woolly_get_logits(woolly_context *c, int32_t i)
{
    if (c->fwd_n == 0)
        return NULL;
    if (i == -1)
        i = c->last_n - 1;
    /* Only the last forward pass of the call (its last chunk) has its logits in the buffer. */
    const int32_t t = i - c->fwd_first;
    const int32_t r = i >= 0 && i < c->last_n && t >= 0 && t < c->fwd_n ? c->logits_row[t] : -1;
    if (r < 0) {
        woolly_error err;
        woolly_fail(&err, "no logits for token %d of the last evaluation (%d tokens; %s)", i, c->last_n,
                    c->params.logits_all ? "logits of all" : "only tokens that asked for logits have them");
        woolly_set_last_error(&err);
        return NULL;
    }
    return c->s.logits + (size_t)r * c->model->cfg.n_vocab;
}

int woolly_set_embeddings(woolly_context *c, bool on)
{
    if (on && !c->s.embd &&
        !(c->s.embd = calloc((size_t)c->params.n_batch * (size_t)c->model->cfg.n_embd, sizeof(float)))) {
        woolly_error err;
        woolly_fail(&err, "out of memory for the embeddings of %d tokens", c->params.n_batch);
        woolly_set_last_error(&err);
        return -1;
    }
    c->embd_on = on;
    return 0;
}

const float *woolly_get_embeddings(woolly_context *c, int32_t i)
{
    if (i == -1)
        i = c->last_n - 1;
    const int32_t t = i - c->fwd_first;
    if (c->fwd_n == 0 || !c->embd_valid || i < 0 || i >= c->last_n || t < 0 || t >= c->fwd_n) {
        woolly_error err;
        woolly_fail(&err, "no embeddings for token %d of the last evaluation (%d tokens; %s)", i, c->last_n,
                    c->embd_valid ? "out of range" : "embeddings were off");
        woolly_set_last_error(&err);
        return NULL;
    }
    return c->s.embd + (size_t)t * c->model->cfg.n_embd;
}

int32_t woolly_context_n_ctx(const woolly_context *c)
{
    return c->params.n_ctx;
}
int32_t woolly_context_n_batch(const woolly_context *c)
{
    return c->params.n_batch;
}
int32_t woolly_context_n_threads(const woolly_context *c)
{
    return c->params.n_threads;
}
int32_t woolly_context_n_tuned(const woolly_context *c)
{
    return c->n_tuned;
}
int32_t woolly_context_n_past(const woolly_context *c)
{
    return c->seq_len[0];
}

int woolly_context_rewind(woolly_context *c, int32_t n_past)
{
    return woolly_seq_rewind(c, 0, n_past);
}

int32_t woolly_context_n_seq(const woolly_context *c)
{
    return c->params.n_seq_max;
}

int32_t woolly_seq_n_past(const woolly_context *c, int32_t seq_id)
{
    return seq_id >= 0 && seq_id < c->params.n_seq_max ? c->seq_len[seq_id] : -1;
}

int woolly_seq_rewind(woolly_context *c, int32_t seq_id, int32_t n_past)
{
    woolly_error err;
    if (seq_id < 0 || seq_id >= c->params.n_seq_max) {
        woolly_fail(&err, "sequence id %d is out of range [0, %d)", seq_id, c->params.n_seq_max);
        woolly_set_last_error(&err);
        return -1;
    }
    if (n_past < 0 || n_past > c->seq_len[seq_id]) {
        woolly_fail(&err, "cannot rewind sequence %d to position %d: its cache holds %d", seq_id, n_past,
                    c->seq_len[seq_id]);
        woolly_set_last_error(&err);
        return -1;
    }
    if (!woolly_kv_cache_holds(&c->kv, seq_id, n_past)) {
        woolly_fail(&err,
                    "cannot rewind sequence %d to position %d: its sliding-window layers no longer hold the "
                    "positions before it (rewind to 0 and evaluate again)",
                    seq_id, n_past);
        woolly_set_last_error(&err);
        return -1;
    }
    /* Positions past n_past are never read again before they are written: the region is free now. */
    woolly_kv_cache_rewind(&c->kv, seq_id, n_past);
    c->seq_len[seq_id] = n_past;
    if (c->logits_pos[seq_id] >= n_past)
        c->logits_pos[seq_id] = -1;
    /* The last call's logits stay readable: other sequences of its batch still need theirs. */
    return 0;
}

int woolly_seq_copy(woolly_context *c, int32_t src, int32_t dst, int32_t n)
{
    woolly_error err;
    const int32_t n_seq = c->params.n_seq_max;
    if (src < 0 || src >= n_seq || dst < 0 || dst >= n_seq || src == dst) {
        woolly_fail(&err, "cannot copy sequence %d into sequence %d: two different ids in [0, %d) are needed",
                    src, dst, n_seq);
        woolly_set_last_error(&err);
        return -1;
    }
    if (n < 0 || n > c->seq_len[src]) {
        woolly_fail(&err, "cannot copy %d positions of sequence %d: its cache holds %d", n, src,
                    c->seq_len[src]);
        woolly_set_last_error(&err);
        return -1;
    }
    if (woolly_kv_cache_copy(&c->kv, src, dst, n)) {
        woolly_fail(&err,
                    "cannot copy %d positions of sequence %d: its sliding-window layers no longer hold the "
                    "positions before %d (evaluate them again)",
                    n, src, n);
        woolly_set_last_error(&err);
        return -1;
    }
    c->seq_len[dst] = n;
    c->logits_pos[dst] = -1; /* what follows the copy is a prompt's, not a token sampled from dst */
    return 0;
}
