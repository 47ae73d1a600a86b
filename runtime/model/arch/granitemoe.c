/* granitemoe (Granite 3.x MoE: 1B-A400M, 3B-A800M): granite's decoder and scales (embedding, residual,
 * attention, logit) around a mixture of experts in every layer's FFN, llama's layout of it (Mixtral's:
 * expert_count, expert_used_count, experts as wide as feed_forward_length): softmax over all experts,
 * the top expert_used_count, their weights renormalized to sum 1; the residual scale multiplies the
 * experts' weighted sum. No shared experts (those are granitemoeshared's, another architecture). */
#include "arch.h"

extern const woolly_arch woolly_arch_granite;

const woolly_arch woolly_arch_granitemoe = {
    .name = "granitemoe",
    .base = &woolly_arch_granite,
    .rope = WOOLLY_ROPE_ADJACENT,
    .steps = {.moe_ffn = true},
};
