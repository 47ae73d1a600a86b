/* The architecture tables' registry and the code that reads them: recognition, names, sizes, shape
 * checks and the hyperparameters (arch.h). */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

/* Every architecture the runtime runs; a new one is its table file (arch/<name>.c) and a line here. */
extern const woolly_arch woolly_arch_llama, woolly_arch_granite, woolly_arch_qwen2, woolly_arch_qwen3,
    woolly_arch_phi3, woolly_arch_gemma3, woolly_arch_qwen3moe, woolly_arch_granitemoe;
static const woolly_arch *const ARCHS[] = {&woolly_arch_llama,     &woolly_arch_granite, &woolly_arch_qwen2,
                                           &woolly_arch_qwen3,     &woolly_arch_phi3,    &woolly_arch_gemma3,
                                           &woolly_arch_qwen3moe,  &woolly_arch_granitemoe};
enum { N_ARCHS = sizeof ARCHS / sizeof ARCHS[0] };

_Static_assert(offsetof(woolly_config, arch) == 0, "WOOLLY_HP reads offset 0 as no field");

int woolly_arch_count(void)
{
    return N_ARCHS;
}

const woolly_arch *woolly_arch_get(int i)
{
    return i >= 0 && i < N_ARCHS ? ARCHS[i] : NULL;
}

const woolly_arch *woolly_arch_find(gguf_str name)
{
    for (int i = 0; i < N_ARCHS; i++)
        if (gguf_str_eq(name, ARCHS[i]->name))
            return ARCHS[i];
    return NULL;
}

const char *woolly_arch_names(const char *sep)
{
    static _Thread_local char buf[256];
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < N_ARCHS && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? sep : "", ARCHS[i]->name);
    return buf;
}

/* ---- keys and tensors, the base's first ---------------------------------------------------------- */

int woolly_arch_n_keys(const woolly_arch *a)
{
    return a ? woolly_arch_n_keys(a->base) + a->n_keys : 0;
}

const woolly_arch_key *woolly_arch_key_at(const woolly_arch *a, int i)
{
    const int in_base = woolly_arch_n_keys(a->base);
    return i < in_base ? woolly_arch_key_at(a->base, i) : &a->keys[i - in_base];
}

int woolly_arch_n_tensors(const woolly_arch *a)
{
    return a ? woolly_arch_n_tensors(a->base) + a->n_tensors : 0;
}

const woolly_arch_tensor *woolly_arch_tensor_at(const woolly_arch *a, int i)
{
    const int in_base = woolly_arch_n_tensors(a->base);
    return i < in_base ? woolly_arch_tensor_at(a->base, i) : &a->tensors[i - in_base];
}

const woolly_arch_tensor *woolly_arch_match(const woolly_arch *a, const char *name, int *layer)
{
    *layer = -1;
    const char *suffix = NULL;
    if (!strncmp(name, "blk.", 4) && name[4] >= '0' && name[4] <= '9') {
        long long l = 0;
        const char *p = name + 4;
        for (; *p >= '0' && *p <= '9'; p++)
            l = l < 1000000000 ? l * 10 + (*p - '0') : l; /* past any block_count: "beyond" either way */
        if (*p == '.') {
            suffix = p + 1;
            *layer = (int)l;
        }
    }
    for (int i = 0; i < woolly_arch_n_tensors(a); i++) {
        const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
        if (t->per_block ? suffix && !strcmp(suffix, t->name) : !strcmp(name, t->name))
            return t;
    }
    *layer = -1;
    return NULL;
}

bool woolly_arch_tensor_applies(const woolly_arch_tensor *t, const woolly_config *c)
{
    switch (t->when) {
    case WOOLLY_WHEN_ALWAYS:
        return true;
    case WOOLLY_WHEN_DENSE:
        return c->n_expert == 0;
    case WOOLLY_WHEN_EXPERTS:
        return c->n_expert > 0;
    }
    return false;
}

const char *woolly_arch_tensor_name(const woolly_arch_tensor *t, int layer, char *buf, size_t n)
{
    if (t->per_block)
        snprintf(buf, n, "blk.%d.%s", layer, t->name);
    else
        snprintf(buf, n, "%s", t->name);
    return buf;
}

