/* Architectures as data: what a model family's GGUF file holds and how its forward pass differs from
 * the plain decoder, one table per family (arch/<name>.c). Its hyperparameter keys with their defaults
 * and ranges, its tensors (name, shape in hyperparameters, required or optional, where each is bound,
 * what kind of tensor it is, the batch classes the tuner measures a matrix for), its RoPE mode and its
 * optional steps. The loader reads the keys and binds the tensors the table names (model.c), the
 * repack gives its matrices their layouts in table order (model_repack.c), the tuner measures their
 * shapes (tune/tune_shapes.c), and the forward pass says which steps it runs (forward.c).
 *
 * A table may name a base whose keys and tensors come first (granite: llama's, plus its scales); the
 * woolly_arch_key_at / woolly_arch_tensor_at iterators give both as one list. */
#ifndef WOOLLY_ARCH_H
#define WOOLLY_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"
#include "model.h"

/* The most experts a mixture-of-experts FFN may have (expert_count). */
#define WOOLLY_MAX_EXPERTS 1024

/* A field of woolly_config, named by its offset: an int32_t for sizes and INT keys, a float for FLOAT
 * keys. Offset 0 is the config's `arch` pointer, so 0 means "no field". */
#define WOOLLY_HP(field) ((uint16_t)offsetof(woolly_config, field))

/* A size from the hyperparameters: mul[0] * mul[1] / per / div, where a field of 0 counts as 1 and a
 * div of 0 as 1 (n_embd; n_head * head_dim; n_embd / n_head; n_rot / 2). */
typedef struct woolly_dim {
    uint16_t mul[2]; /* WOOLLY_HP fields multiplied */
    uint16_t per;    /* a WOOLLY_HP field divided by */
    uint16_t div;    /* a constant divided by */
} woolly_dim;

#define WOOLLY_DIM(a)                                                                                        \
    {                                                                                                        \
        {WOOLLY_HP(a), 0}, 0, 0                                                                              \
    }
#define WOOLLY_DIM2(a, b)                                                                                    \
    {                                                                                                        \
        {WOOLLY_HP(a), WOOLLY_HP(b)}, 0, 0                                                                   \
    }
#define WOOLLY_DIM_PER(a, b)                                                                                 \
    {                                                                                                        \
        {WOOLLY_HP(a), 0}, WOOLLY_HP(b), 0                                                                   \
    }
#define WOOLLY_DIM_DIV(a, k)                                                                                 \
    {                                                                                                        \
        {WOOLLY_HP(a), 0}, 0, k                                                                              \
    }

/* ---- hyperparameters ----------------------------------------------------------------------------- */

enum woolly_key_type {
    WOOLLY_KEY_INT,   /* a u32 into an int32_t field, in [lo, hi] */
    WOOLLY_KEY_FLOAT, /* an f32 into a float field, finite and > 0 */
};

/* One "<arch>.<key>" hyperparameter. The INT keys are read first, in table order (a default or a bound
 * may use the fields read before it), then the decoder's consistency checks run and its derived
 * values are set (woolly_arch_read_config), then the FLOAT keys. */
typedef struct woolly_arch_key {
    const char *key; /* after "<arch>.": "attention.head_count" */
    enum woolly_key_type type;
    uint16_t field; /* WOOLLY_HP(...) */
    bool required;
    /* INT: the value when absent (def, or def_int when def names no field), and the range [lo, hi],
     * hi_field's value when hi_field is set. */
    woolly_dim def;
    int32_t def_int;
    int64_t lo, hi;
    uint16_t hi_field;
    /* FLOAT: the value when absent or 0 (converters write 0 for "not set"); 0 keeps the field's value,
     * which the decoder set before (1 for the Granite scales, 1/sqrt(head_dim) for attention.scale). */
    float def_f;
    /* FLOAT: absent or 0 leaves 0, a step that is off (final_logit_softcapping); else it must be > 0. */
    bool zero_off;
} woolly_arch_key;

/* ---- tensors ------------------------------------------------------------------------------------- */

enum woolly_tensor_kind {
    WOOLLY_TENSOR_VECTOR, /* [n] floats, copied at load (F32, or F16/BF16 converted); slot: const float * */
    WOOLLY_TENSOR_F32_VECTOR, /* [n] F32 floats read in place; slot: const float * */
    WOOLLY_TENSOR_EMBEDDING,  /* [rows][cols] read a row at a time (any type that dequantizes); its rows are
                                 n_vocab; slot: woolly_matrix */
    WOOLLY_TENSOR_MATRIX,     /* [rows][cols] multiplied by: kernels for its type, a layout from the repack, a
                                 place in the model's matrix list (table order); slot: woolly_matrix */
    WOOLLY_TENSOR_EXPERTS,    /* [n][rows][cols]: n matrices one after the other (a mixture of experts' FFN);
                                 slot: woolly_experts (each expert a matrix of its own) */
};

