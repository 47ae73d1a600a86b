/* qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention (per-head Q/K norms, NEOX RoPE) with a
 * mixture of experts in every layer's FFN: the router's softmax over all experts, the top
 * expert_used_count of them, their weights renormalized to sum 1 (as llama.cpp always does for it; the
 * files have no expert_weights_norm key), SwiGLU experts of width expert_feed_forward_length. No
 * shared experts (those are qwen2moe's). */
#include "arch.h"

extern const woolly_arch woolly_arch_qwen3;

#define INT_KEY(k, f) .key = k, .type = WOOLLY_KEY_INT, .field = WOOLLY_HP(f)

static const woolly_arch_key KEYS[] = {
    {INT_KEY("expert_count", n_expert), .required = true, .lo = 1, .hi = WOOLLY_MAX_EXPERTS},
    {INT_KEY("expert_used_count", n_expert_used), .required = true, .lo = 0, .hi = WOOLLY_MAX_EXPERTS},
    {INT_KEY("expert_feed_forward_length", n_ff_exp), .def = WOOLLY_DIM(n_ff), .lo = 1, .hi = 1 << 30},
};

const woolly_arch woolly_arch_qwen3moe = {
    .name = "qwen3moe",
    .base = &woolly_arch_qwen3,
    .keys = KEYS,
    .n_keys = sizeof KEYS / sizeof KEYS[0],
    .rope = WOOLLY_ROPE_NEOX,
    .steps = {.qk_norm = true, .moe_ffn = true},
};
