/* The small ops of the forward pass (SwiGLU, GeGLU, RMSNorm): the registry's kernels of those ops
 * (kernels.inc's WOOLLY_OPS_KERNEL lines), chosen like any other (woolly_kernel_choose_ops): the highest
 * level this CPU runs at the active ISA level; every op has a scalar version, so the choice never fails. */
#ifndef WOOLLY_SMALL_OPS_H
#define WOOLLY_SMALL_OPS_H

#include "kernels.h"

typedef struct woolly_small_ops {
    woolly_swiglu_fn swiglu;
    woolly_rmsnorm_fn rmsnorm;
    woolly_geglu_fn geglu;
    const char *swiglu_name, *rmsnorm_name, *geglu_name;
} woolly_small_ops;

woolly_small_ops woolly_small_ops_choose(void);

/* A gated activation (ops.swiglu or ops.geglu) on `rows` rows of `width` values. The vector levels' ops
 * run whole vectors, then the rest value by value (expf): over a batch's rows as one array, where a
 * row's values fall would depend on the rows before it, so a token would get other bits alone than in a
 * batch. Rows that are not whole vectors (of up to 16 floats) go one call each. */
static inline void woolly_gated_rows(woolly_swiglu_fn fn, float *gate, const float *up, int64_t rows, int64_t width)
{
    if (width % 16 == 0) {
        fn(gate, up, rows * width);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        fn(gate + r * width, up + r * width, width);
}

#endif
