/* Q2_K: super-blocks of 256 values in 16 sub-blocks of 16. Each sub-block j has a 4-bit scale sc_j and a
 * 4-bit min m_j (one byte, scale in the low nibble); the block has two f16 factors d and dmin; value =
 * d*sc_j*q - dmin*m_j with q in [0, 3].
 *
 * Storage: each 32 bytes of qs hold 128 values as four 2-bit planes; value v is in byte
 * qs[32 * (v / 128) + v % 32] at bits 2 * ((v / 32) % 4).
 *
 * Quantizing follows Q4_K's three steps (quant_q45k.c) with the narrower ranges: per sub-block the
 * affine fit with the least squared error over candidate step sizes (each refitted by least squares),
 * the scales and mins as 4-bit integers over d / dmin, then the integers chosen again with d / dmin
 * refitted jointly and each scale and min nudged by one step where that lowers the error. Errors and fits
 * are weighted by the columns' importance (quant_formats.h). */
#include <stdbool.h>
#include <string.h>

#include "quant_formats.h"

enum { SUB = 16, NSUB = WOOLLY_QK_K / SUB, SCALE_MAX = 15, NMAX = 3 };

/* Candidate inverse steps (woolly_fit_affine_min): (NMAX + t) / range for t in [-1, 1] by 0.125; with
 * only 4 levels a clipped or a coarser step often wins, so the range is wider (relative to the levels)
 * than Q4_K's. */
static const woolly_fit_candidates CANDIDATES = {-1.0f, 0.125f, 17};

static int q2_of(const uint8_t *qs, int v)
{
    return (qs[32 * (v / 128) + v % 32] >> (2 * ((v / 32) % 4))) & 3;
}

void woolly_dequantize_q2_k(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q2_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, y += WOOLLY_QK_K) {
        const float d = woolly_f16_to_f32(b[i].d), dmin = woolly_f16_to_f32(b[i].dmin);
        for (int v = 0; v < WOOLLY_QK_K; v++) {
            const uint8_t sm = b[i].scales[v / SUB];
            y[v] = d * (float)(sm & 0xF) * (float)q2_of(b[i].qs, v) - dmin * (float)(sm >> 4);
        }
    }
}

typedef struct {
    float d, dmin;
    uint16_t d16, dmin16;
    uint8_t sc[NSUB], m[NSUB];
    uint8_t q[WOOLLY_QK_K];
} q2_block;

static float assign_sub_block(const float *x, const float *w, q2_block *k, int j)
{
    const float step = k->d * k->sc[j], off = k->dmin * k->m[j];
    const float istep = step > 0 ? 1.0f / step : 0.0f;
    float err = 0;
    for (int l = 0; l < SUB; l++) {
        const int q = woolly_round_clamp((x[SUB * j + l] + off) * istep, 0, NMAX);
        const float e = step * (float)q - off - x[SUB * j + l];
        k->q[SUB * j + l] = (uint8_t)q;
        err += w[SUB * j + l] * e * e;
    }
    return err;
}

static float assign_block(const float *x, const float *w, q2_block *k)
{
    float err = 0;
    for (int j = 0; j < NSUB; j++)
        err += assign_sub_block(x, w, k, j);
    return err;
}

static void set_factors(q2_block *k, uint16_t d16, uint16_t dmin16)
{
    k->d16 = d16;
    k->dmin16 = dmin16;
    k->d = woolly_f16_to_f32(d16);
    k->dmin = woolly_f16_to_f32(dmin16);
}

/* Least-squares d and dmin for the current integers (x ~ d*(sc*q) - dmin*m, linear in both). */
static bool refit_factors(const float *x, const float *w, const q2_block *k, float *d, float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int i = 0; i < WOOLLY_QK_K; i++) {
        const double u = (double)k->sc[i / SUB] * k->q[i], v = k->m[i / SUB], xv = x[i], wv = w[i];
        suu += wv * u * u, suv += wv * u * v, svv += wv * v * v, sux += wv * u * xv, svx += wv * v * xv;
    }
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
    if (*dmin < 0 && suu > 0) {
        *d = (float)(sux / suu);
        *dmin = 0;
    }
    return *d >= 0;
}

static void nudge_scales(const float *x, const float *w, q2_block *k, int j)
{
    uint8_t q_best[SUB];
    float best = assign_sub_block(x, w, k, j);
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
            const float err = assign_sub_block(x, w, k, j);
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

static void quantize_block(const float *x, const float *qw, q2_block *k)
{
    float w[WOOLLY_QK_K];
    woolly_value_weights(qw, WOOLLY_QK_K, w);
    float a[NSUB], m[NSUB], amax = 0, mmax = 0;
    for (int j = 0; j < NSUB; j++) {
        woolly_fit_affine_min(x + SUB * j, w + SUB * j, SUB, NMAX, &CANDIDATES, &a[j], &m[j]);
        amax = fmaxf(amax, a[j]);
        mmax = fmaxf(mmax, m[j]);
    }
    set_factors(k, woolly_scale_to_f16_outward(amax / SCALE_MAX), woolly_scale_to_f16_outward(mmax / SCALE_MAX));
    for (int j = 0; j < NSUB; j++) {
        k->sc[j] = (uint8_t)(k->d > 0 ? woolly_round_clamp(a[j] / k->d, 0, SCALE_MAX) : 0);
        k->m[j] = (uint8_t)(k->dmin > 0 ? woolly_round_clamp(m[j] / k->dmin, 0, SCALE_MAX) : 0);
    }
    float err = assign_block(x, w, k);
    float d, dmin;
    if (refit_factors(x, w, k, &d, &dmin)) {
        q2_block trial = *k;
        set_factors(&trial, woolly_scale_to_f16(d), woolly_scale_to_f16(dmin));
        if (assign_block(x, w, &trial) < err)
            *k = trial;
    }
    for (int j = 0; j < NSUB; j++)
        nudge_scales(x, w, k, j);
}

void woolly_quantize_q2_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q2_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        q2_block k;
        quantize_block(x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        b[i].d = k.d16;
        b[i].dmin = k.dmin16;
        for (int j = 0; j < NSUB; j++)
            b[i].scales[j] = (uint8_t)(k.sc[j] | (k.m[j] << 4));
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int v = 0; v < WOOLLY_QK_K; v++)
            b[i].qs[32 * (v / 128) + v % 32] |= (uint8_t)(k.q[v] << (2 * ((v / 32) % 4)));
    }
}
