/* This machine's limits, measured: what a figure is judged against when no other engine is at hand.
 *
 *   DRAM read bandwidth   decode streams every weight once per token: bytes per token x tokens/s
 *                         cannot pass it.
 *   int8 multiply-adds    prefill is compute: multiply-adds per token x tokens/s cannot pass the rate
 *                         of the int8 dot-product instruction the active kernels use (tdpbssd on
 *                         tiles for amx, vpdpbusd on zmm for avx512, ymm vpmaddubsw + vpmaddwd for
 *                         avx2, sdot for neon).
 *   BF16 multiply-adds    the same for prompts whose matrices take BF16 activations: tdpbf16ps on tiles
 *                         where the amx level runs with amx_bf16, vdpbf16ps on zmm where avx512 runs with
 *                         avx512bf16; not measured elsewhere.
 *   F32 multiply-adds     the same for prompts whose matrices are F16 or F32 (their GEMMs convert the
 *                         weights to F32 and multiply-add with the vector FMA): vfmadd231ps on zmm or
 *                         ymm, fmla on NEON.
 *
 * All run on `threads` threads of a fresh pool and take the best of a few repetitions (a limit is
 * approached from below: noise only lowers a sample). */
#ifndef WOOLLY_TUNE_MACHINE_LIMITS_H
#define WOOLLY_TUNE_MACHINE_LIMITS_H

#include <stddef.h>

typedef struct woolly_limits {
    int threads;
    double dram_read_gbs; /* GB/s (1e9 bytes) reading a buffer far larger than the caches */
    double int8_gmacs;    /* 1e9 int8 multiply-adds per second */
    const char *int8_instr; /* the instruction measured, e.g. "vpdpbusd zmm" */
    double bf16_gmacs;      /* 1e9 BF16 multiply-adds (F32 sums) per second, 0 where not measured */
    const char *bf16_instr; /* "tdpbf16ps", "vdpbf16ps zmm", or why none */
    double f32_gmacs;       /* 1e9 F32 fused multiply-adds per second, 0 where not measured */
    const char *f32_instr;  /* "vfmadd231ps zmm", "vfmadd231ps ymm", "fmla 4s", or why none */
} woolly_limits;

/* Measures the limits with `threads` threads (about a second in all). Returns 0, or -1 if the pool
 * or the buffer cannot be had. */
int woolly_measure_limits(int threads, woolly_limits *out);

/* Bytes a stream must span to be read from DRAM rather than partly from the L3: 4x the L3 (from the
 * CPU's cache sizes), and at least `floor`. */
size_t woolly_dram_stream_bytes(size_t floor);

#endif
