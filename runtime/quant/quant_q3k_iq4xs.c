/* Q3_K and IQ4_XS: super-blocks of 256 values in sub-blocks with a signed 6-bit scale each (stored with
 * an offset of 32) over one f16 d per block; value = d * sc_j * L[q], where L is the format's list of
 * levels: the integers -4 .. 3 for Q3_K (3 bits, q + 4 stored), GGUF's non-linear IQ4 grid
 * (woolly_iq4nl_values) for IQ4_XS (4-bit indices). Q3_K has 16 sub-blocks of 16, IQ4_XS 8 of 32.
 *
 * Quantizing, as Q6_K's (quant_q6k.c) with a level list: per sub-block the scale with the least squared
 * error over candidate step sizes (woolly_fit_levels: either end of the levels mapped to the largest
 * magnitude, each refitted by least squares); the scales as signed 6-bit integers over a common d; then
 * with the scales fixed the levels are chosen again, d refitted by least squares and each scale nudged by
 * one step where that lowers the error. Errors and fits are weighted by the columns' importance
 * (quant_formats.h). */
#include <float.h>
#include <stdbool.h>
#include <string.h>

#include "quant_formats.h"

enum { MAX_SUB = 32, MAX_NSUB = 16, SC_MIN = -32, SC_MAX = 31 };

typedef struct {
    int sub, nsub; /* values per sub-block, sub-blocks per block */
    const woolly_levels *lev;
} level_format;

static const level_format Q3K = {16, 16, &woolly_q3k_levels};
static const level_format IQ4XS = {32, 8, &woolly_iq4_levels};

typedef struct {
    float d;
    uint16_t d16;
    int8_t sc[MAX_NSUB];
    uint8_t q[WOOLLY_QK_K]; /* level indices */
} level_block;

static float assign_sub_block(const level_format *f, const float *x, const float *w, level_block *k, int j)
{
    const float step = k->d * k->sc[j];
    const float istep = step != 0 ? 1.0f / step : 0.0f;
    float err = 0;
    for (int l = 0; l < f->sub; l++) {
        const int i = f->sub * j + l;
        const int q = woolly_nearest_level(f->lev, x[i] * istep);
        const float e = step * (float)f->lev->v[q] - x[i];
        k->q[i] = (uint8_t)q;
        err += w[i] * e * e;
    }
    return err;
}

static float assign_block(const level_format *f, const float *x, const float *w, level_block *k)
{
    float err = 0;
    for (int j = 0; j < f->nsub; j++)
        err += assign_sub_block(f, x, w, k, j);
    return err;
}

static void set_d(level_block *k, uint16_t d16)
{
    k->d16 = d16;
    k->d = woolly_f16_to_f32(d16);
}

static void nudge_scale(const level_format *f, const float *x, const float *w, level_block *k, int j)
{
    uint8_t q_best[MAX_SUB];
    float best = assign_sub_block(f, x, w, k, j);
    memcpy(q_best, k->q + f->sub * j, (size_t)f->sub);
    const int sc0 = k->sc[j];
    int best_sc = sc0;
    for (int ds = -1; ds <= 1; ds += 2) {
        const int sc = sc0 + ds;
        if (sc < SC_MIN || sc > SC_MAX)
            continue;
        k->sc[j] = (int8_t)sc;
        const float err = assign_sub_block(f, x, w, k, j);
        if (err < best) {
            best = err;
            best_sc = sc;
            memcpy(q_best, k->q + f->sub * j, (size_t)f->sub);
        }
    }
    k->sc[j] = (int8_t)best_sc;
    memcpy(k->q + f->sub * j, q_best, (size_t)f->sub);
}

