/* Activation-aware scales for `woolly quantize --imatrix FILE --act-scales`: per layer, the matrices that
 * read one norm's output (attn_q, attn_k and attn_v, or attn_qkv, after attn_norm; ffn_gate and ffn_up
 * after ffn_norm) get their columns multiplied by a scale s[c] and the norm's weight divided by it, so that
 * the model computes the same function before rounding; the rounding then treats the columns whose inputs
 * are large (the important ones) with finer steps. s[c] = imp[c]^(alpha / 2), imp the importance matrix's
 * mean square input of column c, normalized to a geometric middle of 1; alpha is searched per group on a
 * grid from 0 (no scaling) to 1, keeping the one whose rounding leaves the lowest output error on a sample of
 * the group's rows, sum over rows and columns of imp[c] * (w - dequantized(w * s) / s)^2, the error the
 * importance-weighted quantizers minimize. A group keeps s = 1 unless a scale lowers that error.
 *
 * Only where a norm's output feeds those matrices alone: the dense decoders whose GGUF norms multiply as
 * stored (llama, granite, qwen2, qwen3, gemma3, phi3); mixtures of experts (a router reads the norm's
 * output too) and other architectures are left as they are, with a note. */
#ifndef WOOLLY_ACT_SCALES_H
#define WOOLLY_ACT_SCALES_H

#include <stddef.h>

#include "error.h"
#include "gguf.h"
#include "imatrix_read.h"
#include "quant_stream.h"

typedef struct woolly_act_scales woolly_act_scales;

typedef struct woolly_act_scales_summary {
    int groups;           /* norm-and-matrices groups found */
    int scaled;           /* of those, given scales (the others kept s = 1) */
    double gain;          /* the scaled groups' output error over the unscaled one's, summed (1: no change) */
    const char *why_none; /* when groups == 0: why (the architecture, no importance data...) */
} woolly_act_scales_summary;

/* Searches the scales of every group of g's tensors (plan[i] is tensor i's output, as planned by the
 * quantizer, with its importance attached where im has it) and rewrites the plans of the groups it
 * scales: the matrices' rows are multiplied by s and weighed by imp / s^2, the norm's divided by s, and
 * notes[i] says so. alpha >= 0 forces that alpha on every group (tests); < 0 searches. The returned object
 * owns the scales the plans point at: free it after the plans are written. NULL with a message on error. */
woolly_act_scales *woolly_act_scales_apply(const gguf_file *g, const woolly_imatrix_file *im,
                                           woolly_stream_tensor *plan, char (*notes)[160], int n_threads,
                                           double alpha, woolly_act_scales_summary *summary,
                                           woolly_error *err);
void woolly_act_scales_free(woolly_act_scales *s);

#endif
