#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "registry.h"

/* ---- metadata ------------------------------------------------------------------------------------ */

/* "<arch>.<key>" */
static const char *arch_key(const woolly_model *m, const char *key)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s.%s", m->arch_name, key);
    return buf;
}

/* An integer hyperparameter in [lo, hi]; `def` < 0 makes it required. */
static int read_int(const woolly_model *m, const char *key, long long def, long long lo, long long hi,
                    int32_t *out, woolly_error *err)
{
    const char *k = arch_key(m, key);
    woolly_error e = {{0}};
    uint32_t v;
    if (!gguf_get_u32(m->file, k, &v, &e)) {
        if (e.msg[0])
            return woolly_fail(err, "%s: %s", m->label, e.msg);
        if (def < 0)
            return woolly_fail(err, "%s: missing hyperparameter '%s'", m->label, k);
        v = (uint32_t)def;
    }
    if (v < lo || v > hi)
        return woolly_fail(err, "%s: hyperparameter '%s' = %u is out of range [%lld, %lld]", m->label, k, v,
                           lo, hi);
    *out = (int32_t)v;
    return 0;
}

/* A float hyperparameter; absent (or 0 when zero_means_absent) gives `def`; must be finite and > 0. */
static int read_float(const woolly_model *m, const char *key, bool required, float def, float *out,
                      woolly_error *err)
{
    const char *k = arch_key(m, key);
    woolly_error e = {{0}};
    float v;
    if (!gguf_get_f32(m->file, k, &v, &e)) {
        if (e.msg[0])
            return woolly_fail(err, "%s: %s", m->label, e.msg);
        if (required)
            return woolly_fail(err, "%s: missing hyperparameter '%s'", m->label, k);
        v = def;
    }
    if (v == 0.0f && !required) /* converters write 0 for "not set" */
        v = def;
    if (!isfinite(v) || !(v > 0.0f))
        return woolly_fail(err, "%s: hyperparameter '%s' = %g must be a finite number > 0", m->label, k,
                           (double)v);
    *out = v;
    return 0;
}

