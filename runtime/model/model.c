#include "model.h"
#include "grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "kernels.h"
#include "quant.h"
#include "registry.h"

/* ---- tensors ------------------------------------------------------------------------------------- */

static const gguf_tensor *find(const woolly_model *m, const char *name, bool required, woolly_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t && required)
        woolly_fail(err, "%s: tensor '%s' is missing (required by the %s architecture)", m->label, name,
                    m->arch_name);
    return t;
}

static const char *type_name(enum woolly_type t)
{
    const woolly_type_info *i = woolly_type_get(t);
    return i ? i->name : "?";
}

/* A matrix the forward pass multiplies by (EXPERTS: n of them, one after the other), bound from the
 * file's tensor gt: the shape t gives, and kernels for decode and prompt batches. */
static int bind_matrix(const woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt,
                       woolly_matrix *out, woolly_error *err)
{
    const woolly_config *c = &m->cfg;
    const int64_t cols = woolly_dim_value(&t->ne[0], c);
    int64_t rows = woolly_arch_rows(t, c);
    if (t->kind == WOOLLY_TENSOR_EXPERTS)
        rows *= woolly_dim_value(&t->ne[2], c);
    if (woolly_arch_check_shape(t, c, gt, m->label, err))
        return -1;
    if (!woolly_kernel_choose(WOOLLY_OP_GEMV, gt->type, WOOLLY_ACT_F32, NULL) ||
        !woolly_kernel_choose(WOOLLY_OP_GEMM, gt->type, WOOLLY_ACT_F32, NULL))
        return woolly_fail(err, "%s: tensor '%s' has type %s, which has no matrix kernel", m->label, gt->name,
                           type_name(gt->type));
    const size_t rb = woolly_row_bytes(gt->type, cols);
    if (!rb || rb * (size_t)rows != gt->nbytes)
        return woolly_fail(err, "%s: tensor '%s': %lld columns of %s do not fill its %llu bytes", m->label,
                           gt->name, (long long)cols, type_name(gt->type), (unsigned long long)gt->nbytes);
    *out = woolly_matrix_rows(gt->data, gt->type, rows, cols, gt->name);
    return 0;
}

/* A vector of floats, in `spare`: an F32 one copied with pread, another type converted. Not used in
 * place: a fault on the mapping maps the file's cached pages around the vector too, and the norms' 84
 * faults of a granite-8b run left 50-90 MiB of its file resident besides the repacked weights. */
static int bind_vector(const woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt,
                       float *spare, const float **out, woolly_error *err)
{
    const int64_t n = woolly_dim_value(&t->ne[0], &m->cfg);
    if (woolly_arch_check_shape(t, &m->cfg, gt, m->label, err))
        return -1;
    if (gt->type == WOOLLY_TYPE_F32) {
        if (gguf_read(m->file, gt->data, sizeof(float) * (size_t)n, spare, err))
            return -1;
        *out = spare;
        return 0;
    }
    if (!woolly_can_dequantize(gt->type) || woolly_dequantize_row(gt->type, gt->data, spare, n))
        return woolly_fail(err, "%s: tensor '%s' has type %s; a norm vector must be F32, F16 or BF16",
                           m->label, gt->name, type_name(gt->type));
    *out = spare;
    return 0;
}

/* F32 values read in place (RoPE's frequency divisors, read once when a context is made). */
static int bind_f32_vector(const woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt,
                           const float **out, woolly_error *err)
{
    const int64_t n = woolly_dim_value(&t->ne[0], &m->cfg);
    if (gt->type != WOOLLY_TYPE_F32 || (int64_t)gt->ne[0] != n || gt->ne[1] != 1 || gt->ne[2] != 1 ||
        gt->ne[3] != 1) {
        char what[64];
        return woolly_fail(err, "%s: tensor '%s' must be F32 of %lld elements (%s)", m->label, gt->name,
                           (long long)n, woolly_dim_text(&t->ne[0], what, sizeof what));
    }
    *out = gt->data;
    return 0;
}

/* A fused matrix bound as its parts (arch.h): each a view of its rows, the file's bytes from the row
 * after the previous part's. */
static int bind_parts(woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt, int layer,
                      woolly_error *err)
{
    woolly_matrix whole;
    if (bind_matrix(m, t, gt, &whole, err))
        return -1;
    const size_t rb = woolly_row_bytes(whole.type, whole.cols);
    int64_t row0 = 0;
    for (int j = 0; j < t->n_parts; j++) {
        const int64_t rows = woolly_dim_value(&t->parts[j].rows, &m->cfg);
        *woolly_arch_matrix(&m->w, t, layer, j) = woolly_matrix_rows(
            (const char *)whole.data + (size_t)row0 * rb, whole.type, rows, whole.cols, gt->name);
        row0 += rows;
    }
    if (row0 != whole.rows) /* the table's parts do not add up: a table's error, caught by its tests */
        return woolly_fail(err, "%s: tensor '%s': its parts hold %lld of its %lld rows", m->label, gt->name,
                           (long long)row0, (long long)whole.rows);
    return 0;
}

