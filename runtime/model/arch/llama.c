/* llama: the plain decoder of forward.c's top comment (Llama 1-3, Mistral and the many models
 * converted to its layout). Pre-norm blocks, grouped-query attention, RoPE on adjacent pairs, a SwiGLU
 * feed-forward, no biases. Its hyperparameter keys are every decoder's (woolly_arch_decoder: the base of
 * a family whose tensors differ, phi3). */
#include "arch.h"

#define INT_KEY(k, f) .key = k, .type = WOOLLY_KEY_INT, .field = WOOLLY_HP(f)
#define FLOAT_KEY(k, f) .key = k, .type = WOOLLY_KEY_FLOAT, .field = WOOLLY_HP(f)
#define BIG (1 << 30)

static const woolly_arch_key KEYS[] = {
    {INT_KEY("embedding_length", n_embd), .required = true, .lo = 1, .hi = BIG},
    {INT_KEY("block_count", n_layer), .required = true, .lo = 1, .hi = 100000},
    {INT_KEY("attention.head_count", n_head), .required = true, .lo = 1, .hi = 100000},
    {INT_KEY("attention.head_count_kv", n_head_kv), .def = WOOLLY_DIM(n_head), .lo = 1,
     .hi_field = WOOLLY_HP(n_head)},
    {INT_KEY("feed_forward_length", n_ff), .required = true, .lo = 1, .hi = BIG},
    {INT_KEY("context_length", n_ctx_train), .required = true, .lo = 1, .hi = BIG},
    {INT_KEY("attention.key_length", head_dim), .def = WOOLLY_DIM_PER(n_embd, n_head), .lo = 1, .hi = BIG},
    {INT_KEY("attention.value_length", head_dim_v), .def = WOOLLY_DIM(head_dim), .lo = 1, .hi = BIG},
    {INT_KEY("rope.dimension_count", n_rot), .def = WOOLLY_DIM(head_dim), .lo = 2,
     .hi_field = WOOLLY_HP(head_dim)},
    {FLOAT_KEY("rope.freq_base", rope_base), .def_f = 10000.0f},
    {FLOAT_KEY("attention.layer_norm_rms_epsilon", rms_eps), .required = true},
};

/* llama's own, beside every decoder's. */
static const woolly_arch_key LLAMA_KEYS[] = {
    /* Mistral's sliding window, where a file gives one: every layer slides (swa_pattern 0). llama.cpp's
     * llama graph reads no such key (its converter writes none for llama files, and Mistral 7B v0.1, whose
     * config has a 4096 window, runs there with full attention): a file that gives a window is run with it,
     * as the model was trained; 0 or absent: none. */
    {INT_KEY("attention.sliding_window", n_swa), .lo = 0, .hi = BIG},
    /* Mixtral's layout: expert_count > 0 puts a mixture of experts (each as wide as feed_forward_length)
     * in place of every layer's dense FFN; absent or 0, the file is dense. */
    {INT_KEY("expert_count", n_expert), .lo = 0, .hi = WOOLLY_MAX_EXPERTS},
    {INT_KEY("expert_used_count", n_expert_used), .lo = 0, .hi = WOOLLY_MAX_EXPERTS},
};

#define GLOBAL(f) .slot = (uint16_t)offsetof(woolly_weights, f)
#define BLOCK(f) .per_block = true, .slot = (uint16_t)offsetof(woolly_layer, f)
#define OUTPUT_CLASSES (WOOLLY_CLASS_BIT(WOOLLY_TOKENS_1) | WOOLLY_CLASS_BIT(WOOLLY_TOKENS_SMALL))

/* In the order of the forward pass; the matrices' order is the model's matrix list's. The output
 * matrix runs for one token (a prompt's logits are the last token's) or a few (a server's step asks for
 * the logits of each sequence it decodes); a layer's matrices for every batch. */
