/* The 32-value formats beside Q8_0: Q4_0 and Q5_0 (value = d * (q - 8) or d * (q - 16)), Q4_1 and Q5_1
 * (value = d * q + m) and IQ4_NL (value = d * WOOLLY_IQ4NL_VALUES[q]), llama.cpp's block layouts (kernels.h).
 *
 * Quantizing: each block is a small least-squares fit, not only the plain max-magnitude (or min/max)
 * scale: several candidate steps each give an integer assignment, whose best scale (and minimum) is then
 * solved for; the candidate with the least squared error wins, and the integers are chosen once more for
 * the scale as the file holds it (f16). Errors and fits are weighted by the columns' importance
 * (quant_formats.h); with an importance matrix Q4_1 and Q5_1 also search candidate steps before their
 * alternating refit (llama.cpp's weighted quantizer for them is such a search). */
#include <float.h>
#include <stdbool.h>
#include <string.h>

#include "quant_formats.h"

enum { QK = WOOLLY_QK4_0, HALF = WOOLLY_QK4_0 / 2 };

/* Candidate steps around the plain one (the largest magnitude on the end of the range): is / 10 of a
 * level either way, as wide as the search needs on Gaussian-like weights. */
enum { NTRY = 9 };

/* ---- the bit planes ----------------------------------------------------------------------------- */

/* The 5-bit (or 4-bit: qh NULL) integers of a block's 32 values. */
static void unpack_q(const uint8_t *qs, const uint8_t *qh, int q[QK])
{
    uint32_t h = 0;
    if (qh)
        memcpy(&h, qh, sizeof h);
    for (int l = 0; l < HALF; l++) {
        q[l] = (qs[l] & 0xF) | (int)(h >> l & 1) << 4;
        q[HALF + l] = (qs[l] >> 4) | (int)(h >> (HALF + l) & 1) << 4;
    }
}

static void pack_q(const int q[QK], uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int l = 0; l < HALF; l++) {
        qs[l] = (uint8_t)((q[l] & 0xF) | (q[HALF + l] & 0xF) << 4);
        h |= (uint32_t)(q[l] >> 4 & 1) << l | (uint32_t)(q[HALF + l] >> 4 & 1) << (HALF + l);
    }
    if (qh)
        memcpy(qh, &h, sizeof h);
}

/* ---- dequantization ----------------------------------------------------------------------------- */

/* Q4_0 / Q5_0: d * (q - offset). */
static void dequantize_offset(uint16_t d16, const uint8_t *qs, const uint8_t *qh, int offset, float *y)
{
    int q[QK];
    unpack_q(qs, qh, q);
    const float d = woolly_f16_to_f32(d16);
    for (int l = 0; l < QK; l++)
        y[l] = d * (float)(q[l] - offset);
}

/* Q4_1 / Q5_1: d * q + m. */
static void dequantize_min(uint16_t d16, uint16_t m16, const uint8_t *qs, const uint8_t *qh, float *y)
{
    int q[QK];
    unpack_q(qs, qh, q);
    const float d = woolly_f16_to_f32(d16), m = woolly_f16_to_f32(m16);
    for (int l = 0; l < QK; l++)
        y[l] = d * (float)q[l] + m;
}

void woolly_dequantize_q4_0(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q4_0 *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_offset(b[i].d, b[i].qs, NULL, 8, y + i * QK);
}

void woolly_dequantize_q5_0(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q5_0 *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_offset(b[i].d, b[i].qs, b[i].qh, 16, y + i * QK);
}

void woolly_dequantize_q4_1(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q4_1 *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_min(b[i].d, b[i].m, b[i].qs, NULL, y + i * QK);
}

void woolly_dequantize_q5_1(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q5_1 *b = blocks;
    for (int64_t i = 0; i < nb; i++)
        dequantize_min(b[i].d, b[i].m, b[i].qs, b[i].qh, y + i * QK);
}

void woolly_dequantize_iq4_nl(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_iq4_nl *b = blocks;
    for (int64_t i = 0; i < nb; i++) {
        int q[QK];
        unpack_q(b[i].qs, NULL, q);
        const float d = woolly_f16_to_f32(b[i].d);
        for (int l = 0; l < QK; l++)
            y[i * QK + l] = d * (float)woolly_iq4nl_value(q[l]);
    }
}

