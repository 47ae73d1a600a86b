/* The runtime side of a matrix multiplication: pick the kernels once per matrix, then per call pack the
 * activations into the format the kernels read and split the weight rows across the thread pool.
 *
 *   y[t][r] = sum_i x[t][i] * W[r][i]     t < m tokens, r < W.rows
 *
 * A matrix carries its weight layout, chosen when the model is loaded (a tensor is repacked at most
 * once, for the kernels that will read it), and the activation format of its default kernels. A plan
 * holds, per class of batch size (1 token, 2-16, 17+), the registry kernel and the blocking of its
 * calls: the defaults, or what a tuning profile measured to be faster here. Several matrices that read
 * the same input (Q, K and V; gate and up) run as one call: the input is packed once and all their rows
 * are split across the threads in one dispatch. */
#ifndef WOOLLY_MATMUL_H
#define WOOLLY_MATMUL_H

#include <stdatomic.h>

#include "error.h"
#include "kernels.h"
#include "registry.h"
#include "threadpool.h"
#include "wtype.h"

/* A weight matrix: [rows][cols] in its type and layout. */
typedef struct woolly_matrix {
    const void *data; /* in `layout` */
    enum woolly_type type;
    int64_t rows, cols;
    size_t row_bytes;            /* bytes per row in the layout: the kernels' w_row_bytes */
    const woolly_layout *layout; /* NULL: GGUF rows */
    enum woolly_act act;         /* the activation format of its default kernels */
    const char *name;            /* the tensor's name, for messages */
    int32_t id;                  /* the owner's index for it (a model's matrix list), -1 if none */
} woolly_matrix;

/* A GGUF-row matrix description (layout NULL, F32 activations) of `data`. */
woolly_matrix woolly_matrix_rows(const void *data, enum woolly_type type, int64_t rows, int64_t cols,
                                 const char *name);

/* Batch sizes a plan, and a tuning profile, tell apart. */
enum woolly_tokens_class {
    WOOLLY_TOKENS_1 = 0,     /* one token (decode): the GEMV slot */
    WOOLLY_TOKENS_SMALL = 1, /* 2 .. WOOLLY_TOKENS_SMALL_MAX (a server batching a few requests): GEMM */
    WOOLLY_TOKENS_LARGE = 2, /* more (prompt processing): GEMM */
    WOOLLY_TOKENS_CLASSES
};
#define WOOLLY_TOKENS_SMALL_MAX 16

enum woolly_tokens_class woolly_tokens_class_of(int64_t m);
const char *woolly_tokens_class_name(enum woolly_tokens_class c); /* "1", "2-16", "17+" */
int woolly_tokens_class_from_name(const char *name); /* -1 for no class */
enum woolly_op woolly_tokens_class_op(enum woolly_tokens_class c);

/* Activation formats as bits (1u << WOOLLY_ACT_F32 ...), for the formats a choice may use. */
#define WOOLLY_ACT_MASK_ALL ((1u << WOOLLY_ACT_COUNT) - 1)
#define WOOLLY_ACT_MASK_STRICT ((1u << WOOLLY_ACT_F32) | (1u << WOOLLY_ACT_F16)) /* no int8 rounding */

/* How one class of calls runs: the kernel, and how the runtime cuts the work into kernel calls. The
 * block sizes are 0 by default (no blocking); their constraints (woolly_matmul_step_check):
 *   rows_per_call    weight rows per call within a thread's share; a multiple of the kernel's tile
 *                    (which is a multiple of the layout's group)
 *   tokens_per_call  tokens per call, GEMM classes only; a multiple of the kernel's tile; the column
 *                    tile that keeps a block of activations in cache while the weights stream past
 *   k_per_call       columns per call, a multiple of 256 (every weight block and activation block);
 *                    the calls after the first accumulate
 *   prefetch         bytes ahead in the weight stream, passed to the kernel (0: none)
 *   threads          threads that share the rows (0: as many as the work repays, at most the pool) */
typedef struct woolly_matmul_step {
    const woolly_kernel *kernel;
    int32_t rows_per_call, tokens_per_call, k_per_call, prefetch, threads;
} woolly_matmul_step;

