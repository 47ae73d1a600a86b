/* Q4_K and Q5_K: super-blocks of 256 values in 8 sub-blocks of 32. Each sub-block j has a 6-bit scale
 * sc_j and a 6-bit min m_j; the block has two f16 factors d and dmin; value = d*sc_j*q - dmin*m_j with
 * q in [0, 15] (Q4_K) or [0, 31] (Q5_K, whose fifth bit lives in qh).
 *
 * Quantizing is a small fitting problem, solved in three steps:
 *   1. per sub-block, the affine map x ~ a*q - m (a, m >= 0) with the least squared error: several
 *      candidate step sizes give several integer assignments, each refitted by least squares;
 *   2. the 8 (a, m) pairs are expressed as integers over a common d / dmin (6 bits each);
 *   3. with the quantized scales fixed, the integers q are chosen again, and d / dmin refitted by least
 *      squares and the 6-bit scales nudged by one step where that lowers the block's error.
 * Every error and fit is weighted by the columns' importance (quant_formats.h; 1 without an importance
 * matrix). */
#include <stdbool.h>
#include <string.h>

#include "quant_formats.h"

enum { SUB = 32, NSUB = WOOLLY_QK_K / SUB, SCALE_MAX = 63 };

/* Candidate inverse step sizes for step 1 (woolly_fit_affine_min): (nmax + t) / range for t in [-2, 1]
 * by 0.25. The range was chosen by measuring the error on N(0, 0.02) weights (tiny-llama-f16): wider
 * ranges or finer steps gain < 0.1%. */
static const woolly_fit_candidates CANDIDATES = {-2.0f, 0.25f, 13};

/* ---- dequantization ----------------------------------------------------------------------------- */

/* One super-block; qh is NULL for Q4_K, Q5_K's fifth bits otherwise. */
static void dequantize_k_block(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qs,
                               const uint8_t *qh, float *y)
{
    const float d = woolly_f16_to_f32(d16), dmin = woolly_f16_to_f32(dmin16);
    for (int j = 0; j < NSUB; j++) {
        uint8_t sc, m;
        woolly_k_scale_min(j, scales, &sc, &m);
        /* bytes 32*(j/2).. hold sub-block j in the low nibbles (even j) or high nibbles (odd j) */
        const uint8_t *qj = qs + SUB * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < SUB; l++) {
            const int q = ((qj[l] >> shift) & 0xF) | (qh ? ((qh[l] >> j) & 1) << 4 : 0);
            y[SUB * j + l] = d * sc * (float)q - dmin * m;
        }
    }
}

void woolly_dequantize_q4_k(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q4_k *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_k_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, NULL, y + i * WOOLLY_QK_K);
}

void woolly_dequantize_q5_k(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q5_k *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_k_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, y + i * WOOLLY_QK_K);
}

/* ---- steps 2 and 3: the whole block ------------------------------------------------------------- */

typedef struct {
    float d, dmin; /* as stored (f16-rounded) */
    uint16_t d16, dmin16;
    uint8_t sc[NSUB], m[NSUB];
    uint8_t q[WOOLLY_QK_K];
} k_block;

/* Chooses the integers of sub-block j for its current scales; returns the sub-block's squared error. */
static float assign_sub_block(const float *x, const float *w, int nmax, k_block *k, int j)
{
    const float step = k->d * k->sc[j], off = k->dmin * k->m[j];
    const float istep = step > 0 ? 1.0f / step : 0.0f;
    float err = 0;
    for (int l = 0; l < SUB; l++) {
        const int q = woolly_round_clamp((x[SUB * j + l] + off) * istep, 0, nmax);
        const float e = step * (float)q - off - x[SUB * j + l];
        k->q[SUB * j + l] = (uint8_t)q;
        err += w[SUB * j + l] * e * e;
    }
    return err;
}

static float assign_block(const float *x, const float *w, int nmax, k_block *k)
{
    float err = 0;
    for (int j = 0; j < NSUB; j++)
        err += assign_sub_block(x, w, nmax, k, j);
    return err;
}

static void set_factors(k_block *k, uint16_t d16, uint16_t dmin16)
{
    k->d16 = d16;
    k->dmin16 = dmin16;
    k->d = woolly_f16_to_f32(d16);
    k->dmin = woolly_f16_to_f32(dmin16);
}

/* Least-squares d and dmin for the current integers: x ~ d*(sc*q) - dmin*m is linear in (d, dmin). */
static bool refit_factors(const float *x, const float *w, const k_block *k, float *d, float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int j = 0; j < NSUB; j++)
        for (int l = 0; l < SUB; l++) {
            const double u = (double)k->sc[j] * k->q[SUB * j + l], v = k->m[j], xv = x[SUB * j + l];
            const double wv = w[SUB * j + l];
            suu += wv * u * u, suv += wv * u * v, svv += wv * v * v, sux += wv * u * xv, svx += wv * v * xv;
        }
    /* normal equations of min sum (d u - dmin v - x)^2 */
    const double det = suu * svv - suv * suv;
    if (det > 1e-12 * suu * svv && det > 0) {
        *d = (float)((sux * svv - svx * suv) / det);
        *dmin = (float)((sux * suv - svx * suu) / det);
    } else if (suu > 0) {
        *d = (float)(sux / suu);
        *dmin = 0;
    } else {
        return false;
    }
    if (*dmin < 0 && suu > 0) { /* keep dmin non-negative, as the fitted mins are */
        *d = (float)(sux / suu);
        *dmin = 0;
    }
    return *d >= 0;
}

