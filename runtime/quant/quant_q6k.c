/* Q6_K: super-blocks of 256 values in 16 sub-blocks of 16; value = d * sc_j * q with an int8 scale
 * sc_j per sub-block, one f16 d per block, and q in [-32, 31] stored as q + 32 in 6 bits (low 4 bits in
 * ql, high 2 bits in qh).
 *
 * Storage order, per half of 128 values (h = 0, 1) and l in [0, 32):
 *   ql[64h + l]      low nibbles of values 128h + l (bits 0-3) and 128h + 64 + l (bits 4-7)
 *   ql[64h + 32 + l] low nibbles of values 128h + 32 + l and 128h + 96 + l
 *   qh[32h + l]      high 2 bits of values 128h + l, +32, +64, +96 in bit pairs 0-1, 2-3, 4-5, 6-7
 *
 * Quantizing: per sub-block, the scale with the least squared error (candidate step sizes, each refit
 * by least squares); the 16 scales as int8 over a common d; then with the quantized scales fixed the
 * integers are chosen again, d refitted by least squares and each int8 scale nudged by one step where
 * that lowers the error. Errors and fits are weighted by the columns' importance (quant_formats.h), as
 * llama.cpp weighs Q6_K. */
#include <float.h>
#include <stdbool.h>
#include <string.h>

#include "quant_formats.h"

enum { SUB = 16, NSUB = WOOLLY_QK_K / SUB, QMIN = -32, QMAX = 31 };

/* Candidate inverse steps: the largest magnitude maps to -(32 + t), the end of the range with the most
 * levels, for t in [CAND_LO, CAND_LO + (CANDS-1) * CAND_STEP]; t > 0 clips it for finer steps
 * elsewhere, t < 0 leaves room (the positive end has only 31 levels). */
#define CAND_LO (-1.5f)
#define CAND_STEP 0.25f
enum { CANDS = 11 };
/* With an importance matrix: the same range in steps of 0.1 (the weighted optimum is less smooth). */
#define FINE_STEP 0.1f
enum { FINE_CANDS = 26 };

void woolly_dequantize_q6_k(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q6_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, y += WOOLLY_QK_K) {
        const float d = woolly_f16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int q[4] = {
                    ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32,
                    ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32,
                    ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32,
                    ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32,
                };
                for (int r = 0; r < 4; r++) {
                    const int pos = 32 * r + l; /* position within the half */
                    yh[pos] = d * (float)b[i].scales[8 * h + pos / SUB] * (float)q[r];
                }
            }
        }
    }
}

/* The best signed scale a for x ~ a*q over one sub-block. */
static float fit_sub_block(const float *x, const float *w, bool fine)
{
    float vmax = 0;
    for (int l = 0; l < SUB; l++)
        if (fabsf(x[l]) > fabsf(vmax))
            vmax = x[l];
    if (vmax == 0)
        return 0;
    float best_a = 0, best_gain = -1;
    const int cands = fine ? FINE_CANDS : CANDS;
    const float step = fine ? FINE_STEP : CAND_STEP;
    for (int c = 0; c < cands; c++) {
        const float iscale = ((float)QMIN - CAND_LO - step * (float)c) / vmax;
        float sqq = 0, sqx = 0;
        for (int l = 0; l < SUB; l++) {
            const float q = (float)woolly_round_clamp(x[l] * iscale, QMIN, QMAX);
            sqq += w[l] * q * q;
            sqx += w[l] * q * x[l];
        }
        if (!(sqq > 0))
            continue;
        /* with a = sqx/sqq the error is sum(x^2) - sqx^2/sqq: maximize the gain sqx^2/sqq */
        const float gain = sqx * sqx / sqq;
        if (gain > best_gain) {
            best_gain = gain;
            best_a = sqx / sqq;
        }
    }
    return best_a;
}

typedef struct {
    float d;
    uint16_t d16;
    int8_t sc[NSUB];
    int8_t q[WOOLLY_QK_K];
} q6_block;