void *woolly_arch_slot(woolly_weights *w, const woolly_arch_tensor *t, int layer)
{
    return t->per_block ? (char *)&w->layers[layer] + t->slot : (char *)w + t->slot;
}

int64_t woolly_arch_rows(const woolly_arch_tensor *t, const woolly_config *c)
{
    if (t->n_parts == 0)
        return woolly_dim_value(&t->ne[1], c);
    int64_t rows = 0;
    for (int j = 0; j < t->n_parts; j++)
        rows += woolly_dim_value(&t->parts[j].rows, c);
    return rows;
}

int woolly_arch_n_matrices(const woolly_arch_tensor *t)
{
    return t->n_parts > 0 ? t->n_parts : 1;
}

woolly_matrix *woolly_arch_matrix(woolly_weights *w, const woolly_arch_tensor *t, int layer, int j)
{
    const uint16_t slot = t->n_parts > 0 ? t->parts[j].slot : t->slot;
    return (woolly_matrix *)(t->per_block ? (char *)&w->layers[layer] + slot : (char *)w + slot);
}

/* ---- sizes --------------------------------------------------------------------------------------- */

#define FIELD(f, type)                                                                                       \
    {                                                                                                        \
        WOOLLY_HP(f), #f, type                                                                               \
    }
static const struct {
    uint16_t field;
    const char *name;
    enum woolly_key_type type;
} FIELDS[] = {
    FIELD(n_vocab, WOOLLY_KEY_INT),
    FIELD(n_embd, WOOLLY_KEY_INT),
    FIELD(n_layer, WOOLLY_KEY_INT),
    FIELD(n_head, WOOLLY_KEY_INT),
    FIELD(n_head_kv, WOOLLY_KEY_INT),
    FIELD(head_dim, WOOLLY_KEY_INT),
    FIELD(head_dim_v, WOOLLY_KEY_INT),
    FIELD(n_ff, WOOLLY_KEY_INT),
    FIELD(n_ctx_train, WOOLLY_KEY_INT),
    FIELD(n_rot, WOOLLY_KEY_INT),
    FIELD(n_expert, WOOLLY_KEY_INT),
    FIELD(n_expert_used, WOOLLY_KEY_INT),
    FIELD(n_ff_exp, WOOLLY_KEY_INT),
    FIELD(n_swa, WOOLLY_KEY_INT),
    FIELD(swa_pattern, WOOLLY_KEY_INT),
    FIELD(rope_orig_ctx, WOOLLY_KEY_INT),
    FIELD(rope_attn_factor, WOOLLY_KEY_FLOAT),
    FIELD(rope_base_swa, WOOLLY_KEY_FLOAT),
    FIELD(logit_softcap, WOOLLY_KEY_FLOAT),
    FIELD(rope_base, WOOLLY_KEY_FLOAT),
    FIELD(rope_scale, WOOLLY_KEY_FLOAT),
    FIELD(rms_eps, WOOLLY_KEY_FLOAT),
    FIELD(embedding_scale, WOOLLY_KEY_FLOAT),
    FIELD(residual_scale, WOOLLY_KEY_FLOAT),
    FIELD(attention_scale, WOOLLY_KEY_FLOAT),
    FIELD(logit_scale, WOOLLY_KEY_FLOAT),
};
#undef FIELD

const char *woolly_config_field_name(uint16_t field, enum woolly_key_type type)
{
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
        if (FIELDS[i].field == field && FIELDS[i].type == type)
            return FIELDS[i].name;
    return NULL;
}

static int32_t *int_field(woolly_config *c, uint16_t field)
{
    return (int32_t *)((char *)c + field);
}

static int64_t field_value(const woolly_config *c, uint16_t field)
{
    return field ? *(const int32_t *)((const char *)c + field) : 1;
}

int64_t woolly_dim_value(const woolly_dim *d, const woolly_config *c)
{
    const int64_t per = field_value(c, d->per), div = d->div ? d->div : 1;
    return per ? field_value(c, d->mul[0]) * field_value(c, d->mul[1]) / per / div : 0;
}

