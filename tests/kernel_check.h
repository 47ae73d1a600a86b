/* The harness of the generated per-kernel tests: builds deterministic random inputs for a case, runs the
 * kernel, and compares with a float64 evaluation through the runtime's reference dequantizers. */
#ifndef WOOLLY_KERNEL_CHECK_H
#define WOOLLY_KERNEL_CHECK_H

#include "kernels.h"
#include "wtype.h"

typedef struct kc_matmul_case {
    int64_t k, m, r0, r1;
} kc_matmul_case;

typedef struct kc_attn_case {
    int64_t head_dim, n_kv, n_group;
} kc_attn_case;

/* Asserts NMSE <= max_nmse over the computed rows, and that nothing outside them was written. */
void kc_check_matmul(woolly_matmul_fn fn, const char *name, enum woolly_type wtype, const kc_matmul_case *c,
                     double max_nmse);
void kc_check_attn(woolly_attn_fn fn, const char *name, enum woolly_type cache_type, const kc_attn_case *c,
                   double max_nmse);

#endif
