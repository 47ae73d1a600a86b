/* The matrix shapes a model needs, from its GGUF tensor table or from a synth preset. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "synth.h"
#include "tune.h"

/* The batch-size classes a tensor runs with, by its name: a layer's matrices see every batch; the
 * output matrix one token (a prompt's logits are the last token's) or a small batch (a server's step
 * asks for the logits of each sequence it decodes); other tensors none. */
static bool tensor_classes(const char *name, bool has_output, bool classes[WOOLLY_TOKENS_CLASSES])
{
    static const char *const LAYER[] = {"attn_q.weight",      "attn_k.weight",   "attn_v.weight",
                                        "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                        "ffn_down.weight"};
    memset(classes, 0, sizeof(bool) * WOOLLY_TOKENS_CLASSES);
    if (!strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight"))) {
        classes[WOOLLY_TOKENS_1] = classes[WOOLLY_TOKENS_SMALL] = true;
        return true;
    }
    if (strncmp(name, "blk.", 4))
        return false;
    const char *dot = strchr(name + 4, '.');
    for (size_t i = 0; dot && i < sizeof LAYER / sizeof LAYER[0]; i++)
        if (!strcmp(dot + 1, LAYER[i])) {
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                classes[c] = true;
            return true;
        }
    return false;
}

static int add_tensor(woolly_tune_model *m, const char *name, enum woolly_type type, int64_t rows,
                      int64_t cols, bool has_output, woolly_error *err)
{
    bool classes[WOOLLY_TOKENS_CLASSES];
    if (!tensor_classes(name, has_output, classes))
        return 0;
    const size_t rb = woolly_row_bytes(type, cols);
    if (!rb || rows < 1)
        return woolly_fail(err, "tensor '%s': %lld columns of its type do not make whole rows", name,
                           (long long)cols);
    m->matrix_bytes += (double)rb * (double)rows;
    for (int i = 0; i < m->n_shapes; i++) {
        woolly_tune_shape *s = &m->shapes[i];
        if (s->type == type && s->rows == rows && s->cols == cols) {
            s->n_tensors++;
            for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                s->classes[c] |= classes[c];
            return 0;
        }
    }
    woolly_tune_shape *more = realloc(m->shapes, sizeof *more * (size_t)(m->n_shapes + 1));
    if (!more)
        return woolly_fail(err, "out of memory");
    m->shapes = more;
    woolly_tune_shape *s = &m->shapes[m->n_shapes++];
    *s = (woolly_tune_shape){.type = type, .rows = rows, .cols = cols, .n_tensors = 1};
    memcpy(s->classes, classes, sizeof classes);
    snprintf(s->example, sizeof s->example, "%s", name);
    return 0;
}

/* The attention's dimensions from the hyperparameters ("ARCH.attention.head_count", ...); a model that
 * lacks them gets none (its attention is not tuned), one whose values are of the wrong type is an error. */
static int attn_dims_from_gguf(const gguf_file *g, woolly_tune_model *m, woolly_error *err)
{
    gguf_str arch;
    woolly_error e = {{0}};
    if (!gguf_get_str(g, "general.architecture", &arch, &e))
        return e.msg[0] ? woolly_fail(err, "%s", e.msg) : 0;
    static const char *const KEYS[] = {
        "block_count",          "attention.head_count", "attention.head_count_kv",
        "attention.key_length", "context_length",       "embedding_length"};
    uint32_t v[6] = {0};
    for (int i = 0; i < 6; i++) {
        char key[160];
        snprintf(key, sizeof key, "%.*s.%s", (int)(arch.len < 64 ? arch.len : 64), arch.ptr, KEYS[i]);
        if (!gguf_get_u32(g, key, &v[i], &e) && e.msg[0])
            return woolly_fail(err, "%s", e.msg);
    }
    if (!v[2])
        v[2] = v[1];
    if (!v[3] && v[1])
        v[3] = v[5] / v[1];
    if (!v[0] || !v[1] || !v[2] || !v[3] || !v[4] || v[1] % v[2] || v[3] > WOOLLY_MAX_HEAD_DIM ||
        v[0] > 100000 || v[1] > 100000 || v[4] > (1u << 30))
        return 0; /* not a model the runtime runs: its attention is not tuned */
    m->n_layer = (int32_t)v[0], m->n_head = (int32_t)v[1], m->n_head_kv = (int32_t)v[2];
    m->head_dim = (int32_t)v[3], m->n_ctx = (int32_t)v[4];
    return 0;
}

int woolly_tune_model_from_gguf(const char *path, woolly_tune_model *m, woolly_error *err)
{
    memset(m, 0, sizeof *m);
    gguf_file *g = gguf_open(path, err);
    if (!g)
        return -1;
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    const bool has_output = gguf_find_tensor(g, "output.weight") != NULL;
    int rc = attn_dims_from_gguf(g, m, err);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->n_dims == 2 || (t->n_dims > 2 && t->ne[2] == 1 && t->ne[3] == 1))
            rc = add_tensor(m, t->name, t->type, (int64_t)t->ne[1], (int64_t)t->ne[0], has_output, err);
    }
    gguf_close(g);
    if (!rc && m->n_shapes == 0)
        rc = woolly_fail(err, "%s: no matrices of a llama or granite model (blk.N.attn_q.weight, ...)", path);
    if (rc)
        woolly_tune_model_free(m);
    return rc;
}

int woolly_tune_model_from_preset(const char *preset, woolly_tune_model *m, woolly_error *err)
{
    memset(m, 0, sizeof *m);
    woolly_synth_config c;
    if (woolly_synth_preset(preset, &c, err))
        return -1;
    snprintf(m->name, sizeof m->name, "preset %s", preset);
    m->n_layer = (int32_t)c.n_layer, m->n_head = (int32_t)c.n_head, m->n_head_kv = (int32_t)c.n_head_kv;
    m->head_dim = (int32_t)(c.n_embd / c.n_head), m->n_ctx = (int32_t)c.n_ctx;
    const size_t n = woolly_synth_tensor_table(&c, NULL, 0);
    woolly_synth_tensor *t = calloc(n ? n : 1, sizeof *t);
    if (!t || woolly_synth_tensor_table(&c, t, n) != n) {
        free(t);
        return woolly_fail(err, "out of memory");
    }
    bool has_output = false;
    for (size_t i = 0; i < n; i++)
        has_output |= !strcmp(t[i].name, "output.weight");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (t[i].n_dims == 2)
            rc = add_tensor(m, t[i].name, t[i].type, (int64_t)t[i].ne[1], (int64_t)t[i].ne[0], has_output,
                            err);
    free(t);
    if (rc)
        woolly_tune_model_free(m);
    return rc;
}

void woolly_tune_model_free(woolly_tune_model *m)
{
    free(m->shapes);
    memset(m, 0, sizeof *m);
}
