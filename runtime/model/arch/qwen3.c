/* qwen3: llama's decoder with an RMSNorm of each query and key head (one weight vector of head_dim each,
 * shared by the heads) before RoPE on the halves (NEOX), no biases. Its head dimension
 * (attention.key_length, 128) is not n_embd / n_head. */
#include "arch.h"

extern const woolly_arch woolly_arch_llama_layer;

#define HEAD_NORM(name, f)                                                                                   \
    {                                                                                                        \
        name, .per_block = true, .slot = (uint16_t)offsetof(woolly_layer, f), .kind = WOOLLY_TENSOR_VECTOR,  \
              .ne = {                                                                                        \
                  WOOLLY_DIM(head_dim)                                                                       \
              }                                                                                              \
    }

static const woolly_arch_tensor TENSORS[] = {
    HEAD_NORM("attn_q_norm.weight", q_norm),
    HEAD_NORM("attn_k_norm.weight", k_norm),
};

const woolly_arch woolly_arch_qwen3 = {
    .name = "qwen3",
    .base = &woolly_arch_llama_layer,
    .tensors = TENSORS,
    .n_tensors = sizeof TENSORS / sizeof TENSORS[0],
    .rope = WOOLLY_ROPE_NEOX,
    .steps = {.qk_norm = true},
};
