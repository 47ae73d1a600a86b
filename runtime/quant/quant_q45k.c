/* Q4_K and Q5_K: super-blocks of 256 values in 8 sub-blocks of 32. Each sub-block j has a 6-bit scale
 * sc_j and a 6-bit min m_j; the block has two f16 factors d and dmin; value = d*sc_j*q - dmin*m_j with
 * q in [0, 15] (Q4_K) or [0, 31] (Q5_K, whose fifth bit lives in qh).
 *
 * Quantizing is a small fitting problem, solved in three steps (quant_kmin.c, shared with Q2_K): per
 * sub-block the affine fit with the least squared error, the 8 (a, m) pairs as 6-bit integers over a
 * common d / dmin, then the integers chosen again with d / dmin refitted and the scales nudged. */
#include <string.h>

#include "quant_formats.h"

enum { SUB = 32, NSUB = WOOLLY_QK_K / SUB, SCALE_MAX = 63 };

/* Candidate inverse step sizes for step 1 (woolly_fit_affine_min): (nmax + t) / range for t in [-2, 1]
 * by 0.25. The range was chosen by measuring the error on N(0, 0.02) weights (tiny-llama-f16): wider
 * ranges or finer steps gain < 0.1%. */
static const woolly_fit_candidates CANDIDATES = {-2.0f, 0.25f, 13};
static const woolly_kmin_format Q4_K_FORMAT = {SUB, SCALE_MAX, 15, &CANDIDATES};
static const woolly_kmin_format Q5_K_FORMAT = {SUB, SCALE_MAX, 31, &CANDIDATES};

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

/* The factors and 6-bit scales, laid out the same in both formats. */
static void pack_header(const woolly_kmin_block *k, uint16_t *d, uint16_t *dmin, uint8_t *s)
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
static void pack_low_nibbles(const woolly_kmin_block *k, uint8_t *qs)
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
        woolly_kmin_block k;
        woolly_kmin_quantize_block(&Q4_K_FORMAT, x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        pack_header(&k, &b[i].d, &b[i].dmin, b[i].scales);
        pack_low_nibbles(&k, b[i].qs);
    }
}

void woolly_quantize_q5_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q5_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        woolly_kmin_block k;
        woolly_kmin_quantize_block(&Q5_K_FORMAT, x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        pack_header(&k, &b[i].d, &b[i].dmin, b[i].scales);
        pack_low_nibbles(&k, b[i].qs);
        /* the fifth bit of value l of sub-block j is bit j of qh[l] */
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int j = 0; j < NSUB; j++)
            for (int l = 0; l < SUB; l++)
                b[i].qh[l] |= (uint8_t)(((k.q[SUB * j + l] >> 4) & 1) << j);
    }
}