/* ---- Q4_0 / Q5_0: x ~ d * k with k in [-nmax, nmax - 1] ----------------------------------------- */

/* The signed integers k = q - nmax of one block for the scale d16 (the file's f16). */
static void offset_assign(const float *x, uint16_t d16, int nmax, int q[QK])
{
    const float d = woolly_f16_to_f32(d16), id = d != 0 ? 1.0f / d : 0.0f;
    for (int l = 0; l < QK; l++)
        q[l] = woolly_round_clamp(x[l] * id, -nmax, nmax - 1) + nmax;
}

/* The scale: the largest magnitude v maps to -nmax (the end of the range with room, as llama.cpp's
 * d = v / -nmax), then steps a tenth of a level finer and coarser, each refitted by least squares. */
static uint16_t offset_scale(const float *x, const float *w, int nmax)
{
    float amax = 0, vmax = 0;
    for (int l = 0; l < QK; l++)
        if (fabsf(x[l]) > amax) {
            amax = fabsf(x[l]);
            vmax = x[l];
        }
    if (!(amax > 0)) /* zeros (or NaN): a zero scale */
        return 0;
    float best_d = vmax / (float)-nmax, best = -1;
    for (int is = -NTRY; is <= NTRY; is++) {
        const float id = -((float)nmax + 0.1f * (float)is) / vmax;
        float sqx = 0, sqq = 0;
        for (int l = 0; l < QK; l++) {
            const float k = (float)woolly_round_clamp(x[l] * id, -nmax, nmax - 1);
            sqx += w[l] * k * x[l];
            sqq += w[l] * k * k;
        }
        /* the error at the least-squares scale sqx / sqq is sum(x^2) - sqx^2 / sqq: maximize sqx^2 / sqq */
        if (sqq > 0 && sqx * sqx / sqq > best) {
            best = sqx * sqx / sqq;
            best_d = sqx / sqq;
        }
    }
    return woolly_scale_to_f16(best_d);
}

static void quantize_offset(const float *x, const float *w, int nmax, uint16_t *d16, uint8_t *qs, uint8_t *qh)
{
    int q[QK];
    *d16 = offset_scale(x, w, nmax);
    offset_assign(x, *d16, nmax, q);
    pack_q(q, qs, qh);
}

void woolly_quantize_q4_0(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q4_0 *b = blocks;
    float w[QK];
    for (int64_t i = 0; i < nb; i++) {
        woolly_value_weights(qw ? qw + i * QK : NULL, QK, w);
        quantize_offset(x + i * QK, w, 8, &b[i].d, b[i].qs, NULL);
    }
}

void woolly_quantize_q5_0(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q5_0 *b = blocks;
    float w[QK];
    for (int64_t i = 0; i < nb; i++) {
        woolly_value_weights(qw ? qw + i * QK : NULL, QK, w);
        quantize_offset(x + i * QK, w, 16, &b[i].d, b[i].qs, b[i].qh);
    }
}

/* ---- Q4_1 / Q5_1: x ~ d * q + m with q in [0, nmax] --------------------------------------------- */

/* The integers for (d16, m16) as the file holds them; returns the weighted squared error. */
static float min_assign(const float *x, const float *w, uint16_t d16, uint16_t m16, int nmax, int q[QK])
{
    const float d = woolly_f16_to_f32(d16), m = woolly_f16_to_f32(m16), id = d != 0 ? 1.0f / d : 0.0f;
    float err = 0;
    for (int l = 0; l < QK; l++) {
        q[l] = woolly_round_clamp((x[l] - m) * id, 0, nmax);
        const float e = d * (float)q[l] + m - x[l];
        err += w[l] * e * e;
    }
    return err;
}

/* Least-squares (d, m) of x ~ d * q + m with weights w; false if the integers do not determine them. */
static bool fit_min(const float *x, const float *w, const int q[QK], float *d, float *m)
{
    float sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int l = 0; l < QK; l++) {
        sw += w[l];
        sq += w[l] * (float)q[l];
        sqq += w[l] * (float)q[l] * (float)q[l];
        sx += w[l] * x[l];
        sqx += w[l] * (float)q[l] * x[l];
    }
    const float det = sw * sqq - sq * sq;
    if (!(det > 0))
        return false;
    *d = (sw * sqx - sq * sx) / det;
    *m = (sx - *d * sq) / sw;
    return true;
}

