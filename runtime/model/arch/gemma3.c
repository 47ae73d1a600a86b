/* gemma3 (Gemma 3): llama's decoder with the token embeddings multiplied by sqrt(n_embd), an RMSNorm of
 * each query and key head before RoPE on the halves (NEOX), RMSNorms of the attention's and the FFN's
 * outputs before their residual adds, a GELU-gated FFN, and interleaved sliding-window layers: with
 * attention.sliding_window W, layer l sees the last W positions unless l % P == P - 1 (P =
 * attention.sliding_window_pattern, 6 when absent), and the sliding layers turn by RoPE base
 * rope.freq_base_swa unscaled. Queries are scaled by 1/sqrt(head_dim) (1/sqrt(n_embd / n_head) in the
 * 62-layer 27B, as Google's reference and llama.cpp do); final_logit_softcapping caps the logits where
 * the file gives it. The files tie the output to the token embedding. */
#include <math.h>

#include "arch.h"

extern const woolly_arch woolly_arch_llama_layer;

#define BLOCK_VECTOR(name, f, n)                                                                             \
    {                                                                                                        \
        name, .per_block = true, .slot = (uint16_t)offsetof(woolly_layer, f), .kind = WOOLLY_TENSOR_VECTOR,  \
              .ne = {                                                                                        \
                  n                                                                                          \
              }                                                                                              \
    }

static const woolly_arch_tensor TENSORS[] = {
    BLOCK_VECTOR("attn_q_norm.weight", q_norm, WOOLLY_DIM(head_dim)),
    BLOCK_VECTOR("attn_k_norm.weight", k_norm, WOOLLY_DIM(head_dim)),
    BLOCK_VECTOR("post_attention_norm.weight", attn_post_norm, WOOLLY_DIM(n_embd)),
    BLOCK_VECTOR("post_ffw_norm.weight", ffn_post_norm, WOOLLY_DIM(n_embd)),
};

static const woolly_arch_key KEYS[] = {
    /* absent: no layer slides; a pattern of 6 when the window is given without one */
    {"attention.sliding_window", WOOLLY_KEY_INT, WOOLLY_HP(n_swa), .def_int = 0, .lo = 0, .hi = 1 << 30},
    {"attention.sliding_window_pattern", WOOLLY_KEY_INT, WOOLLY_HP(swa_pattern), .def_int = 6, .lo = 0,
     .hi = 100000},
    {"rope.freq_base_swa", WOOLLY_KEY_FLOAT, WOOLLY_HP(rope_base_swa), .def_f = 10000.0f},
    {"final_logit_softcapping", WOOLLY_KEY_FLOAT, WOOLLY_HP(logit_softcap), .zero_off = true},
};

static void derive(woolly_config *c)
{
    c->embedding_scale = sqrtf((float)c->n_embd);
    if (c->n_layer == 62)
        c->attention_scale = 1.0f / sqrtf((float)(c->n_embd / c->n_head));
}

const woolly_arch woolly_arch_gemma3 = {
    .name = "gemma3",
    .base = &woolly_arch_llama_layer,
    .keys = KEYS,
    .n_keys = sizeof KEYS / sizeof KEYS[0],
    .tensors = TENSORS,
    .n_tensors = sizeof TENSORS / sizeof TENSORS[0],
    .rope = WOOLLY_ROPE_NEOX,
    .steps = {.qk_norm = true, .post_norms = true, .gelu_ffn = true, .sliding_window = true},
    .derive = derive,
};