static const woolly_arch_tensor TENSORS[] = {
    {"token_embd.weight", GLOBAL(token_embd), .kind = WOOLLY_TENSOR_EMBEDDING,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_vocab)}},
    {"output_norm.weight", GLOBAL(output_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"output.weight", GLOBAL(output), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_vocab)}, .optional = true, .tied = "token_embd.weight",
     .classes = OUTPUT_CLASSES},
    {"rope_freqs.weight", GLOBAL(rope_freqs), .kind = WOOLLY_TENSOR_F32_VECTOR,
     .ne = {WOOLLY_DIM_DIV(n_rot, 2)}, .optional = true},

    {"attn_norm.weight", BLOCK(attn_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"attn_q.weight", BLOCK(wq), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM2(n_head, head_dim)}, .classes = WOOLLY_CLASSES_ALL},
    {"attn_k.weight", BLOCK(wk), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM2(n_head_kv, head_dim)}, .classes = WOOLLY_CLASSES_ALL},
    {"attn_v.weight", BLOCK(wv), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM2(n_head_kv, head_dim)}, .classes = WOOLLY_CLASSES_ALL},
    {"attn_output.weight", BLOCK(wo), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM2(n_head, head_dim), WOOLLY_DIM(n_embd)}, .classes = WOOLLY_CLASSES_ALL},
    {"ffn_norm.weight", BLOCK(ffn_norm), .kind = WOOLLY_TENSOR_VECTOR, .ne = {WOOLLY_DIM(n_embd)}},
    {"ffn_gate.weight", BLOCK(w_gate), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_ff)}, .classes = WOOLLY_CLASSES_ALL, .when = WOOLLY_WHEN_DENSE},
    {"ffn_up.weight", BLOCK(w_up), .kind = WOOLLY_TENSOR_MATRIX, .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_ff)},
     .classes = WOOLLY_CLASSES_ALL, .when = WOOLLY_WHEN_DENSE},
    {"ffn_down.weight", BLOCK(w_down), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_ff), WOOLLY_DIM(n_embd)}, .classes = WOOLLY_CLASSES_ALL, .when = WOOLLY_WHEN_DENSE},
    /* A mixture of experts (moe.c), in a file whose expert_count is > 0: the router, then each expert's
     * SwiGLU matrices, n_expert of each in one 3-D tensor. Each expert multiplies the few tokens routed
     * to it (one, decoding), so the small classes are the ones that count. */
    {"ffn_gate_inp.weight", BLOCK(router), .kind = WOOLLY_TENSOR_MATRIX,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_expert)}, .classes = WOOLLY_CLASSES_ALL,
     .when = WOOLLY_WHEN_EXPERTS},
    {"ffn_gate_exps.weight", BLOCK(gate_exps), .kind = WOOLLY_TENSOR_EXPERTS,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_ff_exp), WOOLLY_DIM(n_expert)}, .classes = WOOLLY_CLASSES_ALL,
     .when = WOOLLY_WHEN_EXPERTS},
    {"ffn_up_exps.weight", BLOCK(up_exps), .kind = WOOLLY_TENSOR_EXPERTS,
     .ne = {WOOLLY_DIM(n_embd), WOOLLY_DIM(n_ff_exp), WOOLLY_DIM(n_expert)}, .classes = WOOLLY_CLASSES_ALL,
     .when = WOOLLY_WHEN_EXPERTS},
    {"ffn_down_exps.weight", BLOCK(down_exps), .kind = WOOLLY_TENSOR_EXPERTS,
     .ne = {WOOLLY_DIM(n_ff_exp), WOOLLY_DIM(n_embd), WOOLLY_DIM(n_expert)}, .classes = WOOLLY_CLASSES_ALL,
     .when = WOOLLY_WHEN_EXPERTS},
};

/* Keys only: not an architecture of the registry. */
const woolly_arch woolly_arch_decoder = {
    .name = "decoder",
    .keys = KEYS,
    .n_keys = sizeof KEYS / sizeof KEYS[0],
};

/* The llama layer's tensors, which qwen2, qwen3 and gemma3 build on: not an architecture of the
 * registry, and without llama's own window key (those families' files do not slide by it). */
const woolly_arch woolly_arch_llama_layer = {
    .name = "llama",
    .base = &woolly_arch_decoder,
    .tensors = TENSORS,
    .n_tensors = sizeof TENSORS / sizeof TENSORS[0],
    .rope = WOOLLY_ROPE_ADJACENT,
};

const woolly_arch woolly_arch_llama = {
    .name = "llama",
    .base = &woolly_arch_llama_layer,
    .keys = LLAMA_KEYS,
    .n_keys = sizeof LLAMA_KEYS / sizeof LLAMA_KEYS[0],
    .rope = WOOLLY_ROPE_ADJACENT,
};