const char *woolly_dim_text(const woolly_dim *d, char *buf, size_t n)
{
    const char *a = woolly_config_field_name(d->mul[0], WOOLLY_KEY_INT);
    const char *b = woolly_config_field_name(d->mul[1], WOOLLY_KEY_INT);
    const char *per = woolly_config_field_name(d->per, WOOLLY_KEY_INT);
    int used = snprintf(buf, n, "%s", a ? a : "1");
    if (b && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " * %s", b);
    if (per && used >= 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " / %s", per);
    if (d->div > 1 && used >= 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " / %u", (unsigned)d->div);
    return buf;
}

int woolly_tensor_kind_dims(enum woolly_tensor_kind k)
{
    switch (k) {
    case WOOLLY_TENSOR_VECTOR:
    case WOOLLY_TENSOR_F32_VECTOR:
        return 1;
    case WOOLLY_TENSOR_EMBEDDING:
    case WOOLLY_TENSOR_MATRIX:
        return 2;
    case WOOLLY_TENSOR_EXPERTS:
        return 3;
    }
    return 0;
}

int woolly_arch_check_shape(const woolly_arch_tensor *t, const woolly_config *c, const gguf_tensor *gt,
                            const char *label, woolly_error *err)
{
    const int nd = woolly_tensor_kind_dims(t->kind);
    int64_t want[4] = {1, 1, 1, 1};
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        if (i < nd)
            want[i] = woolly_dim_value(&t->ne[i], c);
        if (i == 1 && t->n_parts > 0)
            want[1] = woolly_arch_rows(t, c);
        ok &= (int64_t)gt->ne[i] == want[i];
    }
    if (ok)
        return 0;
    char expected[96];
    int used = snprintf(expected, sizeof expected, "[%lld", (long long)want[0]);
    for (int i = 1; i < nd; i++)
        used += snprintf(expected + used, sizeof expected - (size_t)used, ", %lld", (long long)want[i]);
    snprintf(expected + used, sizeof expected - (size_t)used, "]%s",
             nd == 3   ? " (ne[0] = row length, ne[2] = experts)"
             : nd == 2 ? " (ne[0] = row length)"
                       : "");
    return woolly_fail(err, "%s: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected %s", label,
                       gt->name, (unsigned long long)gt->ne[0], (unsigned long long)gt->ne[1],
                       (unsigned long long)gt->ne[2], (unsigned long long)gt->ne[3], expected);
}

/* ---- hyperparameters ----------------------------------------------------------------------------- */

/* "<arch>.<key>" */
static const char *arch_key(const woolly_arch *a, const char *key)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s.%s", a->name, key);
    return buf;
}

int woolly_arch_read_int(const gguf_file *g, const char *label, const woolly_arch *a, const char *key,
                         long long def, long long lo, long long hi, int32_t *out, woolly_error *err)
{
    const char *k = arch_key(a, key);
    woolly_error e = {{0}};
    uint32_t v;
    if (!gguf_get_u32(g, k, &v, &e)) {
        if (e.msg[0])
            return woolly_fail(err, "%s: %s", label, e.msg);
        if (def < 0)
            return woolly_fail(err, "%s: missing hyperparameter '%s'", label, k);
        v = (uint32_t)def;
    }
    if (v < lo || v > hi)
        return woolly_fail(err, "%s: hyperparameter '%s' = %u is out of range [%lld, %lld]", label, k, v, lo,
                           hi);
    *out = (int32_t)v;
    return 0;
}

/* A FLOAT key: absent (or 0 when not required) gives `def`; must be finite and > 0, or 0 when
 * zero_off. */
static int read_float(const gguf_file *g, const char *label, const woolly_arch *a, const char *key,
                      bool required, bool zero_off, float def, float *out, woolly_error *err)
{
    const char *k = arch_key(a, key);
    woolly_error e = {{0}};
    float v;
    if (!gguf_get_f32(g, k, &v, &e)) {
        if (e.msg[0])
            return woolly_fail(err, "%s: %s", label, e.msg);
        if (required)
            return woolly_fail(err, "%s: missing hyperparameter '%s'", label, k);
        v = def;
    }
    if (v == 0.0f && !required) /* converters write 0 for "not set" */
        v = def;
    if (zero_off && v == 0.0f) {
        *out = 0.0f;
        return 0;
    }
    if (!isfinite(v) || !(v > 0.0f))
        return woolly_fail(err, "%s: hyperparameter '%s' = %g must be a finite number > 0", label, k,
                           (double)v);
    *out = v;
    return 0;
}