static int read_config(woolly_model *m, woolly_error *err)
{
    woolly_config *c = &m->cfg;
    gguf_str arch;
    woolly_error e = {{0}};
    if (!gguf_get_str(m->file, "general.architecture", &arch, &e))
        return woolly_fail(err, "%s: %s", m->label, e.msg[0] ? e.msg : "missing 'general.architecture'");
    if (gguf_str_eq(arch, "llama"))
        c->arch = WOOLLY_ARCH_LLAMA;
    else if (gguf_str_eq(arch, "granite"))
        c->arch = WOOLLY_ARCH_GRANITE;
    else
        return woolly_fail(err, "%s: architecture '%.*s' is not supported (supported: llama, granite)",
                           m->label, (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    snprintf(m->arch_name, sizeof m->arch_name, "%.*s", (int)arch.len, arch.ptr);

    const long long BIG = 1 << 30;
    if (read_int(m, "embedding_length", -1, 1, BIG, &c->n_embd, err) ||
        read_int(m, "block_count", -1, 1, 100000, &c->n_layer, err) ||
        read_int(m, "attention.head_count", -1, 1, 100000, &c->n_head, err) ||
        read_int(m, "attention.head_count_kv", c->n_head, 1, c->n_head, &c->n_head_kv, err) ||
        read_int(m, "feed_forward_length", -1, 1, BIG, &c->n_ff, err) ||
        read_int(m, "context_length", -1, 1, BIG, &c->n_ctx_train, err))
        return -1;
    if (c->n_head % c->n_head_kv)
        return woolly_fail(err, "%s: %d query heads cannot be shared evenly by %d key/value heads", m->label,
                           c->n_head, c->n_head_kv);
    if (c->n_head / c->n_head_kv > WOOLLY_MAX_GROUP)
        return woolly_fail(err, "%s: %d query heads per key/value head exceed the supported %d", m->label,
                           c->n_head / c->n_head_kv, WOOLLY_MAX_GROUP);

    if (!gguf_find_kv(m->file, arch_key(m, "attention.key_length")) && c->n_embd % c->n_head)
        return woolly_fail(err, "%s: embedding length %d is not a multiple of the head count %d", m->label,
                           c->n_embd, c->n_head);
    int32_t v_len;
    if (read_int(m, "attention.key_length", c->n_embd / c->n_head, 1, BIG, &c->head_dim, err) ||
        read_int(m, "attention.value_length", c->head_dim, 1, BIG, &v_len, err))
        return -1;
    if (v_len != c->head_dim)
        return woolly_fail(err, "%s: key length %d differs from value length %d (not supported)", m->label,
                           c->head_dim, v_len);
    if (c->head_dim > WOOLLY_MAX_HEAD_DIM)
        return woolly_fail(err, "%s: head dimension %d exceeds the supported %d", m->label, c->head_dim,
                           WOOLLY_MAX_HEAD_DIM);
    if (read_int(m, "rope.dimension_count", c->head_dim, 2, c->head_dim, &c->n_rot, err))
        return -1;
    if (c->n_rot % 2)
        return woolly_fail(err, "%s: rope.dimension_count %d must be even (RoPE rotates pairs)", m->label,
                           c->n_rot);
    if (read_float(m, "rope.freq_base", false, 10000.0f, &c->rope_base, err) ||
        read_float(m, "attention.layer_norm_rms_epsilon", true, 0.0f, &c->rms_eps, err))
        return -1;

    c->rope_scale = 1.0f;
    gguf_str scaling;
    if (gguf_get_str(m->file, arch_key(m, "rope.scaling.type"), &scaling, &e) &&
        !gguf_str_eq(scaling, "none")) {
        if (!gguf_str_eq(scaling, "linear"))
            return woolly_fail(err, "%s: RoPE scaling '%.*s' is not supported (none, linear)", m->label,
                               (int)(scaling.len > 32 ? 32 : scaling.len), scaling.ptr);
        if (read_float(m, "rope.scaling.factor", false, 1.0f, &c->rope_scale, err))
            return -1;
    } else if (e.msg[0]) {
        return woolly_fail(err, "%s: %s", m->label, e.msg);
    }

    c->embedding_scale = c->residual_scale = c->logit_scale = 1.0f;
    c->attention_scale = 1.0f / sqrtf((float)c->head_dim);
    if (c->arch == WOOLLY_ARCH_GRANITE) {
        if (read_float(m, "embedding_scale", false, 1.0f, &c->embedding_scale, err) ||
            read_float(m, "residual_scale", false, 1.0f, &c->residual_scale, err) ||
            read_float(m, "attention.scale", false, c->attention_scale, &c->attention_scale, err) ||
            read_float(m, "logit_scale", false, 1.0f, &c->logit_scale, err))
            return -1;
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------------- */

static const gguf_tensor *find(const woolly_model *m, const char *name, bool required, woolly_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t && required)
        woolly_fail(err, "%s: tensor '%s' is missing (required by the %s architecture)", m->label, name,
                    m->arch_name);
    return t;
}

static int check_shape(const woolly_model *m, const gguf_tensor *t, int64_t cols, int64_t rows,
                       woolly_error *err)
{
    if ((int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return woolly_fail(err,
                           "%s: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%lld, %lld] "
                           "(ne[0] = row length)",
                           m->label, t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                           (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)cols,
                           (long long)rows);
    return 0;
}

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *i = woolly_type_get(t);
    return i ? i->name : "?";
}

/* A matrix the forward pass multiplies by: right shape, and kernels for decode and prompt batches. */
static int bind_matrix(const woolly_model *m, const char *name, int64_t rows, int64_t cols,
                       woolly_matrix *out, woolly_error *err)
{
    const gguf_tensor *t = find(m, name, true, err);
    if (!t || check_shape(m, t, cols, rows, err))
        return -1;
    if (!woolly_kernel_choose(WOOLLY_OP_GEMV, t->type, WOOLLY_ACT_F32, NULL) ||
        !woolly_kernel_choose(WOOLLY_OP_GEMM, t->type, WOOLLY_ACT_F32, NULL))
        return woolly_fail(err, "%s: tensor '%s' has type %s, which has no matrix kernel", m->label, name,
                           type_name(t->type));
    const size_t rb = woolly_row_bytes(t->type, cols);
    if (!rb || rb * (size_t)rows != t->nbytes)
        return woolly_fail(err, "%s: tensor '%s': %lld columns of %s do not fill its %llu bytes", m->label,
                           name, (long long)cols, type_name(t->type), (unsigned long long)t->nbytes);
    *out = woolly_matrix_rows(t->data, t->type, rows, cols, t->name);
    return 0;
}

/* A vector of n floats, in `spare`: an F32 one copied with pread, another type converted. Not used in
 * place: a fault on the mapping maps the file's cached pages around the vector too, and the norms' 84
 * faults of a granite-8b run left 50-90 MiB of its file resident besides the repacked weights. */
static int bind_vector(const woolly_model *m, const char *name, int64_t n, float *spare, const float **out,
                       woolly_error *err)
{
    const gguf_tensor *t = find(m, name, true, err);
    if (!t)
        return -1;
    if ((int64_t)t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return woolly_fail(err, "%s: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%lld]",
                           m->label, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                           (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)n);
    if (t->type == WOOLLY_TYPE_F32) {
        if (gguf_read(m->file, t->data, sizeof(float) * (size_t)n, spare, err))
            return -1;
        *out = spare;
        return 0;
    }
    if (!woolly_can_dequantize(t->type) || woolly_dequantize_row(t->type, t->data, spare, n))
        return woolly_fail(err, "%s: tensor '%s' has type %s; a norm vector must be F32, F16 or BF16",
                           m->label, name, type_name(t->type));
    *out = spare;
    return 0;
}

/* Tensor names this architecture reads; anything else in the file would be silently ignored, which
 * could hide a model variant we compute wrongly (biases, extra norms), so it is an error. */
static bool known_tensor(const char *name)
{
    static const char *const GLOBAL[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                                         "rope_freqs.weight"};
    static const char *const BLOCK[] = {"attn_norm.weight", "attn_q.weight",      "attn_k.weight",
                                        "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
                                        "ffn_gate.weight",  "ffn_up.weight",      "ffn_down.weight"};
    for (size_t i = 0; i < sizeof GLOBAL / sizeof GLOBAL[0]; i++)
        if (!strcmp(name, GLOBAL[i]))
            return true;
    if (strncmp(name, "blk.", 4))
        return false;
    const char *p = name + 4;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != '.')
        return false;
    for (size_t i = 0; i < sizeof BLOCK / sizeof BLOCK[0]; i++)
        if (!strcmp(p, BLOCK[i]))
            return true;
    return false;
}

static int bind_weights(woolly_model *m, woolly_error *err)
{
    woolly_config *c = &m->cfg;
    woolly_weights *w = &m->w;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        if (!known_tensor(t->name))
            return woolly_fail(err,
                               "%s: tensor '%s' is not part of the %s architecture as supported (a bias or "
                               "a variant this engine does not compute)",
                               m->label, t->name, m->arch_name);
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        m->n_bytes += t->nbytes;
    }

    /* token_embd: [n_vocab][n_embd], any type we can dequantize a row of. */
    const gguf_tensor *te = find(m, "token_embd.weight", true, err);
    if (!te)
        return -1;
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX || te->ne[2] != 1 || te->ne[3] != 1)
        return woolly_fail(err,
                           "%s: tensor 'token_embd.weight' has %llu rows (vocabulary size), expected 1..%d",
                           m->label, (unsigned long long)te->ne[1], INT32_MAX);
    c->n_vocab = (int32_t)te->ne[1];
    int32_t vocab_key;
    if (read_int(m, "vocab_size", c->n_vocab, 1, INT32_MAX, &vocab_key, err))
        return -1;
    if (vocab_key != c->n_vocab)
        return woolly_fail(err, "%s: '%s' = %d but token_embd.weight has %d rows", m->label,
                           arch_key(m, "vocab_size"), vocab_key, c->n_vocab);
    if (check_shape(m, te, c->n_embd, c->n_vocab, err))
        return -1;
    if (!woolly_can_dequantize(te->type))
        return woolly_fail(err, "%s: tensor 'token_embd.weight' has type %s, which cannot be dequantized",
                           m->label, type_name(te->type));
    w->token_embd = woolly_matrix_rows(te->data, te->type, c->n_vocab, c->n_embd, te->name);

    const size_t n_vectors = 2 * (size_t)c->n_layer + 1;
    m->owned = malloc(sizeof(float) * (size_t)c->n_embd * n_vectors);
    w->layers = calloc((size_t)c->n_layer, sizeof *w->layers);
    if (!m->owned || !w->layers)
        return woolly_fail(err, "%s: out of memory for %d layers", m->label, c->n_layer);

    const int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    char name[96];
#define BLK(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
    for (int l = 0; l < c->n_layer; l++) {
        woolly_layer *L = &w->layers[l];
        float *spare = m->owned + (size_t)c->n_embd * 2 * (size_t)l;
        if (bind_vector(m, BLK("attn_norm.weight"), c->n_embd, spare, &L->attn_norm, err) ||
            bind_matrix(m, BLK("attn_q.weight"), q_dim, c->n_embd, &L->wq, err) ||
            bind_matrix(m, BLK("attn_k.weight"), kv_dim, c->n_embd, &L->wk, err) ||
            bind_matrix(m, BLK("attn_v.weight"), kv_dim, c->n_embd, &L->wv, err) ||
            bind_matrix(m, BLK("attn_output.weight"), c->n_embd, q_dim, &L->wo, err) ||
            bind_vector(m, BLK("ffn_norm.weight"), c->n_embd, spare + c->n_embd, &L->ffn_norm, err) ||
            bind_matrix(m, BLK("ffn_gate.weight"), c->n_ff, c->n_embd, &L->w_gate, err) ||
            bind_matrix(m, BLK("ffn_up.weight"), c->n_ff, c->n_embd, &L->w_up, err) ||
            bind_matrix(m, BLK("ffn_down.weight"), c->n_embd, c->n_ff, &L->w_down, err))
            return -1;
    }
#undef BLK
    /* A block index beyond block_count would be ignored: reject it (known_tensor checked the form). */
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const char *tn = m->file->tensors[i].name;
        if (!strncmp(tn, "blk.", 4) && strtol(tn + 4, NULL, 10) >= c->n_layer)
            return woolly_fail(err, "%s: tensor '%s' belongs to a block beyond block_count %d", m->label, tn,
                               c->n_layer);
    }

    float *spare = m->owned + (size_t)c->n_embd * 2 * (size_t)c->n_layer;
    if (bind_vector(m, "output_norm.weight", c->n_embd, spare, &w->output_norm, err))
        return -1;
    if (find(m, "output.weight", false, err)) {
        if (bind_matrix(m, "output.weight", c->n_vocab, c->n_embd, &w->output, err))
            return -1;
    } else {
        woolly_error why = {{0}};
        if (bind_matrix(m, "token_embd.weight", c->n_vocab, c->n_embd, &w->output, &why))
            return woolly_fail(
                err, "no 'output.weight', and the tied token embedding cannot be the output matrix: %s",
                why.msg);
    }

    const gguf_tensor *rf = find(m, "rope_freqs.weight", false, err);
    if (rf) {
        if (rf->type != WOOLLY_TYPE_F32 || (int64_t)rf->ne[0] != c->n_rot / 2 || rf->ne[1] != 1)
            return woolly_fail(err, "%s: tensor 'rope_freqs.weight' must be F32 of %d elements (n_rot / 2)",
                               m->label, c->n_rot / 2);
        w->rope_freqs = rf->data;
    }
    return 0;
}

/* ---- open / close -------------------------------------------------------------------------------- */

/* `path`: the file's absolute path (NULL for a buffer), for the repack cache. */
static woolly_model *open_model(gguf_file *g, const char *display_name, const char *path, woolly_error *err)
{
    woolly_model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        woolly_fail(err, "out of memory");
        return NULL;
    }
    m->file = g;
    snprintf(m->label, sizeof m->label, "%s", display_name ? display_name : "model");
    if (path && !(m->path = strdup(path))) {
        woolly_model_close(m);
        woolly_fail(err, "out of memory");
        return NULL;
    }
    gguf_str name;
    if (gguf_get_str(g, "general.name", &name, NULL) && name.len > 0)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len > 120 ? 120 : name.len), name.ptr);
    else
        snprintf(m->name, sizeof m->name, "%s", m->label);
    if (woolly_isa_init(err) || read_config(m, err) || bind_weights(m, err)) {
        woolly_model_close(m);
        return NULL;
    }
    /* The layouts come from the tuning profile, so it is read before anything is repacked. */
    m->profile = woolly_profile_load_for_run();
    if (woolly_model_pick_layouts(m, err) || woolly_model_repack(m, err)) {
        woolly_model_close(m);
        return NULL;
    }

    gguf_str tmpl;
    if (gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL)) {
        m->chat_template = malloc(tmpl.len + 1);
        if (!m->chat_template) {
            woolly_model_close(m);
            woolly_fail(err, "out of memory");
            return NULL;
        }
        memcpy(m->chat_template, tmpl.ptr, tmpl.len);
        m->chat_template[tmpl.len] = 0;
    }
    /* A model whose vocabulary we cannot read still evaluates token ids (woolly logits); the tokenizer's
     * error is reported when text is needed. */
    m->tok = woolly_tokenizer_open(g, &m->tok_err);
    return m;
}

woolly_model *woolly_model_load(const char *path, woolly_error *err)
{
    gguf_file *g = gguf_open(path, err);
    if (!g)
        return NULL;
    const char *base = strrchr(path, '/');
    char *abs = realpath(path, NULL); /* NULL only if the file went away since it was opened */
    woolly_model *m = open_model(g, base ? base + 1 : path, abs, err);
    free(abs);
    return m;
}

woolly_model *woolly_model_from_gguf(gguf_file *g, const char *display_name, woolly_error *err)
{
    return open_model(g, display_name, NULL, err);
}

void woolly_model_close(woolly_model *m)
{
    if (!m)
        return;
    woolly_tokenizer_close(m->tok);
    free(m->chat_template);
    free(m->w.layers);
    free(m->owned);
    free(m->mats);
    free(m->path);
    woolly_model_release_repacked(m);
    woolly_profile_free(m->profile);
    gguf_close(m->file);
    free(m);
}
