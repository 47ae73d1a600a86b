/* Model quantization: which type each tensor gets in a file type ("mix") such as Q4_K_M, and the
 * streaming file-to-file quantizer behind `woolly quantize`. */
#ifndef WOOLLY_QUANTIZE_H
#define WOOLLY_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "wtype.h"

/* File types, numbered as llama.cpp's general.file_type. */
enum woolly_ftype {
    WOOLLY_FTYPE_F32 = 0,
    WOOLLY_FTYPE_F16 = 1,
    WOOLLY_FTYPE_BF16 = 32,
    /* the 32-value mixes: the type itself, Q6_K for the output matrix, IQ4_NL with more bits (Q5_K) for
     * some attn_v and ffn_down, as llama.cpp chooses (quant_mix.c, legacy_mix_type) */
    WOOLLY_FTYPE_Q4_0 = 2,
    WOOLLY_FTYPE_Q4_1 = 3,
    WOOLLY_FTYPE_Q5_0 = 8,
    WOOLLY_FTYPE_Q5_1 = 9,
    WOOLLY_FTYPE_IQ4_NL = 25,
    WOOLLY_FTYPE_Q8_0 = 7,
    WOOLLY_FTYPE_Q4_K_M = 15,
    WOOLLY_FTYPE_Q6_K = 18,
    WOOLLY_FTYPE_Q2_K = 10,
    WOOLLY_FTYPE_Q3_K_S = 11,
    WOOLLY_FTYPE_Q3_K_M = 12,
    WOOLLY_FTYPE_Q3_K_L = 13,
    WOOLLY_FTYPE_Q5_K_M = 17,
    WOOLLY_FTYPE_IQ4_XS = 30,
};

/* "Q4_K_M", "Q6_K", "Q8_0", "F16", "BF16", "F32", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q5_K_M", "IQ4_XS"
 * (case-sensitive); -1 if unknown. */
int woolly_ftype_from_name(const char *name);
const char *woolly_ftype_name(enum woolly_ftype f);

/* What the mix needs to know about the whole model. */
typedef struct woolly_mix_model {
    int n_layer;    /* for the attn_v / ffn_down rule of Q4_K_M */
    bool tied_embd; /* no output.weight: token_embd.weight is also the output matrix */
    int n_expert;   /* experts per layer (0: not a mixture), for the 8-expert rule of Q4_K_M */
    int n_gqa;      /* query heads per KV head (0 or 1: none), for the attn_v rules of Q2_K and IQ4_XS */
    bool imatrix;   /* quantizing with an importance matrix: llama.cpp's ffn_down rules of IQ4_NL, IQ4_XS,
                     * Q4_0 and Q5_0 change with it */
} woolly_mix_model;

/* The type tensor `name` (n_dims dims, ne[0] the row length) gets in file type f. 1-D tensors (norms)
 * stay F32. Q4_K_M follows llama.cpp's rule: Q6_K for output.weight (and token_embd.weight when the
 * embeddings are tied) and for attn_v / ffn_down in layers i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2;
 * Q4_K for the other matrices (a mixture's ffn_down_exps counts as an ffn_down; its router,
 * ffn_gate_inp, stays F32). A mixture of exactly 8 experts (Mixtral's shape) also gets Q8_0 for attn_k
 * and attn_v and Q5_K for attn_output, as llama.cpp gives it: small tensors beside the experts. A row length
 * the chosen block does not divide falls back to Q8_0 (if it is a multiple of 32), else F16; then `note` (if
 * not NULL) says so, otherwise it is set to "".
 * Q2_K, Q3_K_S/M/L, Q5_K_M and IQ4_XS follow llama.cpp's rules for those mixes (llama-quant.cpp, with
 * its changes for an importance matrix when m->imatrix): Q6_K for the output matrix; attn_v, ffn_down and
 * attn_output by layer, model shape (n_gqa, 8 experts) and mix, as written in quant_mix.c; the other matrices
 * the mix's own type. */
enum woolly_type woolly_mix_type(enum woolly_ftype f, const char *name, uint32_t n_dims, const uint64_t *ne,
                                 const woolly_mix_model *m, char *note, size_t note_size);

typedef struct woolly_quantize_params {
    int n_threads;          /* <= 0: the number of online CPUs */
    bool quiet;             /* no progress on stderr */
    const char *imatrix;    /* NULL, or an importance matrix file (imatrix_read.h) weighing each matrix's
                             * rounding errors by its columns' mean square input; matrices it lacks are
                             * quantized unweighted, with a note */
    bool act_scales;        /* with imatrix: activation-aware scales folded into the norms (act_scales.h) */
    float act_scales_alpha; /* > 0: that alpha for every group instead of the search (tests) */
} woolly_quantize_params;

/* Reads the GGUF at `in` and writes `out` with every tensor converted by the mix of `f`, all metadata
 * kept (general.file_type set to f, general.quantization_version to 2). Tensor by tensor: memory use
 * is bounded by a few MB beyond the mapped input (and the importance matrix, if any). An importance
 * matrix whose entry for a tensor has another shape is an error naming the tensor, before anything is
 * written. */
int woolly_quantize_file(const char *in, const char *out, enum woolly_ftype f,
                         const woolly_quantize_params *p, woolly_error *err);

#endif