static int read_keys(const gguf_file *g, const char *label, woolly_config *c, enum woolly_key_type type,
                     woolly_error *err)
{
    const woolly_arch *a = c->arch;
    for (int i = 0; i < woolly_arch_n_keys(a); i++) {
        const woolly_arch_key *k = woolly_arch_key_at(a, i);
        if (k->type != type)
            continue;
        if (type == WOOLLY_KEY_INT) {
            const long long def = k->required     ? -1
                                  : k->def.mul[0] ? (long long)woolly_dim_value(&k->def, c)
                                                  : (long long)k->def_int;
            const long long hi = k->hi_field ? field_value(c, k->hi_field) : k->hi;
            if (woolly_arch_read_int(g, label, a, k->key, def, k->lo, hi, int_field(c, k->field), err))
                return -1;
        } else {
            float *f = (float *)((char *)c + k->field);
            if (read_float(g, label, a, k->key, k->required, k->zero_off, k->def_f != 0.0f ? k->def_f : *f, f,
                           err))
                return -1;
        }
    }
    return 0;
}

/* What the forward pass and the kernels need of the decoder's sizes, with the file's key names. */
static int check_decoder(const gguf_file *g, const char *label, const woolly_config *c, woolly_error *err)
{
    if (c->n_head % c->n_head_kv)
        return woolly_fail(err, "%s: %d query heads cannot be shared evenly by %d key/value heads", label,
                           c->n_head, c->n_head_kv);
    if (c->n_head / c->n_head_kv > WOOLLY_MAX_GROUP)
        return woolly_fail(err, "%s: %d query heads per key/value head exceed the supported %d", label,
                           c->n_head / c->n_head_kv, WOOLLY_MAX_GROUP);
    if (!gguf_find_kv(g, arch_key(c->arch, "attention.key_length")) && c->n_embd % c->n_head)
        return woolly_fail(err, "%s: embedding length %d is not a multiple of the head count %d", label,
                           c->n_embd, c->n_head);
    if (c->head_dim_v != c->head_dim)
        return woolly_fail(err, "%s: key length %d differs from value length %d (not supported)", label,
                           c->head_dim, c->head_dim_v);
    if (c->head_dim > WOOLLY_MAX_HEAD_DIM)
        return woolly_fail(err, "%s: head dimension %d exceeds the supported %d", label, c->head_dim,
                           WOOLLY_MAX_HEAD_DIM);
    if (c->n_rot % 2)
        return woolly_fail(err, "%s: rope.dimension_count %d must be even (RoPE rotates pairs)", label,
                           c->n_rot);
    /* A mixture of experts: each token routed to 1 .. expert_count of them. */
    char count_key[160];
    snprintf(count_key, sizeof count_key, "%s", arch_key(c->arch, "expert_count"));
    const char *used_key = arch_key(c->arch, "expert_used_count");
    if (c->arch->steps.moe_ffn && c->n_expert == 0)
        return woolly_fail(err, "%s: missing hyperparameter '%s' (the %s architecture is a mixture of experts)",
                           label, count_key, c->arch->name);
    if (c->n_expert == 0 && c->n_expert_used > 0)
        return woolly_fail(err, "%s: hyperparameter '%s' = %d, but the model has no experts ('%s' absent or 0)",
                           label, used_key, c->n_expert_used, count_key);
    if (c->n_expert > 0 && c->n_expert_used == 0)
        return woolly_fail(err, "%s: hyperparameter '%s' must be at least 1 with %d experts ('%s')", label,
                           used_key, c->n_expert, count_key);
    if (c->n_expert_used > c->n_expert)
        return woolly_fail(err, "%s: hyperparameter '%s' = %d exceeds '%s' = %d", label, used_key,
                           c->n_expert_used, count_key, c->n_expert);
    return 0;
}

