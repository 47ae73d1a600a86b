/* granite (IBM Granite 3.x): llama's decoder with four scales: the token embeddings multiplied by
 * embedding_scale, each block's output by residual_scale before its residual add, q.k by
 * attention.scale (instead of 1/sqrt(head_dim)), and the logits divided by logit_scale. */
#include "arch.h"

extern const woolly_arch woolly_arch_llama;

#define SCALE(k, f) .key = k, .type = WOOLLY_KEY_FLOAT, .field = WOOLLY_HP(f)

/* Absent, each keeps the plain decoder's value (1, and 1/sqrt(head_dim) for attention.scale). */
static const woolly_arch_key KEYS[] = {
    {SCALE("embedding_scale", embedding_scale)},
    {SCALE("residual_scale", residual_scale)},
    {SCALE("attention.scale", attention_scale)},
    {SCALE("logit_scale", logit_scale)},
};

const woolly_arch woolly_arch_granite = {
    .name = "granite",
    .base = &woolly_arch_llama,
    .keys = KEYS,
    .n_keys = sizeof KEYS / sizeof KEYS[0],
    .rope = WOOLLY_ROPE_ADJACENT,
};
