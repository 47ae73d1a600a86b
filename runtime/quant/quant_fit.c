/* The least-squares fits the quantizers share (quant_formats.h). */
#include <float.h>

#include "quant_formats.h"

void woolly_fit_affine_min(const float *x, const float *w, int n, int nmax, const woolly_fit_candidates *cand,
                           float *a_out, float *m_out)
{
    float xmin = 0, xmax = -FLT_MAX, sw = 0, sx = 0, sxx = 0;
    for (int l = 0; l < n; l++) {
        xmin = fminf(xmin, x[l]);
        xmax = fmaxf(xmax, x[l]);
        sw += w[l];
        sx += w[l] * x[l];
        sxx += w[l] * x[l] * x[l];
    }
    *a_out = 0;
    *m_out = -xmin;
    if (!(xmax > xmin)) /* constant at or below zero: the min alone represents it */
        return;

    float best_err = FLT_MAX;
    for (int c = 0; c < cand->count; c++) {
        const float iscale = ((float)nmax + cand->lo + cand->step * (float)c) / (xmax - xmin);
        float sq = 0, sqq = 0, sqx = 0;
        for (int l = 0; l < n; l++) {
            const float q = (float)woolly_round_clamp((x[l] - xmin) * iscale, 0, nmax);
            sq += w[l] * q;
            sqq += w[l] * q * q;
            sqx += w[l] * q * x[l];
        }
        /* weighted least squares for x ~ a*q + b, then b <= 0 (a constant q leaves only b = 0) */
        const float det = sw * sqq - sq * sq;
        float a = 0, b = 1;
        if (det > 0) {
            a = (sw * sqx - sq * sx) / det;
            b = (sqq * sx - sq * sqx) / det;
        }
        if (b > 0) {
            if (!(sqq > 0))
                continue;
            b = 0;
            a = sqx / sqq;
        }
        if (a < 0)
            continue;
        /* sum w (a q + b - x)^2, expanded so that no second pass is needed */
        const float err = a * a * sqq + sw * b * b + sxx + 2 * a * b * sq - 2 * a * sqx - 2 * b * sx;
        if (err < best_err) {
            best_err = err;
            *a_out = a;
            *m_out = -b;
        }
    }
}

static const int8_t Q3K_LEVELS[8] = {-4, -3, -2, -1, 0, 1, 2, 3};
static const float Q3K_MID[7] = {-3.5f, -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f};
/* between woolly_iq4nl_values' neighbours */
static const float IQ4_MID[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                  7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f};
const woolly_levels woolly_q3k_levels = {Q3K_LEVELS, 8, Q3K_MID};
const woolly_levels woolly_iq4_levels = {woolly_iq4nl_values, 16, IQ4_MID};

/* Candidate factors f = F0 + DF * c: 9 coarse ones, or 25 fine ones. */
enum { CANDS = 9, FINE_CANDS = 25 };
#define CAND_F0 0.7f
#define CAND_DF 0.075f
#define FINE_DF 0.025f

float woolly_fit_levels(const woolly_levels *lev, const float *x, const float *w, int n, bool fine)
{
    float vmax = 0;
    for (int l = 0; l < n; l++)
        if (fabsf(x[l]) > fabsf(vmax))
            vmax = x[l];
    if (vmax == 0)
        return 0;
    const float ends[2] = {(float)lev->v[0], (float)lev->v[lev->n - 1]};
    float best_a = 0, best_gain = -1;
    const int cands = fine ? FINE_CANDS : CANDS;
    const float df = fine ? FINE_DF : CAND_DF;
    for (int e = 0; e < 2; e++)
        for (int c = 0; c < cands; c++) {
            const float iscale = ends[e] * (CAND_F0 + df * (float)c) / vmax;
            float sqq = 0, sqx = 0;
            for (int l = 0; l < n; l++) {
                const float q = (float)lev->v[woolly_nearest_level(lev, x[l] * iscale)];
                sqq += w[l] * q * q;
                sqx += w[l] * q * x[l];
            }
            if (!(sqq > 0))
                continue;
            const float gain = sqx * sqx / sqq; /* error = sum(w x^2) - gain with a = sqx / sqq */
            if (gain > best_gain) {
                best_gain = gain;
                best_a = sqx / sqq;
            }
        }
    return best_a;
}
