/* Per-format reference conversions behind quant.h's dispatch. Each function converts `nb` whole blocks
 * (nb * 256 elements for the K-quants) of the format's block struct (woolly_block_q4_k...); the caller
 * has checked the length. The blocks are untyped so that quant.c can list every format in one table.
 * Internal to the runtime.
 *
 * The quantizers take the importance of the row's columns, qw (nb * block values, the mean square input
 * of each column from an importance matrix), or NULL. With it each value's squared rounding error is
 * weighed by its column's importance (woolly_value_weights); without it every weight is 1, and the
 * arithmetic is bit for bit the unweighted one (a product by 1.0f is exact), so that files made without
 * an importance matrix do not change. */
#ifndef WOOLLY_QUANT_FORMATS_H
#define WOOLLY_QUANT_FORMATS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

/* quant_legacy.c: the 32-value formats beside Q8_0 */
void woolly_dequantize_q4_0(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q4_1(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q5_0(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q5_1(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_iq4_nl(const void *blocks, float *y, int64_t nb);
void woolly_quantize_q4_0(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q4_1(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q5_0(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q5_1(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_iq4_nl(const float *x, void *blocks, int64_t nb, const float *qw);

void woolly_dequantize_q4_k(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q5_k(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q6_k(const void *blocks, float *y, int64_t nb);

void woolly_quantize_q4_k(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q5_k(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q6_k(const float *x, void *blocks, int64_t nb, const float *qw);

/* quant_q2k.c, quant_q3k_iq4xs.c */
void woolly_dequantize_q2_k(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_q3_k(const void *blocks, float *y, int64_t nb);
void woolly_dequantize_iq4_xs(const void *blocks, float *y, int64_t nb);
void woolly_quantize_q2_k(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_q3_k(const float *x, void *blocks, int64_t nb, const float *qw);
void woolly_quantize_iq4_xs(const float *x, void *blocks, int64_t nb, const float *qw);

/* quant_fit.c: the candidate inverse step sizes of an affine fit, (nmax + lo + step * c) / range for c in
 * [0, count): t = 0 is plain min/max, t > 0 clips the extremes for finer steps, t < 0 gives coarser
 * steps, which the least-squares refit then places better. */
typedef struct woolly_fit_candidates {
    float lo, step;
    int count;
} woolly_fit_candidates;

/* Best x ~ a*q - m over q in [0, nmax], a >= 0, m >= 0, for n values (the range always includes zero, as
 * the K-quants' unsigned mins imply): each candidate step gives integers, refitted by weighted least
 * squares, and the fit with the least weighted squared error (weights w, all 1 for the plain error) is
 * kept. */
void woolly_fit_affine_min(const float *x, const float *w, int n, int nmax, const woolly_fit_candidates *cand,
                           float *a_out, float *m_out);

/* quant_kmin.c: the fit of the K-quants with a scale and a min per sub-block (Q2_K, Q4_K, Q5_K), the
 * formats' ranges as parameters; each format's file packs the block it gives. */
enum { WOOLLY_KMIN_SUB_MAX = 32, WOOLLY_KMIN_NSUB_MAX = WOOLLY_QK_K / 16 };

typedef struct woolly_kmin_format {
    int sub;                                 /* values per sub-block (16 or 32) */
    int scale_max;                           /* the largest integer scale and min */
    int nmax;                                /* the largest q */
    const woolly_fit_candidates *candidates; /* the first step's candidate steps */
} woolly_kmin_format;

typedef struct woolly_kmin_block {
    float d, dmin; /* as stored (f16-rounded) */
    uint16_t d16, dmin16;
    uint8_t sc[WOOLLY_KMIN_NSUB_MAX], m[WOOLLY_KMIN_NSUB_MAX]; /* per sub-block */
    uint8_t q[WOOLLY_QK_K];
} woolly_kmin_block;

/* One block of 256 values x (importance qw, or NULL) fitted as format f: factors, scales, mins and q. */
void woolly_kmin_quantize_block(const woolly_kmin_format *f, const float *x, const float *qw,
                                woolly_kmin_block *k);

/* A list of levels a block's values are scaled to (Q3_K's integers -4 .. 3, the IQ4 grid), ascending,
 * with the n - 1 midpoints between neighbours (quant_fit.c). */
typedef struct woolly_levels {
    const int8_t *v;
    int n;
    const float *mid;
} woolly_levels;

extern const woolly_levels woolly_q3k_levels, woolly_iq4_levels;

/* Index of the level nearest v: the count of midpoints below v, branch-free (the quantizers' inner loops
 * run it for every value and candidate scale). NaN counts none. */
static inline int woolly_nearest_level(const woolly_levels *lev, float v)
{
    int i = 0;
    for (int k = 0; k < lev->n - 1; k++)
        i += v > lev->mid[k];
    return i;
}

/* The scale a of x ~ a * level with the least weighted squared error over candidate steps: either end
 * of the levels mapped to the largest magnitude times f, f from 0.7 to 1.3 (f < 1 clips that value for
 * finer steps elsewhere), each refitted by least squares; `fine` steps f by 0.025 instead of 0.075 (with
 * an importance matrix the weighted optimum is less smooth in f). 0 for a block of zeros. */
float woolly_fit_levels(const woolly_levels *lev, const float *x, const float *w, int n, bool fine);

/* The weights of n values: the importance qw[l] of each value's column, or 1 everywhere when qw is NULL.
 * A matrix row's output error is sum_l e_l * a_l for rounding errors e and inputs a; with errors
 * uncorrelated across columns its mean square is sum_l e_l^2 * E[a_l^2], the importance-weighted squared
 * error. llama.cpp weighs Q6_K so; its other formats take qw[l] * sqrt(sigma2 + x[l]^2), which also
 * favours the large weights. On stories260K and tiny-llama-f16 the plain importance gave the lower KL
 * divergence in most types (bench/RESULTS.md), so every format here uses it. */
static inline void woolly_value_weights(const float *qw, int n, float *w)
{
    for (int l = 0; l < n; l++)
        w[l] = qw ? qw[l] : 1.0f;
}

/* Nearest integer of v clamped to [lo, hi] (lo <= 0; ties round up). Clamping happens in float first, so
 * huge values and NaN (which becomes lo) never reach an out-of-range conversion; the shift by -lo makes
 * the truncating conversion a rounding one. Written branch-free so that the compiler vectorizes the
 * quantizers' inner loops. */
static inline int woolly_round_clamp(float v, int lo, int hi)
{
    v = v >= (float)lo ? v : (float)lo;
    v = v <= (float)hi ? v : (float)hi;
    return (int)(v - (float)lo + 0.5f) + lo;
}

/* A scale as the file will hold it: binary16, with overflow clamped to the largest finite half so
 * that an extreme input degrades instead of turning into inf/NaN, and a non-zero scale too small for
 * binary16 kept at the smallest subnormal rather than zero, so that tiny rows keep their signs and
 * rough magnitudes. NaN becomes 0. */
static inline uint16_t woolly_scale_to_f16(float s)
{
    const float max_half = 65504.0f;
    if (!(s == s))
        return 0;
    s = fmaxf(fminf(s, max_half), -max_half);
    uint16_t h = woolly_f32_to_f16(s);
    if ((h & 0x7FFF) == 0 && s != 0)
        h |= 1;
    return h;
}

/* Like woolly_scale_to_f16, but never smaller in magnitude than s: the first scale of a block is rounded
 * outward so that the largest value still fits the integer range after the rounding. */
static inline uint16_t woolly_scale_to_f16_outward(float s)
{
    uint16_t h = woolly_scale_to_f16(s);
    if (fabsf(woolly_f16_to_f32(h)) < fabsf(s) && (h & 0x7FFF) < 0x7BFF)
        h++; /* the next half away from zero (same sign) */
    return h;
}

#endif
