/* The runtime side of a matrix multiplication: pick the kernels once per matrix, then per call pack the
 * activations into the format the kernels read and split the weight rows across the thread pool.
 *
 *   y[t][r] = sum_i x[t][i] * W[r][i]     t < m tokens, r < W.rows
 *
 * A matrix carries its weight layout and activation format, both chosen when the model is loaded (a
 * tensor is repacked at most once, for the kernels that will read it). A plan holds the two registry
 * kernels for it (GEMV for one token, GEMM for a batch) and the blocking parameters a tuning profile
 * may set. Several matrices that read the same input (Q, K and V; gate and up) run as one call: the
 * input is packed once and all their rows are split across the threads in one dispatch. */
#ifndef WOOLLY_MATMUL_H
#define WOOLLY_MATMUL_H

#include "error.h"
#include "kernels.h"
#include "registry.h"
#include "threadpool.h"
#include "wtype.h"

/* A weight matrix: [rows][cols] in its type and layout. */
typedef struct woolly_matrix {
    const void *data;            /* in `layout` */
    enum woolly_type type;
    int64_t rows, cols;
    size_t row_bytes;            /* bytes per row in the layout: the kernels' w_row_bytes */
    const woolly_layout *layout; /* NULL: GGUF rows */
    enum woolly_act act;         /* the activation format its kernels read */
    const char *name;            /* the tensor's name, for messages */
    int32_t id;                  /* the owner's index for it (a model's matrix list), -1 if none */
} woolly_matrix;

/* A GGUF-row matrix description (layout NULL, F32 activations) of `data`. */
woolly_matrix woolly_matrix_rows(const void *data, enum woolly_type type, int64_t rows, int64_t cols,
                                 const char *name);

typedef struct woolly_matmul_plan {
    const woolly_kernel *gemv; /* m == 1 (decode) */
    const woolly_kernel *gemm; /* m >= 2 (prompt batches) */
    woolly_pack_fn pack;       /* the activation packer (NULL for F32) */
    /* Blocking, all 0 by default (= no blocking): rows per kernel call within a thread's share
     * (a multiple of the kernel's tile), tokens per GEMM call, columns (k) per call (a multiple of 256),
     * and the kernels' prefetch distance in bytes. */
    int32_t rows_per_call, tokens_per_call, k_per_call, prefetch;
} woolly_matmul_plan;

/* Chooses the kernels for matrix w (its type, layout and activation format) from the registry. Fails
 * with a message if a slot has no kernel. */
int woolly_matmul_plan_init(woolly_matmul_plan *p, const woolly_matrix *w, woolly_error *err);

/* Bytes of one packed row of k activations (k a multiple of 32 for Q8), 0 if impossible. */
size_t woolly_act_row_bytes(enum woolly_act act, int64_t k);

/* Packs rows [t0, t1) of x (k floats per row, x_stride floats apart) into dst (row_bytes apart) with
 * the active level's packer (F32 copies). */
void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes);

/* One product of a call: y (y_stride floats apart per token) = x W^T. */
typedef struct woolly_matmul_out {
    const woolly_matrix *w;
    const woolly_matmul_plan *plan;
    float *y;
    size_t y_stride;
} woolly_matmul_out;

/* The products of n matrices that all read x (m rows of cols floats each, contiguous; the same cols and
 * activation format for all). `pack` is scratch of at least m * woolly_act_row_bytes(act, cols) bytes
 * when their format is not F32 (unused, may be NULL, for F32). Allocates nothing. */
void woolly_matmul_n(woolly_threadpool *pool, const woolly_matmul_out *outs, int n, const float *x, int64_t m,
                     void *pack);

/* One matrix: woolly_matmul_n with n = 1. */
void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack);

#endif
