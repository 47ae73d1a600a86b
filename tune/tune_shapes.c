/* The matrix shapes a model needs, from its GGUF tensor table or from a synth preset. */
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "synth.h"
#include "tune.h"

/* The tensors of a model file (g) or of a preset (syn, n_syn), for has_tensor. */
typedef struct file_tensors {
    const gguf_file *g;
    const woolly_synth_tensor *syn;
    size_t n_syn;
} file_tensors;

static bool has_tensor(const file_tensors *f, const char *name)
{
    if (f->g)
        return gguf_find_tensor(f->g, name) != NULL;
    for (size_t i = 0; i < f->n_syn; i++)
        if (!strcmp(f->syn[i].name, name))
            return true;
    return false;
}

/* The classes of the absent matrices of architecture a that `name` stands in for (tied). */
static unsigned tied_classes(const woolly_arch *a, const file_tensors *f, const char *name)
{
    unsigned bits = 0;
    for (int i = 0; i < woolly_arch_n_tensors(a); i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        if (t->tied && !strcmp(t->tied, name) && !has_tensor(f, t->name))
            bits |= t->classes;
    }
    return bits;
}

/* The batch-size classes a tensor runs with, from its architecture's table: a matrix's own, and those
 * of the matrix it stands in for when tied (the token embedding as the output); none for other
 * tensors. A file of an architecture the runtime does not know (a NULL) is read with every table. */
static bool tensor_classes(const woolly_arch *a, const file_tensors *f, const char *name,
                           bool classes[WOOLLY_TOKENS_CLASSES])
{
    unsigned bits = 0;
    for (int i = 0; i < (a ? 1 : woolly_arch_count()); i++) {
        const woolly_arch *b = a ? a : woolly_arch_get(i);
        int layer;
        const woolly_arch_tensor *t = woolly_arch_match(b, name, &layer);
        if (t)
            bits |= (t->kind == WOOLLY_TENSOR_MATRIX || t->kind == WOOLLY_TENSOR_EXPERTS ? t->classes : 0) |
                    tied_classes(b, f, name);
    }
    for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
        classes[c] = bits & WOOLLY_CLASS_BIT(c);
    return bits != 0;
}

/* `copies`: how many matrices of the shape the tensor holds (a mixture of experts' 3-D tensor: one per
 * expert, each repacked and multiplied as a matrix of its own). */