/* Candidate steps (nmax + t) / range, t in [-0.9, 0.9] by 0.05, each refitted (weighted path only). */
enum { MIN_CANDS = 37 };
#define MIN_CAND_LO (-0.9f)
#define MIN_CAND_STEP 0.05f

/* Starting from min/max (llama.cpp's choice) or, with search, the best of the candidate steps, alternates:
 * the integers for the current (d, m), then the least-squares (d, m) for those integers; keeps the best
 * pair as f16. */
static void quantize_min(const float *x, const float *w, bool search, int nmax, uint16_t *d16, uint16_t *m16,
                         uint8_t *qs, uint8_t *qh)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int l = 0; l < QK; l++) {
        lo = fminf(lo, x[l]);
        hi = fmaxf(hi, x[l]);
    }
    int q[QK], best_q[QK];
    uint16_t bd = woolly_scale_to_f16((hi - lo) / (float)nmax), bm = woolly_scale_to_f16(lo);
    float best = min_assign(x, w, bd, bm, nmax, best_q);
    for (int c = 0; search && c < MIN_CANDS && hi > lo; c++) {
        const float is = ((float)nmax + MIN_CAND_LO + MIN_CAND_STEP * (float)c) / (hi - lo);
        float d, m;
        for (int l = 0; l < QK; l++)
            q[l] = woolly_round_clamp((x[l] - lo) * is, 0, nmax);
        if (!fit_min(x, w, q, &d, &m))
            continue;
        const uint16_t td = woolly_scale_to_f16(d), tm = woolly_scale_to_f16(m);
        const float err = min_assign(x, w, td, tm, nmax, q);
        if (err < best) {
            best = err;
            bd = td, bm = tm;
            memcpy(best_q, q, sizeof q);
        }
    }
    memcpy(q, best_q, sizeof q);
    for (int it = 0; it < 4 && best > 0; it++) {
        float d, m;
        if (!fit_min(x, w, q, &d, &m))
            break;
        const uint16_t td = woolly_scale_to_f16(d), tm = woolly_scale_to_f16(m);
        const float err = min_assign(x, w, td, tm, nmax, q);
        if (!(err < best))
            break;
        best = err;
        bd = td, bm = tm;
        memcpy(best_q, q, sizeof q);
    }
    *d16 = bd;
    *m16 = bm;
    pack_q(best_q, qs, qh);
}

void woolly_quantize_q4_1(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q4_1 *b = blocks;
    float w[QK];
    for (int64_t i = 0; i < nb; i++) {
        woolly_value_weights(qw ? qw + i * QK : NULL, QK, w);
        quantize_min(x + i * QK, w, qw != NULL, 15, &b[i].d, &b[i].m, b[i].qs, NULL);
    }
}

void woolly_quantize_q5_1(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q5_1 *b = blocks;
    float w[QK];
    for (int64_t i = 0; i < nb; i++) {
        woolly_value_weights(qw ? qw + i * QK : NULL, QK, w);
        quantize_min(x + i * QK, w, qw != NULL, 31, &b[i].d, &b[i].m, b[i].qs, b[i].qh);
    }
}

/* ---- IQ4_NL: x ~ d * V[q], V the 16 non-linear values --------------------------------------------- */

/* The scale as IQ4_XS fits each sub-block's (woolly_fit_levels: the grid's ends -127 and 113 both
 * tried, the grid being asymmetric), held as f16, then the nearest values for that scale. */
static void quantize_nl_block(const float *x, const float *w, bool fine, woolly_block_iq4_nl *b)
{
    b->d = woolly_scale_to_f16(woolly_fit_levels(&woolly_iq4_levels, x, w, QK, fine));
    const float d = woolly_f16_to_f32(b->d), id = d != 0 ? 1.0f / d : 0.0f;
    int q[QK];
    for (int l = 0; l < QK; l++)
        q[l] = woolly_nearest_level(&woolly_iq4_levels, x[l] * id);
    pack_q(q, b->qs, NULL);
}

void woolly_quantize_iq4_nl(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_iq4_nl *b = blocks;
    float w[QK];
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK;
        woolly_value_weights(qw ? qw + i * QK : NULL, QK, w);
        quantize_nl_block(xb, w, qw != NULL, &b[i]);
    }
}
