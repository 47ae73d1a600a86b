/* qwen2 (Qwen2, Qwen2.5): llama's decoder with a bias on each of the Q, K and V products and RoPE on the
 * halves of each head (NEOX). The files tie the output to the token embedding in the small sizes. */
#include "arch.h"

extern const woolly_arch woolly_arch_llama_layer;

#define BIAS(name, f, rows)                                                                                  \
    {                                                                                                        \
        name, .per_block = true, .slot = (uint16_t)offsetof(woolly_layer, f), .kind = WOOLLY_TENSOR_VECTOR,  \
              .ne = {                                                                                        \
                  rows                                                                                       \
              }                                                                                              \
    }

static const woolly_arch_tensor TENSORS[] = {
    BIAS("attn_q.bias", bq, WOOLLY_DIM2(n_head, head_dim)),
    BIAS("attn_k.bias", bk, WOOLLY_DIM2(n_head_kv, head_dim)),
    BIAS("attn_v.bias", bv, WOOLLY_DIM2(n_head_kv, head_dim)),
};

const woolly_arch woolly_arch_qwen2 = {
    .name = "qwen2",
    .base = &woolly_arch_llama_layer,
    .tensors = TENSORS,
    .n_tensors = sizeof TENSORS / sizeof TENSORS[0],
    .rope = WOOLLY_ROPE_NEOX,
    .steps = {.qkv_bias = true},
};