static void quantize_block(const level_format *f, const float *x, const float *qw, level_block *k)
{
    float w[WOOLLY_QK_K];
    woolly_value_weights(qw, WOOLLY_QK_K, w);
    float a[MAX_NSUB], amax = 0;
    for (int j = 0; j < f->nsub; j++) {
        a[j] = woolly_fit_levels(f->lev, x + f->sub * j, w + f->sub * j, f->sub, qw != NULL);
        if (fabsf(a[j]) > fabsf(amax))
            amax = a[j];
    }
    /* the scale of largest magnitude becomes -32, the wider end (d rounded outward so that it fits) */
    set_d(k, woolly_scale_to_f16_outward(amax / (float)SC_MIN));
    for (int j = 0; j < f->nsub; j++)
        k->sc[j] = (int8_t)(k->d != 0 ? woolly_round_clamp(a[j] / k->d, SC_MIN, SC_MAX) : 0);
    const float err = assign_block(f, x, w, k);

    double suu = 0, sux = 0;
    for (int i = 0; i < WOOLLY_QK_K; i++) {
        const double u = (double)k->sc[i / f->sub] * f->lev->v[k->q[i]];
        suu += (double)w[i] * u * u;
        sux += (double)w[i] * u * x[i];
    }
    if (suu > 0) {
        level_block trial = *k;
        set_d(&trial, woolly_scale_to_f16((float)(sux / suu)));
        if (assign_block(f, x, w, &trial) < err)
            *k = trial;
    }
    for (int j = 0; j < f->nsub; j++)
        nudge_scale(f, x, w, k, j);
}

/* ---- Q3_K --------------------------------------------------------------------------------------- */

void woolly_dequantize_q3_k(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q3_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, y += WOOLLY_QK_K) {
        const float d = woolly_f16_to_f32(b[i].d);
        for (int v = 0; v < WOOLLY_QK_K; v++) {
            const int lo = (b[i].qs[32 * (v / 128) + v % 32] >> (2 * ((v / 32) % 4))) & 3;
            const int hi = (b[i].hmask[v % 32] >> (v / 32)) & 1;
            y[v] = d * (float)(woolly_q3k_scale(v / 16, b[i].scales) - 32) * (float)(lo + 4 * hi - 4);
        }
    }
}

void woolly_quantize_q3_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q3_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        level_block k;
        quantize_block(&Q3K, x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        b[i].d = k.d16;
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int j = 0; j < 16; j++) {
            const int s = k.sc[j] + 32;
            b[i].scales[j % 8] |= (uint8_t)((s & 0xF) << (4 * (j / 8)));
            b[i].scales[8 + j % 4] |= (uint8_t)((s >> 4) << (2 * (j / 4)));
        }
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int v = 0; v < WOOLLY_QK_K; v++) {
            b[i].qs[32 * (v / 128) + v % 32] |= (uint8_t)((k.q[v] & 3) << (2 * ((v / 32) % 4)));
            b[i].hmask[v % 32] |= (uint8_t)((k.q[v] >> 2) << (v / 32));
        }
    }
}

/* ---- IQ4_XS ------------------------------------------------------------------------------------- */

void woolly_dequantize_iq4_xs(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_iq4_xs *b = blocks;
    for (int64_t i = 0; i < nb; i++, y += WOOLLY_QK_K) {
        const float d = woolly_f16_to_f32(b[i].d);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)(woolly_iq4xs_scale(j, &b[i]) - 32);
            for (int l = 0; l < 16; l++) {
                y[32 * j + l] = dl * (float)woolly_iq4nl_values[b[i].qs[16 * j + l] & 0xF];
                y[32 * j + 16 + l] = dl * (float)woolly_iq4nl_values[b[i].qs[16 * j + l] >> 4];
            }
        }
    }
}

void woolly_quantize_iq4_xs(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_iq4_xs *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        level_block k;
        quantize_block(&IQ4XS, x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        b[i].d = k.d16;
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int j = 0; j < 8; j++) {
            const int s = k.sc[j] + 32;
            b[i].scales_l[j / 2] |= (uint8_t)((s & 0xF) << (4 * (j % 2)));
            b[i].scales_h |= (uint16_t)((s >> 4) << (2 * j));
        }
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 16; l++)
                b[i].qs[16 * j + l] = (uint8_t)(k.q[32 * j + l] | (k.q[32 * j + 16 + l] << 4));
    }
}
