/* The least-squares fits the K-quant quantizers share (quant_formats.h). */
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