/* A mixture of experts' 3-D tensor: bound whole (its shape and type checked as a matrix of n_expert *
 * rows rows), then each expert as a view of its rows in *experts, which moves past them. */
static int bind_experts(woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt,
                        woolly_experts *out, woolly_matrix **experts, woolly_error *err)
{
    if (bind_matrix(m, t, gt, &out->all, err))
        return -1;
    const int64_t n = woolly_dim_value(&t->ne[2], &m->cfg), rows = out->all.rows / n;
    const size_t rb = woolly_row_bytes(out->all.type, out->all.cols);
    out->each = *experts;
    for (int64_t e = 0; e < n; e++)
        out->each[e] = woolly_matrix_rows((const char *)out->all.data + (size_t)(e * rows) * rb, out->all.type,
                                          rows, out->all.cols, gt->name);
    *experts += n;
    return 0;
}

/* The token embedding: its rows are the vocabulary (the key vocab_size, if present, must agree), read
 * one at a time, so any type we can dequantize a row of. */
static int bind_embedding(woolly_model *m, const woolly_arch_tensor *t, const gguf_tensor *gt,
                          woolly_matrix *out, woolly_error *err)
{
    woolly_config *c = &m->cfg;
    if (gt->ne[1] < 1 || gt->ne[1] > INT32_MAX || gt->ne[2] != 1 || gt->ne[3] != 1)
        return woolly_fail(err, "%s: tensor '%s' has %llu rows (vocabulary size), expected 1..%d", m->label,
                           gt->name, (unsigned long long)gt->ne[1], INT32_MAX);
    c->n_vocab = (int32_t)gt->ne[1];
    int32_t vocab_key;
    if (woolly_arch_read_int(m->file, m->label, c->arch, "vocab_size", c->n_vocab, 1, INT32_MAX, &vocab_key,
                             err))
        return -1;
    if (vocab_key != c->n_vocab)
        return woolly_fail(err, "%s: '%s.vocab_size' = %d but %s has %d rows", m->label, m->arch_name,
                           vocab_key, gt->name, c->n_vocab);
    if (woolly_arch_check_shape(t, c, gt, m->label, err))
        return -1;
    if (!woolly_can_dequantize(gt->type))
        return woolly_fail(err, "%s: tensor '%s' has type %s, which cannot be dequantized", m->label,
                           gt->name, type_name(gt->type));
    *out = woolly_matrix_rows(gt->data, gt->type, woolly_dim_value(&t->ne[1], c),
                              woolly_dim_value(&t->ne[0], c), gt->name);
    return 0;
}

/* Binds tensor t of block `layer` (-1: a global one) into its slot; a vector's floats go to *spare,
 * which moves past them. An absent optional tensor leaves its slot empty, or binds the tensor it is
 * tied to in its place. */
static int bind_tensor(woolly_model *m, const woolly_arch_tensor *t, int layer, float **spare,
                       woolly_matrix **experts, woolly_error *err)
{
    char name[96];
    woolly_arch_tensor_name(t, layer, name, sizeof name);
    void *slot = woolly_arch_slot(&m->w, t, layer);
    const gguf_tensor *gt = find(m, name, !t->optional, err);
    if (!gt && !t->optional)
        return -1;
    if (!gt && t->tied) {
        woolly_error why = {{0}};
        const gguf_tensor *tied = find(m, t->tied, true, &why);
        if (!tied || bind_matrix(m, t, tied, slot, &why))
            return woolly_fail(err, "no '%s', and the tied token embedding cannot be the output matrix: %s",
                               name, why.msg);
        return 0;
    }
    if (!gt)
        return 0;
    switch (t->kind) {
    case WOOLLY_TENSOR_VECTOR: {
        const int rc = bind_vector(m, t, gt, *spare, slot, err);
        *spare += woolly_dim_value(&t->ne[0], &m->cfg);
        return rc;
    }
    case WOOLLY_TENSOR_F32_VECTOR:
        return bind_f32_vector(m, t, gt, slot, err);
    case WOOLLY_TENSOR_EMBEDDING:
        return bind_embedding(m, t, gt, slot, err);
    case WOOLLY_TENSOR_MATRIX:
        return t->n_parts ? bind_parts(m, t, gt, layer, err) : bind_matrix(m, t, gt, slot, err);
    case WOOLLY_TENSOR_EXPERTS:
        return bind_experts(m, t, gt, slot, experts, err);
    }
    return woolly_fail(err, "%s: tensor '%s' is of an unknown kind", m->label, name);
}

