/* Q2_K: super-blocks of 256 values in 16 sub-blocks of 16. Each sub-block j has a 4-bit scale sc_j and a
 * 4-bit min m_j (one byte, scale in the low nibble); the block has two f16 factors d and dmin; value =
 * d*sc_j*q - dmin*m_j with q in [0, 3].
 *
 * Storage: each 32 bytes of qs hold 128 values as four 2-bit planes; value v is in byte
 * qs[32 * (v / 128) + v % 32] at bits 2 * ((v / 32) % 4).
 *
 * Quantizing is Q4_K's fit (quant_kmin.c) with the narrower ranges. */
#include <string.h>

#include "quant_formats.h"

enum { SUB = 16, NSUB = WOOLLY_QK_K / SUB, SCALE_MAX = 15, NMAX = 3 };

/* Candidate inverse steps (woolly_fit_affine_min): (NMAX + t) / range for t in [-1, 1] by 0.125; with
 * only 4 levels a clipped or a coarser step often wins, so the range is wider (relative to the levels)
 * than Q4_K's. */
static const woolly_fit_candidates CANDIDATES = {-1.0f, 0.125f, 17};
static const woolly_kmin_format FORMAT = {SUB, SCALE_MAX, NMAX, &CANDIDATES};

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

void woolly_quantize_q2_k(const float *x, void *blocks, int64_t nb, const float *qw)
{
    woolly_block_q2_k *b = blocks;
    for (int64_t i = 0; i < nb; i++, x += WOOLLY_QK_K) {
        woolly_kmin_block k;
        woolly_kmin_quantize_block(&FORMAT, x, qw ? qw + i * WOOLLY_QK_K : NULL, &k);
        b[i].d = k.d16;
        b[i].dmin = k.dmin16;
        for (int j = 0; j < NSUB; j++)
            b[i].scales[j] = (uint8_t)(k.sc[j] | (k.m[j] << 4));
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int v = 0; v < WOOLLY_QK_K; v++)
            b[i].qs[32 * (v / 128) + v % 32] |= (uint8_t)(k.q[v] << (2 * ((v / 32) % 4)));
    }
}
