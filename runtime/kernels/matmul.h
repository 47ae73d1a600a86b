/* The runtime side of a matrix multiplication: pick the kernels once, then per call pack the
 * activations into the format the kernel reads and split the weight rows across the thread pool.
 *
 *   y[t][r] = sum_i x[t][i] * W[r][i]     t < m tokens, r < W.rows
 *
 * A plan holds, per weight type, the activation format and the two registry kernels (GEMV for one
 * token, GEMM for a batch). Today every plan is F32 activations, for which packing is the identity and
 * the kernel reads the caller's floats directly; an F16 or Q8 plan packs into the context's scratch
 * buffer first (woolly_act_pack) and otherwise runs the same code. */
#ifndef WOOLLY_MATMUL_H
#define WOOLLY_MATMUL_H

#include "error.h"
#include "kernels.h"
#include "registry.h"
#include "threadpool.h"
#include "wtype.h"

/* A weight matrix in the mapping: [rows][cols] in its GGUF type. */
typedef struct woolly_matrix {
    const void *data;
    enum woolly_type type;
    int64_t rows, cols;
    size_t row_bytes;
    const char *name; /* the tensor's name, for messages */
} woolly_matrix;

typedef struct woolly_matmul_plan {
    enum woolly_act act;       /* activation format both kernels read */
    const woolly_kernel *gemv; /* m == 1 (decode) */
    const woolly_kernel *gemm; /* m >= 2 (prompt batches) */
} woolly_matmul_plan;

/* Chooses the kernels for weights of type `wtype` and activations `act` from the registry. Fails
 * with a message if a slot has no kernel or `act` has no packer. */
int woolly_matmul_plan_init(woolly_matmul_plan *p, enum woolly_type wtype, enum woolly_act act,
                            woolly_error *err);

/* Bytes of one packed row of k activations (k a multiple of 32 for Q8), 0 if impossible. */
size_t woolly_act_row_bytes(enum woolly_act act, int64_t k);
const char *woolly_act_name(enum woolly_act act);

/* Packs rows [t0, t1) of x (k floats per row, x_stride floats apart) into dst (row_bytes apart).
 * F32 copies; F16 rounds to nearest even; Q8 takes one scale per 32 values, d = max|x| / 127,
 * q = round(x / d), s = d * sum(q). */
void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes);

/* y = x W^T for m rows of x (W.cols floats each, contiguous) into y (y_stride floats apart). `pack` is
 * scratch of at least m * woolly_act_row_bytes(plan->act, W.cols) bytes when plan->act is not F32
 * (unused, may be NULL, for F32). Allocates nothing. */
void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack);

#endif
