/* phi3 (Phi-3, Phi-3.5-mini): llama's decoder with its Q, K and V in one matrix (attn_qkv: the query
 * rows, then the key rows, then the value rows) and its gate and up in one (ffn_up: the first n_ff rows
 * the gate), bound as views of their rows (arch.h's parts), so the forward pass multiplies ordinary
 * matrices. RoPE on the halves (NEOX); the 128k-context files carry two sets of frequency divisors,
 * rope_factors_long and rope_factors_short, of which a context longer than
 * rope.scaling.original_context_length uses the long ones (rope.c), with rope.scaling.attn_factor. */
#include "arch.h"

extern const woolly_arch woolly_arch_decoder;

#define GLOBAL(f) .slot = (uint16_t)offsetof(woolly_weights, f)
#define BLOCK(f) .per_block = true, .slot = (uint16_t)offsetof(woolly_layer, f)
#define PART(rows, f)                                                                                        \
    {                                                                                                        \
        rows, (uint16_t)offsetof(woolly_layer, f)                                                            \
    }
#define OUTPUT_CLASSES (WOOLLY_CLASS_BIT(WOOLLY_TOKENS_1) | WOOLLY_CLASS_BIT(WOOLLY_TOKENS_SMALL))

static const woolly_arch_tensor TENSORS[] = {
    {"token_embd.weight", GLOBAL(token_embd), .kind = WOOLLY_TENSOR_EMBEDDING,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_vocab)}},
    {"output_norm.weight", GLOBAL(output_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"output.weight", GLOBAL(output), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_vocab)}, .optional = true, .tied = "token_embd.weight",
     .classes = OUTPUT_CLASSES},
    {"rope_factors_long.weight", GLOBAL(rope_long), .kind = WOOLLY_TENSOR_F32_VECTOR,
     .ne = {WOOLLY_DIM_DIV(n_rot, 2)}, .optional = true},
    {"rope_factors_short.weight", GLOBAL(rope_short), .kind = WOOLLY_TENSOR_F32_VECTOR,
     .ne = {WOOLLY_DIM_DIV(n_rot, 2)}, .optional = true},

    {"attn_norm.weight", BLOCK(attn_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"attn_qkv.weight", .per_block = true, .kind = WOOLLY_TENSOR_MATRIX, .ne = {WOOLLY_DIM(n_embd)},
     .classes = WOOLLY_CLASSES_ALL,
     .parts = {PART(WOOLLY_DIM2(n_head, head_dim), wq), PART(WOOLLY_DIM2(n_head_kv, head_dim), wk),
               PART(WOOLLY_DIM2(n_head_kv, head_dim), wv)},
     .n_parts = 3},
    {"attn_output.weight", BLOCK(wo), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM2(n_head, head_dim), WOOLLY_DIM(n_embd)}, .classes = WOOLLY_CLASSES_ALL},
    {"ffn_norm.weight", BLOCK(ffn_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"ffn_up.weight", .per_block = true, .kind = WOOLLY_TENSOR_MATRIX, .ne = {WOOLLY_DIM(n_embd)},
     .classes = WOOLLY_CLASSES_ALL, .parts = {PART(WOOLLY_DIM(n_ff), w_gate), PART(WOOLLY_DIM(n_ff), w_up)},
     .n_parts = 2},
    {"ffn_down.weight", BLOCK(w_down), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_ff), WOOLLY_DIM(n_embd)}, .classes = WOOLLY_CLASSES_ALL},
};

const woolly_arch woolly_arch_phi3 = {
    .name = "phi3",
    .base = &woolly_arch_decoder,
    .tensors = TENSORS,
    .n_tensors = sizeof TENSORS / sizeof TENSORS[0],
    .rope = WOOLLY_ROPE_NEOX,
};