#define WOOLLY_STEP_MAX_BLOCK (1 << 30)
#define WOOLLY_STEP_MAX_PREFETCH (1 << 20)

/* Whether `s` can run class c of a [rows][cols] matrix of `type` in `layout`: the kernel's op, weights,
 * layout, activation format (its rows must fit cols, and a packer must exist) and CPU support, and the
 * block sizes' constraints. 0, or -1 with a message. */
int woolly_matmul_step_check(const woolly_matmul_step *s, enum woolly_type type, const woolly_layout *layout,
                             int64_t cols, enum woolly_tokens_class c, woolly_error *err);

typedef struct woolly_matmul_plan {
    woolly_matmul_step step[WOOLLY_TOKENS_CLASSES];
    woolly_pack_fn pack[WOOLLY_TOKENS_CLASSES]; /* the packer of each class's activations (NULL for F32) */
} woolly_matmul_plan;

/* The activation format and layout a matrix of `type` with rows of `cols` gets by default: WOOLLY_ACT
 * where the matrix can take it, else the registry's default GEMV for its type at the active level,
 * else the best kernel whose activations fit the row (F32 always does), among the formats of
 * `act_mask`. Fails with a message if no kernel serves the type. */
int woolly_matmul_default_format(enum woolly_type type, int64_t cols, unsigned act_mask, enum woolly_act *act,
                                 const woolly_layout **layout, woolly_error *err);
/* The same, with activations in `prefer` (a WOOLLY_ACT_* format, or -1 for none) in place of the
 * default wherever the matrix can take them and a GEMV and a GEMM serve them (WOOLLY_ACT still wins). */
int woolly_matmul_preferred_format(enum woolly_type type, int64_t cols, unsigned act_mask, int prefer,
                                   enum woolly_act *act, const woolly_layout **layout, woolly_error *err);

/* The activation format of the default kernels of such a matrix whose layout is fixed (a tuning
 * profile's choice): the best GEMV on that layout among the formats of act_mask that fit, with a GEMM
 * for the same format. */
int woolly_matmul_layout_format(enum woolly_type type, int64_t cols, const woolly_layout *layout,
                                unsigned act_mask, enum woolly_act *act, woolly_error *err);

/* The kernel a plan takes for class c of a matrix of `type` in `layout` with `act` activations when no
 * tuning profile says otherwise: the registry's GEMV for one token, its small-batch GEMM for 2-16
 * (woolly_kernel_choose_small), its GEMM for more. NULL if none serves the slot. */
const woolly_kernel *woolly_matmul_default_kernel(enum woolly_tokens_class c, enum woolly_type type,
                                                  enum woolly_act act, const woolly_layout *layout);

/* The class whose step of plan p runs m tokens: woolly_tokens_class_of(m), except that a 17+ kernel that
 * pays only from more tokens (its min_tokens: a decoded panel whose fill the tokens share) leaves fewer
 * to the 2-16 step, whose kernels take any count. */
enum woolly_tokens_class woolly_matmul_plan_class(const woolly_matmul_plan *p, int64_t m);
/* That class's step. */
const woolly_matmul_step *woolly_matmul_plan_step(const woolly_matmul_plan *p, int64_t m);

/* Chooses the kernels for matrix w: for each class the tuned step if `tuned` gives one (tuned[c].kernel
 * non-NULL; checked with woolly_matmul_step_check), else the class's default kernel for the matrix's
 * type, layout and activation format (woolly_matmul_default_kernel), unblocked. `tuned` may be NULL.
 * Fails with a message if a slot has no kernel or a tuned step does not fit the matrix. */
int woolly_matmul_plan_init(woolly_matmul_plan *p, const woolly_matrix *w, const woolly_matmul_step *tuned,
                            woolly_error *err);

/* Bytes of one packed row of k activations (k a multiple of 32 for Q8), 0 if impossible. */
size_t woolly_act_row_bytes(enum woolly_act act, int64_t k);

