/* `woolly synth`: random-weight models of a given shape, written as GGUF with the key and tensor names
 * of llama.cpp's files (the layout of the reference files in the shared test data), quantized on the
 * way and streamed tensor by tensor. The output is a function of the configuration alone: the same
 * configuration and seed give the same bytes, whatever the number of threads. */
#ifndef WOOLLY_SYNTH_H
#define WOOLLY_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "quantize.h"

typedef struct woolly_synth_config {
    char arch[16]; /* llama, granite, qwen2, qwen3, gemma3 or phi3 (woolly_synth_arch_names) */
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx;
    int64_t head_dim; /* of a query/key head; 0: n_embd / n_head */
    /* Sliding-window attention (gemma3; llama as Mistral writes it): the window, 0 for none, and which
     * layers slide (gemma3: all but every swa_pattern-th); rope_base_swa is the sliding layers' RoPE base. */
    int64_t n_swa, swa_pattern;
    float rope_base_swa;
    int64_t n_vocab; /* with a vocab file: taken from it (0 here means "whatever it has") */
    float rope_base;
    float norm_eps;
    bool tied_embd; /* no output.weight: token_embd.weight doubles as the output matrix */
    /* granite and granitemoe only */
    float embedding_scale, residual_scale, attention_scale, logit_scale;
    /* A mixture of experts in every layer's FFN in place of the dense one (qwen3moe and granitemoe
     * always; llama with n_expert > 0 is Mixtral's layout): n_expert SwiGLU experts, n_expert_used of
     * them per token. Each expert is n_ff_exp wide in qwen3moe (0: n_ff), n_ff wide in the others. */
    int64_t n_expert, n_expert_used, n_ff_exp;

    const char *vocab_path;    /* GGUF whose tokenizer.* keys are copied; NULL: the built-in BPE */
    const char *chat_template; /* granite|llama2|llama3|chatml|phi3; NULL: none, phi3's with the built-in vocabulary */
    enum woolly_ftype ftype;
    uint64_t seed;
    int n_threads; /* <= 0: the number of CPUs (does not change the output) */
    bool quiet;
} woolly_synth_config;

/* The presets: "tiny" (the shape of tiny-llama-q4_k_m.gguf), "tiny-granite" (of
 * tiny-granite-q4_k_m.gguf), "llama-1b", "granite-8b" (of granite-3.3-8b-instruct), the shapes of
 * the families users download most: "qwen2.5-1.5b", "qwen3-4b", "gemma3-1b", "phi3-mini" (Phi-3/3.5-mini)
 * and "mistral-7b" (Mistral 7B v0.3), and mixtures of experts: "granitemoe-3b" (Granite 3.0
 * 3B-A800M) and "qwen3moe-30b-a3b-12l" (Qwen3-30B-A3B's layers, 12 of its 48, so that the file, about
 * 5 GB, fits beside everything else on a 24 GiB machine). Fills every field (ftype Q4_K_M, seed 0).
 * Fails on an unknown name. */
int woolly_synth_preset(const char *name, woolly_synth_config *c, woolly_error *err);
const char *woolly_synth_preset_names(void);
/* The architectures synth writes, joined by '|'. */
const char *woolly_synth_arch_names(void);
/* The head dimension c describes (head_dim, or n_embd / n_head). */
int64_t woolly_synth_head_dim(const woolly_synth_config *c);

/* Checks ranges and consistency (n_head divides n_embd, n_head_kv divides n_head, even head size,
 * known arch / template, vocab size for the built-in tokenizer...). */
int woolly_synth_validate(const woolly_synth_config *c, woolly_error *err);

/* One tensor of the file a configuration gives: its name, shape (ne[0] the row length; ne[1] 1 for a
 * vector) and type. */
typedef struct woolly_synth_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[3]; /* ne[2]: a mixture's experts (1 otherwise) */
    enum woolly_type type;
} woolly_synth_tensor;

/* The tensor table of the model `c` describes, in file order, without writing anything: at most cap
 * entries go to `out`; returns how many tensors there are (n_vocab as configured: a vocabulary file is
 * not read). */
size_t woolly_synth_tensor_table(const woolly_synth_config *c, woolly_synth_tensor *out, size_t cap);

/* Validates, then writes the model to `out`. */
int woolly_synth_write(const woolly_synth_config *c, const char *out, woolly_error *err);

#endif
