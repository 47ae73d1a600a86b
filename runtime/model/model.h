/* A model: its hyperparameters (config), its weights (pointers into the mapped GGUF file, each with
 * its shape), and its tokenizer. Everything is validated when the model is opened, so the forward pass
 * never meets a tensor of the wrong shape or a type without a kernel.
 *
 * Shapes are written [rows][cols] as in y = W x: a matrix row is one output, cols (GGUF's ne[0]) is the
 * length of the input. */
#ifndef WOOLLY_MODEL_H
#define WOOLLY_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"
#include "huge_map.h"
#include "matmul.h"
#include "profile.h"
#include "tokenizer.h"
#include "woolly.h"
#include "wtype.h"

struct woolly_arch; /* arch.h: the architecture's table */

typedef struct woolly_config {
    const struct woolly_arch *arch; /* first: offset 0 names no hyperparameter in the tables (WOOLLY_HP) */
    int32_t n_vocab;                /* rows of token_embd */
    int32_t n_embd;                 /* residual stream width */
    int32_t n_layer;
    int32_t n_head;    /* query heads */
    int32_t n_head_kv; /* key/value heads; n_head / n_head_kv query heads share one (GQA) */
    int32_t head_dim;
    int32_t head_dim_v;  /* of the values: head_dim (checked) */
    int32_t n_ff;        /* feed-forward hidden width */
    int32_t n_ctx_train; /* context length the model was trained with */
    int32_t n_rot;       /* dimensions of each head that RoPE rotates (from the start, in pairs) */
    float rope_base;     /* pair i turns by base^(-2i / n_rot) a position, scaled as rope.h says */
    float rope_scale;    /* rope.scaling.factor: linear position scaling, or YaRN's factor; 1 without */
    enum woolly_rope_scaling {
        WOOLLY_ROPE_SCALING_NONE,
        WOOLLY_ROPE_SCALING_LINEAR,   /* positions / rope_scale */
        WOOLLY_ROPE_SCALING_YARN,     /* YaRN: each pair between interpolation and extrapolation (rope.c) */
        WOOLLY_ROPE_SCALING_LONGROPE, /* Phi-3's: the long or short factor tensors by the context size */
    } rope_scaling;
    int32_t rope_orig_ctx;  /* rope.scaling.original_context_length (YaRN, LongRoPE): n_ctx_train if absent */
    float rope_attn_factor; /* rope.scaling.attn_factor: multiplies RoPE's cos and sin (1 if absent) */
    float rope_base_swa;    /* the RoPE base of sliding-window layers, which are never scaled (gemma3) */
    float rms_eps;
    /* Granite's scales; 1 for llama (attention_scale: 1/sqrt(head_dim)). */
    float embedding_scale; /* multiplies the token embeddings */
    float residual_scale;  /* multiplies each block's output before its residual add */
    float attention_scale; /* multiplies q.k before the softmax */
    float logit_scale;     /* divides the logits */
    float logit_softcap;   /* logits = cap * tanh(logits / cap) (gemma3's final_logit_softcapping); 0: none */
    int32_t n_expert;      /* experts of a mixture-of-experts FFN; 0 without one */
    int32_t n_expert_used; /* experts each token is routed to (top-k); 0 without experts */
    int32_t n_ff_exp;      /* hidden width of each expert: expert_feed_forward_length, else n_ff */
    /* Sliding-window attention: a sliding layer's token sees itself and the n_swa - 1 positions before
     * it. 0: no layer slides. swa_pattern 0: every layer slides (Mistral); else layer l is global when
     * l % swa_pattern == swa_pattern - 1 (Gemma 3: every 6th). */
    int32_t n_swa;
    int32_t swa_pattern;
} woolly_config;

/* The window of layer l's attention: n_swa for a sliding layer, 0 (unbounded) for a global one. */
static inline int32_t woolly_layer_window(const woolly_config *p, int32_t l)
{
    if (p->n_swa <= 0)
        return 0;
    return p->swa_pattern > 0 && l % p->swa_pattern == p->swa_pattern - 1 ? 0 : p->n_swa;
}

/* A mixture of experts' 3-D tensor: n_expert matrices one after the other in the file, each bound as a
 * matrix of its own (a view of its rows), so that each is repacked, planned and multiplied like any
 * other matrix (model_repack.c, moe.c). */
typedef struct woolly_experts {
    woolly_matrix all;   /* the file's tensor as n_expert * rows rows: its type and shape (never multiplied) */
    woolly_matrix *each; /* [n_expert] expert e's rows [e * rows, (e + 1) * rows) */
} woolly_experts;

