/* Importance statistics of a model's weight matrices (llama.cpp's "imatrix"): per matrix, the sum over
 * every input row it multiplied of each column's square, and the number of rows; per expert for a
 * mixture of experts' matrices. A quantizer weighs each column's rounding error by its mean square, so
 * that the columns that carry large activations keep more precision. The public interface is woolly.h's
 * woolly_imatrix_*; the forward pass feeds it through woolly_imatrix_add. */
#ifndef WOOLLY_IMATRIX_H
#define WOOLLY_IMATRIX_H

#include <stdint.h>

#include "matmul.h"
#include "woolly.h"

/* Called by the forward pass before it multiplies matrix w by the n rows x (w->cols floats each). A
 * matrix the statistics leave out (the output) is ignored; so is a repeat of the same rows for another
 * view of the same tensor within one pass (Phi-3's fused attn_qkv, multiplied as three row views). */
void woolly_imatrix_add(woolly_imatrix *im, const woolly_matrix *w, const float *x, int32_t n);

/* A new forward pass begins (repeats are told apart per pass). */
void woolly_imatrix_next_pass(woolly_imatrix *im);

#endif