static int add_shape(woolly_tune_model *m, const woolly_arch *a, const file_tensors *f, const char *name,
                     enum woolly_type type, int64_t rows, int64_t cols, int64_t copies, woolly_error *err)
{
    bool classes[WOOLLY_TOKENS_CLASSES];
    if (!tensor_classes(a, f, name, classes))
        return 0;
    const size_t rb = woolly_row_bytes(type, cols);
    if (!rb || rows < 1)
        return woolly_fail(err, "tensor '%s': %lld columns of its type do not make whole rows", name,
                           (long long)cols);
    m->matrix_bytes += (double)rb * (double)rows * (double)copies;
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

/* A file's matrix: one shape, or, for a fused tensor of a (c its hyperparameters), one per part, the
 * matrices the runtime binds and multiplies by (arch.h). */
static int add_tensor(woolly_tune_model *m, const woolly_arch *a, const woolly_config *c,
                      const file_tensors *f, const char *name, enum woolly_type type, int64_t rows,
                      int64_t cols, woolly_error *err)
{
    int layer;
    const woolly_arch_tensor *t = a ? woolly_arch_match(a, name, &layer) : NULL;
    if (!t || t->kind != WOOLLY_TENSOR_MATRIX || !t->n_parts || woolly_arch_rows(t, c) != rows)
        return add_shape(m, a, f, name, type, rows, cols, 1, err);
    for (int j = 0; j < t->n_parts; j++)
        if (add_shape(m, a, f, name, type, woolly_dim_value(&t->parts[j].rows, c), cols, 1, err))
            return -1;
    return 0;
}

/* The model's architecture and its attention's dimensions, from the hyperparameters as the runtime
 * reads them (a model of an architecture it runs whose hyperparameters it refuses is an error). A file
 * of another architecture has none (its matrices are found by name in every table), and its attention
 * is tuned if its keys read as the plain decoder's (llama's) under its own name. */
static int read_arch(const gguf_file *g, const char *path, woolly_tune_model *m, const woolly_arch **a,
                     woolly_config *cfg, woolly_error *err)
{
    gguf_str name;
    woolly_error e = {{0}};
    *a = NULL;
    if (!gguf_get_str(g, "general.architecture", &name, &e))
        return e.msg[0] ? woolly_fail(err, "%s", e.msg) : 0;
    woolly_config c;
    if ((*a = woolly_arch_find(name))) {
        if (woolly_arch_read_config(g, path, &c, err))
            return -1;
        *cfg = c;
    } else {
        char as_name[64];
        woolly_arch plain = *woolly_arch_find((gguf_str){.ptr = "llama", .len = 5});
        snprintf(as_name, sizeof as_name, "%.*s", (int)(name.len < 63 ? name.len : 63), name.ptr);
        plain.name = as_name;
        if (woolly_arch_read_keys(g, path, &plain, &c, &e))
            return 0; /* not a model that reads as a decoder: its attention is not tuned */
    }
    m->n_layer = c.n_layer, m->n_head = c.n_head, m->n_head_kv = c.n_head_kv;
    m->head_dim = c.head_dim, m->n_ctx = c.n_ctx_train;
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
    const file_tensors f = {.g = g};
    const woolly_arch *a;
    woolly_config c = {0};
    int rc = read_arch(g, path, m, &a, &c, err);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->n_dims == 2 || (t->n_dims > 2 && t->ne[2] == 1 && t->ne[3] == 1))
            rc = add_tensor(m, a, &c, &f, t->name, t->type, (int64_t)t->ne[1], (int64_t)t->ne[0], err);
        else if (t->n_dims == 3 && t->ne[3] == 1) /* experts: each one's matrix (classes: the table's) */
            rc = add_shape(m, a, &f, t->name, t->type, (int64_t)t->ne[1], (int64_t)t->ne[0], (int64_t)t->ne[2],
                           err);
    }
    gguf_close(g);
    if (!rc && m->n_shapes == 0)
        rc = woolly_fail(err, "%s: no matrices of a %s model (blk.N.attn_q.weight, ...)", path,
                         woolly_arch_names(" or "));
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
    m->head_dim = (int32_t)woolly_synth_head_dim(&c), m->n_ctx = (int32_t)c.n_ctx;
    const size_t n = woolly_synth_tensor_table(&c, NULL, 0);
    woolly_synth_tensor *t = calloc(n ? n : 1, sizeof *t);
    if (!t || woolly_synth_tensor_table(&c, t, n) != n) {
        free(t);
        return woolly_fail(err, "out of memory");
    }
    const file_tensors f = {.syn = t, .n_syn = n};
    const woolly_arch *a = woolly_arch_find((gguf_str){.ptr = c.arch, .len = strlen(c.arch)});
    const woolly_config hp = {.arch = a,
                              .n_embd = (int32_t)c.n_embd,
                              .n_layer = (int32_t)c.n_layer,
                              .n_head = (int32_t)c.n_head,
                              .n_head_kv = (int32_t)c.n_head_kv,
                              .head_dim = m->head_dim,
                              .n_ff = (int32_t)c.n_ff};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (t[i].n_dims == 2)
            rc = add_tensor(m, a, &hp, &f, t[i].name, t[i].type, (int64_t)t[i].ne[1], (int64_t)t[i].ne[0],
                            err);
        else if (t[i].n_dims == 3) /* experts, as woolly_tune_model_from_gguf takes them */
            rc = add_shape(m, a, &f, t[i].name, t[i].type, (int64_t)t[i].ne[1], (int64_t)t[i].ne[0],
                           (int64_t)t[i].ne[2], err);
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