/* Which files of the architecture hold a tensor: every one, or only those with (expert_count > 0) or
 * without experts (llama: Mixtral's experts in place of the dense FFN). A tensor that does not apply is
 * neither required nor allowed. */
enum woolly_tensor_when {
    WOOLLY_WHEN_ALWAYS,
    WOOLLY_WHEN_DENSE,   /* n_expert == 0 */
    WOOLLY_WHEN_EXPERTS, /* n_expert > 0 */
};

/* Bits of enum woolly_tokens_class: the batch sizes the tuner measures a matrix for. */
#define WOOLLY_CLASS_BIT(c) (1u << (c))
#define WOOLLY_CLASSES_ALL ((1u << WOOLLY_TOKENS_CLASSES) - 1)

/* A range of a fused matrix's rows bound as a matrix of its own (a view: the same bytes, its data pointer
 * past the rows before it), so that the products, the repack and the tuner see ordinary matrices. */
typedef struct woolly_arch_part {
    woolly_dim rows;
    uint16_t slot; /* offsetof(woolly_layer or woolly_weights, field): a woolly_matrix */
} woolly_arch_part;

enum { WOOLLY_ARCH_MAX_PARTS = 3 };

typedef struct woolly_arch_tensor {
    const char *name; /* the file's name; a block's without its "blk.<layer>." prefix */
    bool per_block;   /* one per layer, bound into woolly_layer; else one, bound into woolly_weights */
    enum woolly_tensor_kind kind;
    woolly_dim ne[3]; /* GGUF's ne (ne[0] = row length): [cols], [cols, rows] or [cols, rows, n]; a
                         fused matrix's rows are its parts' (ne[1] unused) */
    bool optional;    /* may be absent (its slot stays empty) */
    const char *tied; /* when absent, this global tensor is bound in its place (output: token_embd) */
    uint16_t slot;    /* offsetof(woolly_layer or woolly_weights, field) */
    unsigned classes; /* MATRIX: WOOLLY_CLASS_BIT set the tuner measures it for (a tied tensor
                         inherits them when it stands in) */
    /* MATRIX: a fused tensor (phi3's attn_qkv, its gate+up ffn_up) whose consecutive row ranges are bound
     * as these views, in order, their rows adding up to ne[1]; `slot` is then unused. n_parts 0: the
     * matrix is bound whole into `slot`. */
    woolly_arch_part parts[WOOLLY_ARCH_MAX_PARTS];
    int n_parts;
    enum woolly_tensor_when when;
} woolly_arch_tensor;

/* ---- the architecture ---------------------------------------------------------------------------- */

enum woolly_rope_mode {
    WOOLLY_ROPE_ADJACENT, /* rotates the pairs (x[2i], x[2i+1]): llama, granite */
    WOOLLY_ROPE_NEOX,     /* rotates (x[i], x[i + n_rot/2]), the halves: qwen2, phi3, gemma, ... */
};

/* The steps beyond the plain decoder (forward.c's top comment) an architecture needs. */
typedef struct woolly_arch_steps {
    bool qkv_bias;       /* a bias added to each of the Q, K and V products */
    bool qk_norm;        /* an RMSNorm of each query and key head before RoPE */
    bool post_norms;     /* an RMSNorm of the attention's and the FFN's outputs before their residual add */
    bool gelu_ffn;       /* the FFN's gate is GELU (tanh form), not SiLU: gelu(h Wgate) * (h Wup) */
    bool moe_ffn;        /* the feed-forward is always a mixture of experts: expert_count > 0 is required
                            (llama runs one when its file gives expert_count, without this flag) */
    bool sliding_window; /* some layers attend to a window of recent positions only */
} woolly_arch_steps;

typedef struct woolly_arch {
    const char *name;               /* general.architecture */
    const struct woolly_arch *base; /* whose keys and tensors come before these, or NULL */
    const woolly_arch_key *keys;
    int n_keys;
    const woolly_arch_tensor *tensors;
    int n_tensors;
    enum woolly_rope_mode rope;
    woolly_arch_steps steps;
    /* Values the family derives from its hyperparameters once they are read (gemma3: its embedding scale
     * sqrt(n_embd)), or NULL. */
    void (*derive)(woolly_config *c);
} woolly_arch;

