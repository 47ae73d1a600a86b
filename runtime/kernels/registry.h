/* The kernel registry: every kernel this build compiled, from the generated X-macro list
 * (generated/kernels.inc), and the choice of one per slot. A slot is (op, weight or cache type,
 * activation format). Every slot that has any kernel has a scalar reference kernel, so a choice never
 * fails for a supported type; faster kernels override it where the CPU supports their ISA.
 *
 * The ISA level is detected once (cpu.c); WOOLLY_ISA=scalar|avx2|avx512|neon forces a level, and
 * forcing one this build or this CPU lacks is an error, not a silent fallback. */
#ifndef WOOLLY_REGISTRY_H
#define WOOLLY_REGISTRY_H

#include <stdbool.h>

#include "error.h"
#include "kernels.h"
#include "wtype.h"

enum woolly_isa {
    WOOLLY_ISA_SCALAR = 0,
    WOOLLY_ISA_AVX2 = 1,
    WOOLLY_ISA_AVX512 = 2,
    WOOLLY_ISA_NEON = 3,
    WOOLLY_ISA_COUNT
};

typedef struct woolly_kernel {
    const char *name;          /* e.g. "q4k_f32_gemv_scalar_1x1" */
    enum woolly_op op;
    enum woolly_type wtype;    /* weight type (matmul) or cache type (attention) */
    enum woolly_act act;
    enum woolly_isa isa;
    int tile_m, tile_n;        /* register tile: tokens x weight rows (1x1 for attention) */
    int head_dim;              /* attention: the head dimension served, 0 = any */
    woolly_matmul_fn matmul;   /* exactly one of these is set */
    woolly_attn_fn attn;
} woolly_kernel;

const char *woolly_isa_name(enum woolly_isa isa);

/* Detects the CPU level and applies WOOLLY_ISA. Idempotent; the first call decides. */
int woolly_isa_init(woolly_error *err);
enum woolly_isa woolly_isa_active(void);

/* All compiled kernels (any ISA). */
const woolly_kernel *woolly_kernel_list(int *n);
const woolly_kernel *woolly_kernel_by_name(const char *name);

/* The kernel for a slot at the active ISA level (default rule: the highest ISA level that is at most
 * the active one; among those, the first listed). NULL if no kernel serves the slot at all. */
const woolly_kernel *woolly_kernel_choose(enum woolly_op op, enum woolly_type wtype, enum woolly_act act);

/* The attention kernel for a cache type and head dimension (kernels serving one head dimension, or any). */
const woolly_kernel *woolly_kernel_choose_attn(enum woolly_type cache, int head_dim);

/* A hash of the registry contents (names in order), for tuning profiles. */
unsigned long long woolly_registry_hash(void);

#endif