/* Optional fields are NULL where the architecture or the file has none. */
typedef struct woolly_layer {
    const float *attn_norm;       /* [n_embd] */
    woolly_matrix wq;             /* [n_head * head_dim][n_embd] (phi3: rows of attn_qkv) */
    woolly_matrix wk;             /* [n_head_kv * head_dim][n_embd] */
    woolly_matrix wv;             /* [n_head_kv * head_dim][n_embd] */
    const float *bq, *bk, *bv;    /* [n_head * head_dim], [n_head_kv * head_dim] x 2: Q/K/V biases (qwen2) */
    const float *q_norm, *k_norm; /* [head_dim] RMSNorm weights of each query / key head (qwen3, gemma3) */
    woolly_matrix wo;             /* [n_embd][n_head * head_dim] */
    const float *attn_post_norm;  /* [n_embd] RMSNorm of the attention's output (gemma3) */
    const float *ffn_norm;        /* [n_embd] */
    woolly_matrix w_gate;         /* [n_ff][n_embd] (phi3: the first n_ff rows of ffn_up) */
    woolly_matrix w_up;           /* [n_ff][n_embd] */
    woolly_matrix w_down;         /* [n_embd][n_ff] */
    const float *ffn_post_norm;   /* [n_embd] RMSNorm of the FFN's output (gemma3) */
    /* A mixture-of-experts FFN in place of w_gate, w_up, w_down (n_expert > 0). */
    woolly_matrix router;      /* [n_expert][n_embd] ffn_gate_inp: each expert's router logit */
    woolly_experts gate_exps;  /* [n_expert] x [n_ff_exp][n_embd] */
    woolly_experts up_exps;    /* [n_expert] x [n_ff_exp][n_embd] */
    woolly_experts down_exps;  /* [n_expert] x [n_embd][n_ff_exp] */
} woolly_layer;

typedef struct woolly_weights {
    woolly_matrix token_embd; /* [n_vocab][n_embd], read one row at a time (dequantized) */
    woolly_layer *layers;     /* [n_layer] */
    const float *output_norm; /* [n_embd] */
    woolly_matrix output;     /* [n_vocab][n_embd]; token_embd itself when the embeddings are tied */
    const float *rope_freqs;  /* [n_rot / 2] frequency divisors (Llama 3.1 style), or NULL */
    const float *rope_long;   /* [n_rot / 2] Phi-3's divisors beyond rope_orig_ctx, or NULL */
    const float *rope_short;  /* [n_rot / 2] and within it */
} woolly_weights;

struct woolly_model {
    gguf_file *file;
    woolly_config cfg;
    woolly_weights w;
    char arch_name[16];
    char name[128];  /* general.name or the file name */
    char label[128]; /* the file name, in messages */
    uint64_t n_params, n_bytes;
    woolly_tokenizer *tok; /* NULL if the vocabulary could not be read: tok_err says why */
    woolly_error tok_err;
    char *chat_template; /* tokenizer.chat_template (NUL-terminated copy) or NULL */
    float *owned;        /* norm vectors converted to F32 when not stored as F32 */
    woolly_matrix *expert_mats; /* every woolly_experts' `each`, in one allocation */

    /* Every matrix the forward pass multiplies by (layers' then the output), each once; a matrix's
     * index here is its `id`, which contexts key their per-matrix plans by. */
    woolly_matrix **mats;
    int32_t n_mats;
    woolly_huge_map repacked; /* the mapping holding the repacked matrices (model_repack.c): anonymous,
                                 or the repack cache's file */
    char *path;               /* the model file's absolute path, or NULL (parsed from a buffer) */
    enum {
        WOOLLY_WEIGHTS_AS_IN_FILE,     /* no matrix is repacked */
        WOOLLY_WEIGHTS_REPACKED,       /* at load, into anonymous memory */
        WOOLLY_WEIGHTS_REPACKED_SAVED, /* the same, then written to the repack cache */
        WOOLLY_WEIGHTS_MAPPED,         /* mapped from the repack cache */
    } weights;
    char repack_cache[1400]; /* the repack cache file, when it was used */
    char weights_text[1500]; /* woolly_model_weights_source */
    woolly_profile *profile; /* the tuning profile this machine's runs use, or NULL for the defaults */
    struct woolly_vocab_trie *vocab_trie; /* the token texts' trie for grammars, built on first use */
};

/* Chooses each matrix's weight layout and default activation format (model_repack.c): the tuning
 * profile's layout for its type and shape if it has one (the format then that of the best kernels on
 * it), else WOOLLY_ACT where the matrix can take it, else the registry's default for its type at the
 * active level (woolly_matmul_default_format). */
int woolly_model_pick_layouts(woolly_model *m, woolly_error *err);
/* Repacks every matrix whose layout is not GGUF rows into one anonymous mapping (multi-threaded), reading
 * the originals from the file (gguf_read) rather than through its mapping, so that a weight is resident
 * once; or maps the same bytes from the repack cache (repack_cache.h), and fills the cache after a
 * repack. */
int woolly_model_repack(woolly_model *m, woolly_error *err);
void woolly_model_release_repacked(woolly_model *m);
/* Source bytes each thread reads from the file per repack step (at least one row group is read); a
 * variable so that the tests can make every row group a step of its own. */
extern size_t woolly_repack_scratch_bytes;

/* Maps and validates a model; NULL with a message naming the file, tensor or key at fault. */
woolly_model *woolly_model_load(const char *path, woolly_error *err);
/* The same on an already parsed file, which the model takes over (closed by woolly_model_close, also
 * on failure). */
woolly_model *woolly_model_from_gguf(gguf_file *g, const char *display_name, woolly_error *err);

#endif