/* The widest packed row of a plan's classes for rows of k (0 if every class reads F32). */
size_t woolly_matmul_plan_pack_bytes(const woolly_matmul_plan *p, int64_t k);

/* Packs rows [t0, t1) of x (k floats per row, x_stride floats apart) into dst (row_bytes apart) with
 * the active level's packer (F32 copies). Looks the packer up in the registry: for setup and tests. */
void woolly_act_pack(enum woolly_act act, const float *x, size_t x_stride, int64_t t0, int64_t t1, int64_t k,
                     void *dst, size_t row_bytes);

/* Packs n rows of x (k floats per row, x_stride floats apart) into dst (row_bytes apart) in the format
 * of the plan's kernel for m tokens, with the packer the plan chose (F32 copies): woolly_act_pack
 * without a registry lookup, for callers that pack inputs of their own each step (moe.c). */
void woolly_matmul_plan_pack(const woolly_matmul_plan *p, int64_t m, const float *x, size_t x_stride,
                             int64_t n, int64_t k, void *dst, size_t row_bytes);

/* Packs m rows of x (k floats per row, contiguous) into dst (row_bytes apart) with `pack` (not NULL),
 * the rows split across nth threads of the pool (one row: on the calling thread). */
void woolly_pack_rows_threaded(woolly_threadpool *pool, int nth, woolly_pack_fn pack, const float *x,
                               int64_t m, int64_t k, void *dst, size_t row_bytes);

/* One product of a call: y (y_stride floats apart per token) = x W^T. */
typedef struct woolly_matmul_out {
    const woolly_matrix *w;
    const woolly_matmul_plan *plan;
    float *y;
    size_t y_stride;
} woolly_matmul_out;

/* The products of n matrices that all read x (m rows of cols floats each, contiguous; the same cols).
 * Those whose kernels for m tokens read the same activation format run as one dispatch; otherwise
 * each runs on its own. `pack` is scratch of at least m * (widest packed row) bytes when a format is
 * not F32 (unused, may be NULL, for F32). Allocates nothing. */
void woolly_matmul_n(woolly_threadpool *pool, const woolly_matmul_out *outs, int n, const float *x, int64_t m,
                     void *pack);

/* One matrix: woolly_matmul_n with n = 1. */
void woolly_matmul(woolly_threadpool *pool, const woolly_matmul_plan *plan, const woolly_matrix *w,
                   const float *x, int64_t m, float *y, size_t y_stride, void *pack);

/* Rows [r0, r1) of one product for m tokens whose activations are already packed in the format of the
 * plan's kernel for m (xk, rows of woolly_act_row_bytes apart; x itself for F32), run on the calling
 * thread (ith of nth, for the observer) exactly as woolly_matmul_n runs them: for a caller that splits
 * the rows of several products its own way within one dispatch. r0 and r1 are multiples of the
 * kernel's tile_n, or r1 the matrix's last row. */
void woolly_matmul_rows(const woolly_matmul_out *o, int64_t m, const void *xk, int64_t r0, int64_t r1, int ith,
                        int nth);

/* How a dispatch's threads share `total` units of work (rows, or tiles of rows), as woolly_matmul_n shares
 * a product's rows: thread ith of nth first runs span(arg, u0, u1, ith, nth) on its own contiguous share
 * of the first three quarters, then takes chunks of the rest, each the next one free (next_chunk, 0 at
 * the start of the dispatch), so that a thread slowed from outside keeps no other waiting. For a caller
 * that splits several products its own way within one dispatch (moe.c). */
void woolly_split_run(int64_t total, atomic_int *next_chunk, void (*span)(void *, int64_t, int64_t, int, int),
                      void *arg, int ith, int nth);

/* For tests: a function that sees every kernel call as the kernel receives it (the matrix, the kernel,
 * its arguments, the calling thread's index and the dispatch's thread count). NULL turns it off. Set it
 * only while no matmul runs. */
typedef void (*woolly_matmul_observer)(const woolly_matrix *w, const woolly_kernel *k,
                                       const woolly_matmul_args *a, int ith, int nth);
void woolly_matmul_set_observer(woolly_matmul_observer fn);

#endif
