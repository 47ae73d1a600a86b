/* The harness of the generated per-kernel tests: builds deterministic random inputs for a case, runs the
 * kernel, and compares with a float64 evaluation through the runtime's reference dequantizers. */
#ifndef WOOLLY_KERNEL_CHECK_H
#define WOOLLY_KERNEL_CHECK_H

#include <stdbool.h>

#include "cpu.h"
#include "kernels.h"
#include "registry.h"
#include "wtype.h"

/* Whether this CPU runs a kernel of ISA level isa that needs the CPU features `features`. An x86 build
 * compiles every x86 level's kernels and their tests; a kernel the machine cannot execute (AVX-512 on
 * an AVX2-only CPU, AVX512-FP16 on an AMD one) is not run: its test says so on stderr and passes. */
bool kc_cpu_runs(const char *name, enum woolly_isa isa, unsigned features);

typedef struct kc_matmul_case {
    int64_t k, m, r0, r1;
    int accumulate; /* run with y += (y preset to known values) */
    int prefetch;   /* the args' prefetch distance, bytes */
} kc_matmul_case;

/* A matmul kernel under test: what it reads. */
typedef struct kc_matmul_kernel {
    woolly_matmul_fn fn;
    const char *name;
    enum woolly_type wtype;
    enum woolly_act act;
    /* The weight layout: GGUF rows (repack NULL) or groups of layout_rows rows made by repack, with
     * blocks of layout_block_bytes. */
    woolly_repack_fn repack;
    int layout_rows;
    size_t layout_block_bytes;
} kc_matmul_kernel;

/* A weight layout under test: its routines and geometry. */
typedef struct kc_layout {
    const char *name;
    enum woolly_type wtype;
    int rows;
    size_t block_bytes;
    woolly_repack_fn repack;
    woolly_unpack_fn unpack;
} kc_layout;

/* n_q queries at positions pos0 .. pos0 + n_q - 1 of n_group heads over cache positions [kv0, kv1); with
 * a sliding window (window > 0) query t sees only positions > pos0 + t - window, and with a ring (ring > 0)
 * the cache holds position p in row p % ring, written in position order (so rows hold kv1 - ring ..
 * kv1 - 1, and every query's window must lie there). */
typedef struct kc_attn_case {
    int64_t head_dim, n_group, n_q, pos0, kv0, kv1, window, ring;
} kc_attn_case;

/* How far the KV range split in two (two partial results, then woolly_attn_combine) may be from one
 * call over the whole range: only the summation order differs. A kernel that rounds its operands
 * (the BF16 tiles) rounds the partial sums differently too: it is held to its own max_nmse instead,
 * when that is looser. */
#define KC_ATTN_SPLIT_MAX_NMSE 1e-11

/* How far a query of several in one call may be from the same query alone asking for the tiles
 * (one_query_tiles): each row's numbers are its own, the same operations on the same rounded operands,
 * so only where a kernel's exponential of 0 is not exactly 1 (a rescale that changes nothing) could
 * they differ. A kernel that rounds its operands differs from its F32 one-query path by about 1e-7. */
#define KC_ATTN_ALONE_MAX_NMSE 1e-12

/* Asserts NMSE <= max_nmse over the computed rows against a float64 product of the reference-dequantized
 * weights and the activations as packed (so an int8 or F16 kernel is held to a tight bound: only its
 * summation order differs), and that nothing outside the rows was written. */
void kc_check_matmul(const kc_matmul_kernel *kern, const kc_matmul_case *c, double max_nmse);

/* The n kernels (the same weights, layout and activation format) give every one of `rows` rows of each
 * of m tokens the same bits as kerns[0], on one set of inputs (k values a row). */
void kc_check_same_bits(const kc_matmul_kernel *kerns, int n, int64_t k, int64_t m, int64_t rows);

/* The kernel on `threads` threads at once (each a group of rows, created for the call, `rounds` times
 * over: new threads each round) gives the bits it gives on the calling thread: for kernels with
 * per-thread state (AMX's tile configuration), on threads that never ran one before. */
void kc_check_threads(const kc_matmul_kernel *kern, int64_t k, int64_t m, int threads, int rounds);

/* Repacking then unpacking gives back every row byte for byte, for row counts at, below and above
 * whole groups; and the padding rows of a partial last group are zero weights. */
void kc_check_layout(const kc_layout *l, int64_t k, int64_t rows);

/* A packer gives exactly the scalar reference's bytes on rows of k values (with zero blocks, and
 * values that round to .5). */
void kc_check_pack(woolly_pack_fn fn, const char *name, enum woolly_act act, int64_t k);
/* An attention kernel against a float64 softmax attention over the cache values as stored (F16, F32 or
 * Q8_0 rows, padded to an odd byte stride): NMSE <= max_nmse, nothing written past head_dim; and the
 * range split in two partial results combined by woolly_attn_combine gives the same within
 * KC_ATTN_SPLIT_MAX_NMSE (or max_nmse, the looser); of several queries, the first, the middle and the
 * last each alone with one_query_tiles give their rows of the whole call within KC_ATTN_ALONE_MAX_NMSE. */
void kc_check_attn(woolly_attn_fn fn, const char *name, enum woolly_type cache_type, const kc_attn_case *c,
                   double max_nmse);

#endif
