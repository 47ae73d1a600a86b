/* The K-quants with a scale and a min per sub-block: value = d*sc_j*q - dmin*m_j, q in [0, nmax], the
 * integer scales sc_j and mins m_j in [0, scale_max] over the block's two f16 factors d and dmin. Q2_K
 * (16 sub-blocks of 16, 4-bit scales, q in [0, 3]) and Q4_K / Q5_K (8 of 32, 6-bit, [0, 15] / [0, 31])
 * differ only in those ranges (woolly_kmin_format), so one fit serves them, in three steps:
 *   1. per sub-block, the affine map x ~ a*q - m (a, m >= 0) with the least squared error: several
 *      candidate step sizes give several integer assignments, each refitted by least squares;
 *   2. the (a, m) pairs are expressed as integers over a common d / dmin, rounded outward so that the
 *      largest still fits;
 *   3. with the integer scales fixed, the integers q are chosen again, d / dmin refitted by least squares
 *      (kept if the block got better), and each scale and min nudged by one step where that lowers the
 *      sub-block's error.
 * Every error and fit is weighted by the columns' importance (quant_formats.h; 1 without an importance
 * matrix). The formats' files pack the result (quant_q2k.c, quant_q45k.c). */
#include <assert.h>
#include <string.h>

#include "quant_formats.h"

/* Chooses the integers of sub-block j for its current scales; returns the sub-block's squared error. */
static float assign_sub_block(const woolly_kmin_format *f, const float *x, const float *w,
                              woolly_kmin_block *k, int j)
{
    const int sub = f->sub;
    const float step = k->d * k->sc[j], off = k->dmin * k->m[j];
    const float istep = step > 0 ? 1.0f / step : 0.0f;
    float err = 0;
    for (int l = 0; l < sub; l++) {
        const int q = woolly_round_clamp((x[sub * j + l] + off) * istep, 0, f->nmax);
        const float e = step * (float)q - off - x[sub * j + l];
        k->q[sub * j + l] = (uint8_t)q;
        err += w[sub * j + l] * e * e;
    }
    return err;
}

static float assign_block(const woolly_kmin_format *f, const float *x, const float *w, woolly_kmin_block *k)
{
    float err = 0;
    for (int j = 0; j < WOOLLY_QK_K / f->sub; j++)
        err += assign_sub_block(f, x, w, k, j);
    return err;
}

static void set_factors(woolly_kmin_block *k, uint16_t d16, uint16_t dmin16)
{
    k->d16 = d16;
    k->dmin16 = dmin16;
    k->d = woolly_f16_to_f32(d16);
    k->dmin = woolly_f16_to_f32(dmin16);
}

/* Least-squares d and dmin for the current integers: x ~ d*(sc*q) - dmin*m is linear in (d, dmin). */
static bool refit_factors(const woolly_kmin_format *f, const float *x, const float *w,
                          const woolly_kmin_block *k, float *d, float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int i = 0; i < WOOLLY_QK_K; i++) {
        const double u = (double)k->sc[i / f->sub] * k->q[i], v = k->m[i / f->sub], xv = x[i], wv = w[i];
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

/* Tries sub-block j's scale and min one step up and down, keeping what lowers its error. */
static void nudge_scales(const woolly_kmin_format *f, const float *x, const float *w, woolly_kmin_block *k,
                         int j)
{
    const int sub = f->sub;
    uint8_t q_best[WOOLLY_KMIN_SUB_MAX];
    float best = assign_sub_block(f, x, w, k, j);
    memcpy(q_best, k->q + sub * j, (size_t)sub);
    const int sc0 = k->sc[j], m0 = k->m[j];
    int best_sc = sc0, best_m = m0;
    for (int ds = -1; ds <= 1; ds++)
        for (int dm = -1; dm <= 1; dm++) {
            const int sc = sc0 + ds, m = m0 + dm;
            if ((ds == 0 && dm == 0) || sc < 0 || sc > f->scale_max || m < 0 || m > f->scale_max)
                continue;
            k->sc[j] = (uint8_t)sc;
            k->m[j] = (uint8_t)m;
            const float err = assign_sub_block(f, x, w, k, j);
            if (err < best) {
                best = err;
                best_sc = sc, best_m = m;
                memcpy(q_best, k->q + sub * j, (size_t)sub);
            }
        }
    k->sc[j] = (uint8_t)best_sc;
    k->m[j] = (uint8_t)best_m;
    memcpy(k->q + sub * j, q_best, (size_t)sub);
}

void woolly_kmin_quantize_block(const woolly_kmin_format *f, const float *x, const float *qw,
                                woolly_kmin_block *k)
{
    const int sub = f->sub, nsub = WOOLLY_QK_K / sub;
    assert(sub <= WOOLLY_KMIN_SUB_MAX && nsub <= WOOLLY_KMIN_NSUB_MAX && WOOLLY_QK_K % sub == 0);
    float w[WOOLLY_QK_K];
    woolly_value_weights(qw, WOOLLY_QK_K, w);
    float a[WOOLLY_KMIN_NSUB_MAX], m[WOOLLY_KMIN_NSUB_MAX], amax = 0, mmax = 0;
    for (int j = 0; j < nsub; j++) {
        woolly_fit_affine_min(x + sub * j, w + sub * j, sub, f->nmax, f->candidates, &a[j], &m[j]);
        amax = fmaxf(amax, a[j]);
        mmax = fmaxf(mmax, m[j]);
    }
    set_factors(k, woolly_scale_to_f16_outward(amax / (float)f->scale_max),
                woolly_scale_to_f16_outward(mmax / (float)f->scale_max));
    for (int j = 0; j < nsub; j++) {
        k->sc[j] = (uint8_t)(k->d > 0 ? woolly_round_clamp(a[j] / k->d, 0, f->scale_max) : 0);
        k->m[j] = (uint8_t)(k->dmin > 0 ? woolly_round_clamp(m[j] / k->dmin, 0, f->scale_max) : 0);
    }
    const float err = assign_block(f, x, w, k);
    float d, dmin;
    if (refit_factors(f, x, w, k, &d, &dmin)) {
        woolly_kmin_block trial = *k;
        set_factors(&trial, woolly_scale_to_f16(d), woolly_scale_to_f16(dmin));
        if (assign_block(f, x, w, &trial) < err)
            *k = trial;
    }
    for (int j = 0; j < nsub; j++)
        nudge_scales(f, x, w, k, j);
}
