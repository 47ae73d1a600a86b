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

#endif