/* The architectures the runtime knows (arch.c lists them), and the one named `name`, or NULL. */
int woolly_arch_count(void);
const woolly_arch *woolly_arch_get(int i);
const woolly_arch *woolly_arch_find(gguf_str name);
/* Their names joined by `sep` ("llama, granite"). */
const char *woolly_arch_names(const char *sep);

/* An architecture's keys and tensors, its base's first. */
int woolly_arch_n_keys(const woolly_arch *a);
const woolly_arch_key *woolly_arch_key_at(const woolly_arch *a, int i);
int woolly_arch_n_tensors(const woolly_arch *a);
const woolly_arch_tensor *woolly_arch_tensor_at(const woolly_arch *a, int i);

/* The tensor of `a` a file's tensor name is, with its block in *layer (-1 for a global one), or NULL:
 * "blk.<digits>.<name>" for a block's tensor. */
const woolly_arch_tensor *woolly_arch_match(const woolly_arch *a, const char *name, int *layer);
/* Whether a file with hyperparameters c holds tensor t (its `when`). */
bool woolly_arch_tensor_applies(const woolly_arch_tensor *t, const woolly_config *c);
/* The file's name of tensor t (of block `layer`) in buf. */
const char *woolly_arch_tensor_name(const woolly_arch_tensor *t, int layer, char *buf, size_t n);
/* Where tensor t (of block `layer`) is bound in w: a woolly_matrix or a const float *, by its kind. */
void *woolly_arch_slot(woolly_weights *w, const woolly_arch_tensor *t, int layer);
/* The rows of a MATRIX tensor under c: ne[1], or its parts' sum. */
int64_t woolly_arch_rows(const woolly_arch_tensor *t, const woolly_config *c);
/* The matrices a MATRIX tensor binds: 1, or its parts; the j-th one's woolly_matrix in w. */
int woolly_arch_n_matrices(const woolly_arch_tensor *t);
woolly_matrix *woolly_arch_matrix(woolly_weights *w, const woolly_arch_tensor *t, int layer, int j);

/* A size's value under c, and its text ("n_head * head_dim", "n_rot / 2") for messages. */
int64_t woolly_dim_value(const woolly_dim *d, const woolly_config *c);
const char *woolly_dim_text(const woolly_dim *d, char *buf, size_t n);
/* The dimensions a kind has in the file (1 for vectors, 2 for matrices, 3 for experts). */
int woolly_tensor_kind_dims(enum woolly_tensor_kind k);
/* The name of a woolly_config field (a WOOLLY_HP offset) of the type (INT: int32_t, FLOAT: float), or
 * NULL if the offset is not one. */
const char *woolly_config_field_name(uint16_t field, enum woolly_key_type type);

/* Checks that a file's tensor has the shape t gives under c (the dimensions its kind has, every other
 * 1); a message naming the tensor, its shape and the expected one if not. `label` prefixes it. */
int woolly_arch_check_shape(const woolly_arch_tensor *t, const woolly_config *c, const gguf_tensor *gt,
                            const char *label, woolly_error *err);

/* Reads a model's hyperparameters as the runtime does: general.architecture (an architecture it
 * knows), the table's keys, the decoder's checks (query heads shared evenly, head dimension the kernels
 * take, RoPE pairs), the RoPE scaling (none, linear, yarn, or longrope with the factor tensors) and the
 * family's derived values. `label` (the file) prefixes the messages. n_vocab is
 * left 0: the token embedding gives it (model.c). */
int woolly_arch_read_config(const gguf_file *g, const char *label, woolly_config *c, woolly_error *err);
/* The same with table a, its keys read as "<a->name>.<key>", whatever general.architecture says (the
 * tuner reads the attention of an architecture the runtime does not run as the plain decoder's). */
int woolly_arch_read_keys(const gguf_file *g, const char *label, const woolly_arch *a, woolly_config *c,
                          woolly_error *err);
/* One INT hyperparameter "<arch>.<key>" in [lo, hi]; `def` < 0 makes it required. */
int woolly_arch_read_int(const gguf_file *g, const char *label, const woolly_arch *a, const char *key,
                         long long def, long long lo, long long hi, int32_t *out, woolly_error *err);

/* Whether the forward pass runs an architecture's RoPE mode and steps (forward.c); if not, what it
 * lacks in why. */
bool woolly_forward_runs(const woolly_arch *a, char *why, size_t n);

#endif