static int bind_weights(woolly_model *m, woolly_error *err)
{
    const woolly_config *c = &m->cfg;
    const woolly_arch *a = c->arch;
    /* A tensor the architecture does not read would be silently ignored, which could hide a model
     * variant we compute wrongly (biases, extra norms), so it is an error; so is a block index beyond
     * block_count. */
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        int layer;
        const woolly_arch_tensor *at = woolly_arch_match(a, t->name, &layer);
        if (!at)
            return woolly_fail(err,
                               "%s: tensor '%s' is not part of the %s architecture as supported (a bias or "
                               "a variant this engine does not compute)",
                               m->label, t->name, m->arch_name);
        if (!woolly_arch_tensor_applies(at, c))
            return woolly_fail(err, "%s: tensor '%s' is not part of a %s model with '%s.expert_count' = %d (%s)",
                               m->label, t->name, m->arch_name, m->arch_name, c->n_expert,
                               at->when == WOOLLY_WHEN_EXPERTS ? "experts need expert_count > 0"
                                                               : "the experts replace the dense FFN");
        if (layer >= c->n_layer)
            return woolly_fail(err, "%s: tensor '%s' belongs to a block beyond block_count %d", m->label,
                               t->name, c->n_layer);
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        m->n_bytes += t->nbytes;
    }

    /* The embedding first: its rows are n_vocab, which other shapes use. */
    const int n_tensors = woolly_arch_n_tensors(a);
    float *none = NULL;
    for (int i = 0; i < n_tensors; i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        if (t->kind == WOOLLY_TENSOR_EMBEDDING && bind_tensor(m, t, -1, &none, NULL, err))
            return -1;
    }

    size_t n_floats = 0, n_experts = 0; /* of the vectors, converted or copied; of the experts' views */
    for (int i = 0; i < n_tensors; i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        const size_t copies = t->per_block ? (size_t)c->n_layer : 1;
        if (!woolly_arch_tensor_applies(t, c))
            continue;
        if (t->kind == WOOLLY_TENSOR_VECTOR)
            n_floats += (size_t)woolly_dim_value(&t->ne[0], c) * copies;
        if (t->kind == WOOLLY_TENSOR_EXPERTS)
            n_experts += (size_t)woolly_dim_value(&t->ne[2], c) * copies;
    }
    m->owned = malloc(sizeof(float) * (n_floats ? n_floats : 1));
    m->w.layers = calloc((size_t)c->n_layer, sizeof *m->w.layers);
    m->expert_mats = calloc(n_experts ? n_experts : 1, sizeof *m->expert_mats);
    if (!m->owned || !m->w.layers || !m->expert_mats)
        return woolly_fail(err, "%s: out of memory for %d layers", m->label, c->n_layer);

    float *spare = m->owned;
    woolly_matrix *experts = m->expert_mats;
    for (int i = 0; i < n_tensors; i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        if (!t->per_block && t->kind != WOOLLY_TENSOR_EMBEDDING && woolly_arch_tensor_applies(t, c) &&
            bind_tensor(m, t, -1, &spare, &experts, err))
            return -1;
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < n_tensors; i++) {
            const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
            if (t->per_block && woolly_arch_tensor_applies(t, c) && bind_tensor(m, t, l, &spare, &experts, err))
                return -1;
        }
    return 0;
}

/* Reads the hyperparameters and checks that the forward pass runs the architecture's steps. */
static int read_config(woolly_model *m, woolly_error *err)
{
    if (woolly_arch_read_config(m->file, m->label, &m->cfg, err))
        return -1;
    snprintf(m->arch_name, sizeof m->arch_name, "%s", m->cfg.arch->name);
    char why[160];
    if (!woolly_forward_runs(m->cfg.arch, why, sizeof why))
        return woolly_fail(err, "%s: the %s architecture needs %s, which this engine does not run yet",
                           m->label, m->arch_name, why);
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
    woolly_vocab_trie_free(m->vocab_trie);
    free(m->chat_template);
    free(m->w.layers);
    free(m->owned);
    free(m->expert_mats);
    free(m->mats);
    free(m->path);
    woolly_model_release_repacked(m);
    woolly_profile_free(m->profile);
    gguf_close(m->file);
    free(m);
}