/* Tries each 6-bit scale and min one step up and down, keeping what lowers the sub-block's error. */
static void nudge_scales(const float *x, const float *w, int nmax, k_block *k, int j)
{
    uint8_t q_best[SUB];
    float best = assign_sub_block(x, w, nmax, k, j);
    memcpy(q_best, k->q + SUB * j, SUB);
    const int sc0 = k->sc[j], m0 = k->m[j];
    int best_sc = sc0, best_m = m0;
    for (int ds = -1; ds <= 1; ds++)
        for (int dm = -1; dm <= 1; dm++) {
            const int sc = sc0 + ds, m = m0 + dm;
            if ((ds == 0 && dm == 0) || sc < 0 || sc > SCALE_MAX || m < 0 || m > SCALE_MAX)
                continue;
            k->sc[j] = (uint8_t)sc;
            k->m[j] = (uint8_t)m;
            const float err = assign_sub_block(x, w, nmax, k, j);
            if (err < best) {
                best = err;
                best_sc = sc, best_m = m;
                memcpy(q_best, k->q + SUB * j, SUB);
            }
        }
    k->sc[j] = (uint8_t)best_sc;
    k->m[j] = (uint8_t)best_m;
    memcpy(k->q + SUB * j, q_best, SUB);
}

static void quantize_k_block(const float *x, const float *qw, int nmax, k_block *k)
{
    float w[WOOLLY_QK_K];
    woolly_value_weights(qw, WOOLLY_QK_K, w);
    float a[NSUB], m[NSUB], amax = 0, mmax = 0;
    for (int j = 0; j < NSUB; j++) {
        woolly_fit_affine_min(x + SUB * j, w + SUB * j, SUB, nmax, &CANDIDATES, &a[j], &m[j]);
        amax = fmaxf(amax, a[j]);
        mmax = fmaxf(mmax, m[j]);
    }
    /* rounded outward so that the largest scale and min still fit in 6 bits */
    set_factors(k, woolly_scale_to_f16_outward(amax / SCALE_MAX),
                woolly_scale_to_f16_outward(mmax / SCALE_MAX));
    for (int j = 0; j < NSUB; j++) {
        k->sc[j] = (uint8_t)(k->d > 0 ? woolly_round_clamp(a[j] / k->d, 0, SCALE_MAX) : 0);
        k->m[j] = (uint8_t)(k->dmin > 0 ? woolly_round_clamp(m[j] / k->dmin, 0, SCALE_MAX) : 0);
    }
    float err = assign_block(x, w, nmax, k);

    /* refit d and dmin to the integers, keep the result if the block got better */
    float d, dmin;
    if (refit_factors(x, w, k, &d, &dmin)) {
        k_block trial = *k;
        set_factors(&trial, woolly_scale_to_f16(d), woolly_scale_to_f16(dmin));
        const float trial_err = assign_block(x, w, nmax, &trial);
        if (trial_err < err) {
            *k = trial;
            err = trial_err;
        }
    }
    for (int j = 0; j < NSUB; j++)
        nudge_scales(x, w, nmax, k, j);
}

/* The factors and 6-bit scales, laid out the same in both formats. */
static void pack_header(const k_block *k, uint16_t *d, uint16_t *dmin, uint8_t *s)
{
    *d = k->d16;
    *dmin = k->dmin16;
    /* sub-blocks 0-3: 6 bits in bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7: low 4 bits in bytes
     * 8-11, high 2 bits in the top bits of bytes 0-7 (the inverse of woolly_k_scale_min) */
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((k->sc[j] & 63) | ((k->sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((k->m[j] & 63) | ((k->m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((k->sc[j + 4] & 0xF) | ((k->m[j + 4] & 0xF) << 4));
    }
}

/* Sub-block j's low 4 bits go to bytes 32*(j/2).., in the low nibbles (even j) or high nibbles (odd j). */
static void pack_low_nibbles(const k_block *k, uint8_t *qs)
{
    for (int j = 0; j < NSUB; j += 2)
        for (int l = 0; l < SUB; l++)
            qs[SUB * (j / 2) + l] =
                (uint8_t)((k->q[SUB * j + l] & 0xF) | (k->q[SUB * (j + 1) + l] & 0xF) << 4);
}

void woolly_quantize_q4_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q4_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        k_block k;
        quantize_k_block(x, qw ? qw + i * WOOLLY_QK_K : NULL, 15, &k);
        pack_header(&k, &b[i].d, &b[i].dmin, b[i].scales);
        pack_low_nibbles(&k, b[i].qs);
    }
}

void woolly_quantize_q5_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q5_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        k_block k;
        quantize_k_block(x, qw ? qw + i * WOOLLY_QK_K : NULL, 31, &k);
        pack_header(&k, &b[i].d, &b[i].dmin, b[i].scales);
        pack_low_nibbles(&k, b[i].qs);
        /* the fifth bit of value l of sub-block j is bit j of qh[l] */
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int j = 0; j < NSUB; j++)
            for (int l = 0; l < SUB; l++)
                b[i].qh[l] |= (uint8_t)(((k.q[SUB * j + l] >> 4) & 1) << j);
    }
}
