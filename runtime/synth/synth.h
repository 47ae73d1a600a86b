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
    char arch[16]; /* "llama" or "granite" */
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx;
    int64_t n_vocab; /* with a vocab file: taken from it (0 here means "whatever it has") */
    float rope_base;
    float norm_eps;
    bool tied_embd; /* no output.weight: token_embd.weight doubles as the output matrix */
    /* granite only */
    float embedding_scale, residual_scale, attention_scale, logit_scale;

    const char *vocab_path;    /* GGUF whose tokenizer.* keys are copied; NULL: the built-in BPE */
    const char *chat_template; /* granite|llama2|llama3|chatml, or NULL */
    enum woolly_ftype ftype;
    uint64_t seed;
    int n_threads; /* <= 0: the number of CPUs (does not change the output) */
    bool quiet;
} woolly_synth_config;

/* The presets: "tiny" (the shape of tiny-llama-q4_k_m.gguf), "tiny-granite" (of
 * tiny-granite-q4_k_m.gguf), "llama-1b", "granite-8b" (of granite-3.3-8b-instruct). Fills every field
 * (ftype Q4_K_M, seed 0). Fails on an unknown name. */
int woolly_synth_preset(const char *name, woolly_synth_config *c, woolly_error *err);
const char *woolly_synth_preset_names(void);

/* Checks ranges and consistency (n_head divides n_embd, n_head_kv divides n_head, even head size,
 * known arch / template, vocab size for the built-in tokenizer...). */
int woolly_synth_validate(const woolly_synth_config *c, woolly_error *err);

/* One tensor of the file a configuration gives: its name, shape (ne[0] the row length; ne[1] 1 for a
 * vector) and type. */
typedef struct woolly_synth_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[2];
    enum woolly_type type;
} woolly_synth_tensor;

/* The tensor table of the model `c` describes, in file order, without writing anything: at most cap
 * entries go to `out`; returns how many tensors there are (n_vocab as configured: a vocabulary file is
 * not read). */
size_t woolly_synth_tensor_table(const woolly_synth_config *c, woolly_synth_tensor *out, size_t cap);

/* Validates, then writes the model to `out`. */
int woolly_synth_write(const woolly_synth_config *c, const char *out, woolly_error *err);

#endif