static float assign_sub_block(const float *x, const float *w, q6_block *k, int j)
{
    const float step = k->d * k->sc[j];
    const float istep = step != 0 ? 1.0f / step : 0.0f;
    float err = 0;
    for (int l = 0; l < SUB; l++) {
        const int q = woolly_round_clamp(x[SUB * j + l] * istep, QMIN, QMAX);
        const float e = step * (float)q - x[SUB * j + l];
        k->q[SUB * j + l] = (int8_t)q;
        err += w[SUB * j + l] * e * e;
    }
    return err;
}

static float assign_block(const float *x, const float *w, q6_block *k)
{
    float err = 0;
    for (int j = 0; j < NSUB; j++)
        err += assign_sub_block(x, w, k, j);
    return err;
}

static void set_d(q6_block *k, uint16_t d16)
{
    k->d16 = d16;
    k->d = woolly_f16_to_f32(d16);
}

static void nudge_scale(const float *x, const float *w, q6_block *k, int j)
{
    int8_t q_best[SUB];
    float best = assign_sub_block(x, w, k, j);
    memcpy(q_best, k->q + SUB * j, SUB);
    const int sc0 = k->sc[j];
    int best_sc = sc0;
    for (int ds = -1; ds <= 1; ds += 2) {
        const int sc = sc0 + ds;
        if (sc < -128 || sc > 127)
            continue;
        k->sc[j] = (int8_t)sc;
        const float err = assign_sub_block(x, w, k, j);
        if (err < best) {
            best = err;
            best_sc = sc;
            memcpy(q_best, k->q + SUB * j, SUB);
        }
    }
    k->sc[j] = (int8_t)best_sc;
    memcpy(k->q + SUB * j, q_best, SUB);
}

static void quantize_block(const float *x, const float *qw, q6_block *k)
{
    float w[WOOLLY_QK_K];
    woolly_value_weights(qw, WOOLLY_QK_K, w);
    float a[NSUB], amax = 0;
    for (int j = 0; j < NSUB; j++) {
        a[j] = fit_sub_block(x + SUB * j, w + SUB * j, qw != NULL);
        if (fabsf(a[j]) > fabsf(amax))
            amax = a[j];
    }
    /* the sub-block scale of largest magnitude becomes -128, the widest int8 value (d rounded outward
     * so that it still fits) */
    set_d(k, woolly_scale_to_f16_outward(amax / -128.0f));
    for (int j = 0; j < NSUB; j++)
        k->sc[j] = (int8_t)(k->d != 0 ? woolly_round_clamp(a[j] / k->d, -128, 127) : 0);
    float err = assign_block(x, w, k);

    /* least-squares d for the chosen integers: x ~ d * (sc * q) */
    double suu = 0, sux = 0;
    for (int i = 0; i < WOOLLY_QK_K; i++) {
        const double u = (double)k->sc[i / SUB] * k->q[i];
        suu += (double)w[i] * u * u;
        sux += (double)w[i] * u * x[i];
    }
    if (suu > 0) {
        q6_block trial = *k;
        set_d(&trial, woolly_scale_to_f16((float)(sux / suu)));
        const float trial_err = assign_block(x, w, &trial);
        if (trial_err < err) {
            *k = trial;
            err = trial_err;
        }
    }
    for (int j = 0; j < NSUB; j++)
        nudge_scale(x, w, k, j);
}

void woolly_quantize_q6_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q6_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        q6_block k;
        quantize_block(x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        b[i].d = k.d16;
        memcpy(b[i].scales, k.sc, sizeof b[i].scales);
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *q = k.q + 128 * h;
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = (uint8_t)(q[l] + 32), q2 = (uint8_t)(q[l + 32] + 32);
                const uint8_t q3 = (uint8_t)(q[l + 64] + 32), q4 = (uint8_t)(q[l + 96] + 32);
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}