/* rope.scaling.type as llama.cpp reads it: absent means linear (with a factor of 1 when rope.scaling.factor
 * is absent too); yarn takes the factor and the original context length; longrope (Phi-3) picks one of
 * the factor tensors by the context size (rope.c). rope.scaling.attn_factor and the original context
 * length are read whatever the type. */
static int read_rope_scaling(const gguf_file *g, const char *label, woolly_config *c, woolly_error *err)
{
    static const struct {
        const char *name;
        enum woolly_rope_scaling type;
    } TYPES[] = {{"none", WOOLLY_ROPE_SCALING_NONE},
                 {"linear", WOOLLY_ROPE_SCALING_LINEAR},
                 {"yarn", WOOLLY_ROPE_SCALING_YARN},
                 {"longrope", WOOLLY_ROPE_SCALING_LONGROPE}};
    woolly_error e = {{0}};
    gguf_str scaling = {.ptr = "linear", .len = 6};
    if (!gguf_get_str(g, arch_key(c->arch, "rope.scaling.type"), &scaling, &e) && e.msg[0])
        return woolly_fail(err, "%s: %s", label, e.msg);
    bool known = false;
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (gguf_str_eq(scaling, TYPES[i].name)) {
            c->rope_scaling = TYPES[i].type;
            known = true;
        }
    if (!known)
        return woolly_fail(err, "%s: RoPE scaling '%.*s' is not supported (none, linear, yarn, longrope)",
                           label, (int)(scaling.len > 32 ? 32 : scaling.len), scaling.ptr);
    c->rope_scale = 1.0f;
    c->rope_attn_factor = 1.0f;
    if (c->rope_scaling != WOOLLY_ROPE_SCALING_NONE &&
        read_float(g, label, c->arch, "rope.scaling.factor", false, false, 1.0f, &c->rope_scale, err))
        return -1;
    if (c->rope_scaling == WOOLLY_ROPE_SCALING_LINEAR && c->rope_scale == 1.0f)
        c->rope_scaling = WOOLLY_ROPE_SCALING_NONE;
    if (read_float(g, label, c->arch, "rope.scaling.attn_factor", false, false, 1.0f, &c->rope_attn_factor,
                   err))
        return -1;
    return woolly_arch_read_int(g, label, c->arch, "rope.scaling.original_context_length", c->n_ctx_train, 1,
                                INT32_MAX, &c->rope_orig_ctx, err);
}

int woolly_arch_read_config(const gguf_file *g, const char *label, woolly_config *c, woolly_error *err)
{
    gguf_str name;
    woolly_error e = {{0}};
    if (!gguf_get_str(g, "general.architecture", &name, &e))
        return woolly_fail(err, "%s: %s", label, e.msg[0] ? e.msg : "missing 'general.architecture'");
    const woolly_arch *a = woolly_arch_find(name);
    if (!a)
        return woolly_fail(err, "%s: architecture '%.*s' is not supported (supported: %s)", label,
                           (int)(name.len > 64 ? 64 : name.len), name.ptr, woolly_arch_names(", "));
    return woolly_arch_read_keys(g, label, a, c, err);
}

int woolly_arch_read_keys(const gguf_file *g, const char *label, const woolly_arch *a, woolly_config *c,
                          woolly_error *err)
{
    *c = (woolly_config){.arch = a};
    if (read_keys(g, label, c, WOOLLY_KEY_INT, err))
        return -1;
    if (c->n_ff_exp == 0) /* experts as wide as the dense FFN would be (llama, granite) */
        c->n_ff_exp = c->n_ff;
    if (check_decoder(g, label, c, err))
        return -1;
    /* The plain decoder's values, which a FLOAT key without a default of its own keeps when absent. */
    c->embedding_scale = c->residual_scale = c->logit_scale = 1.0f;
    c->attention_scale = 1.0f / sqrtf((float)c->head_dim);
    if (read_keys(g, label, c, WOOLLY_KEY_FLOAT, err) || read_rope_scaling(g, label, c, err))
        return -1;
    if (c->rope_base_swa == 0.0f) /* a table without a base of its own for sliding layers */
        c->rope_base_swa = c->rope_base;
    if (a->derive)
        a->derive(c);
    return 0;
}
