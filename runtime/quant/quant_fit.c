/* The least-squares fits the K-quant quantizers share (quant_formats.h). */
#include <float.h>

#include "quant_formats.h"

void woolly_fit_affine_min(const float *x, int n, int nmax, const woolly_fit_candidates *cand, float *a_out,
                           float *m_out)
{
    float xmin = 0, xmax = -FLT_MAX, sx = 0, sxx = 0;
    for (int l = 0; l < n; l++) {
        xmin = fminf(xmin, x[l]);
        xmax = fmaxf(xmax, x[l]);
        sx += x[l];
        sxx += x[l] * x[l];
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
            sq += q;
            sqq += q * q;
            sqx += q * x[l];
        }
        /* least squares for x ~ a*q + b, then the constraint b <= 0 (a constant q leaves only b = 0) */
        const float det = n * sqq - sq * sq;
        float a = 0, b = 1;
        if (det > 0) {
            a = (n * sqx - sq * sx) / det;
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
        /* sum (a q + b - x)^2, expanded so that no second pass is needed */
        const float err = a * a * sqq + n * b * b + sxx + 2 * a * b * sq - 2 * a * sqx - 2 * b * sx;
        if (err < best_err) {
            best_err = err;
            *a_out = a;
            *m_out = -b;
        }
    }
}
