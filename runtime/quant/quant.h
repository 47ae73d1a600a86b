/* Reference conversions between float and every weight format the engine computes with: plain C, no
 * SIMD, written for clarity. They are the oracle that kernels are tested against, and what the
 * quantizer and the synthesizer use. */
#ifndef WOOLLY_QUANT_H
#define WOOLLY_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h" /* the half-precision conversions, woolly_f32_to_bf16 among them */
#include "wtype.h"

/* F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL. */
bool woolly_can_dequantize(enum woolly_type t);
/* F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL. */
bool woolly_can_quantize(enum woolly_type t);

/* n elements (a multiple of the block) from `src` in format t to floats. Returns 0, or -1 if t cannot
 * be dequantized or n is not a multiple of the block. */
int woolly_dequantize_row(enum woolly_type t, const void *src, float *dst, int64_t n);

/* n floats to format t; returns the bytes written (woolly_row_bytes(t, n)), 0 if unsupported. K-quants
 * search scale and minimum by least squares, not plain min/max. */
size_t woolly_quantize_row(enum woolly_type t, const float *src, void *dst, int64_t n);

/* The same, each value's rounding error weighed by the importance qw[i] of its column (n values: the mean
 * square input of each column, from an importance matrix), as llama.cpp's quantizers use one; qw NULL is
 * woolly_quantize_row. Every block format but Q8_0 (and the plain formats) uses the weights. */
size_t woolly_quantize_row_weighted(enum woolly_type t, const float *src, void *dst, int64_t n,
                                    const float *qw);

#endif
