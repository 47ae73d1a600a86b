/* The reference conversions of Q2_K, Q3_K and IQ4_XS (quant_q2k.c, quant_q3k_iq4xs.c): the bit layout
 * of each block against a decoder written here in GGUF's own loop order (planes of 32 bytes, a moving
 * hmask bit), on blocks of random bytes; round trips within named bounds; zero and constant rows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "testutil.h"

/* NMSE of a round trip of N(0, s^2) rows (s = 0.02, 1, 100): about 1.2x what the quantizers reach
 * (Q2_K 6.9e-2, Q3_K 2.0e-2, IQ4_XS 5.5e-3; llama.cpp's quantizers without an importance matrix reach
 * 8.7e-2, 2.2e-2 and 5.8e-3 on the same kind of rows). */
#define Q2_K_ROUNDTRIP_MAX_NMSE 8.4e-2
#define Q3_K_ROUNDTRIP_MAX_NMSE 2.5e-2
#define IQ4_XS_ROUNDTRIP_MAX_NMSE 6.6e-3

enum { N_BLOCKS = 32, N = 256 * N_BLOCKS };

static const enum woolly_type TYPES[] = {WOOLLY_TYPE_Q2_K, WOOLLY_TYPE_Q3_K, WOOLLY_TYPE_IQ4_XS};
static const double BOUNDS[] = {Q2_K_ROUNDTRIP_MAX_NMSE, Q3_K_ROUNDTRIP_MAX_NMSE, IQ4_XS_ROUNDTRIP_MAX_NMSE};

static float f16(uint16_t h)
{
    return woolly_f16_to_f32(h);
}

/* The decoders in GGUF's loop order: per half of 128 values, four 2-bit planes of 32 bytes, each plane
 * two sub-blocks of 16. */
static void q2k_gguf_order(const woolly_block_q2_k *b, float *y)
{
    const uint8_t *q = b->qs;
    int is = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int part = 0; part < 2; part++) {
                const uint8_t sm = b->scales[is++];
                for (int l = 0; l < 16; l++)
                    *y++ = f16(b->d) * (float)(sm & 15) * (float)((q[16 * part + l] >> shift) & 3) -
                           f16(b->dmin) * (float)(sm >> 4);
            }
}

static void q3k_gguf_order(const woolly_block_q3_k *b, float *y)
{
    /* the 16 scales: bytes 0-7 give the low nibbles (0-7 from the low halves, 8-15 from the high
     * halves), bytes 8-11 the top 2 bits, four scales per byte position pair */
    int sc[16];
    for (int j = 0; j < 8; j++) {
        sc[j] = b->scales[j] & 15;
        sc[j + 8] = b->scales[j] >> 4;
    }
    for (int j = 0; j < 16; j++)
        sc[j] |= ((b->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
    const uint8_t *q = b->qs;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2, m <<= 1)
            for (int part = 0; part < 2; part++) {
                const float dl = f16(b->d) * (float)(sc[is++] - 32);
                for (int l = 0; l < 16; l++) {
                    const int lo = (q[16 * part + l] >> shift) & 3;
                    *y++ = dl * (float)(lo - ((b->hmask[16 * part + l] & m) ? 0 : 4));
                }
            }
}

static void iq4xs_gguf_order(const woolly_block_iq4_xs *b, float *y)
{
    static const int grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int j = 0; j < 8; j++) {
        const int ls = ((b->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b->scales_h >> (2 * j)) & 3) << 4);
        const float dl = f16(b->d) * (float)(ls - 32);
        for (int l = 0; l < 16; l++) {
            y[32 * j + l] = dl * (float)grid[b->qs[16 * j + l] & 15];
            y[32 * j + 16 + l] = dl * (float)grid[b->qs[16 * j + l] >> 4];
        }
    }
}

/* A block of random bytes whose f16 factors are a sane 0.1 (random halves could be inf or NaN). */
static void random_block(enum woolly_type t, uint8_t *p, tu_rng *rng)
{
    const size_t n = woolly_row_bytes(t, 256);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)tu_rand_u64(rng);
    const uint16_t h = woolly_f32_to_f16(0.1f);
    if (t == WOOLLY_TYPE_Q2_K) {
        ((woolly_block_q2_k *)p)->d = h;
        ((woolly_block_q2_k *)p)->dmin = h;
    } else if (t == WOOLLY_TYPE_Q3_K) {
        ((woolly_block_q3_k *)p)->d = h;
    } else {
        ((woolly_block_iq4_xs *)p)->d = h;
    }
}

Test(quant_q23k, block_layouts_match_gguf_loop_order)
{
    tu_rng rng = {52};
    _Alignas(8) uint8_t blk[256];
    float got[256], want[256];
    for (size_t t = 0; t < 3; t++)
        for (int rep = 0; rep < 16; rep++) {
            random_block(TYPES[t], blk, &rng);
            cr_assert_eq(woolly_dequantize_row(TYPES[t], blk, got, 256), 0);
            if (TYPES[t] == WOOLLY_TYPE_Q2_K)
                q2k_gguf_order((const woolly_block_q2_k *)blk, want);
            else if (TYPES[t] == WOOLLY_TYPE_Q3_K)
                q3k_gguf_order((const woolly_block_q3_k *)blk, want);
            else
                iq4xs_gguf_order((const woolly_block_iq4_xs *)blk, want);
            for (int i = 0; i < 256; i++)
                cr_assert_eq(got[i], want[i], "%s block %d value %d: %g, GGUF order gives %g",
                             woolly_type_get(TYPES[t])->name, rep, i, got[i], want[i]);
        }
}

Test(quant_q23k, random_rows_roundtrip_within_bounds)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *q = malloc((size_t)N);
    cr_assert(x && y && q);
    const float scales[] = {0.02f, 1.0f, 100.0f};
    for (size_t t = 0; t < 3; t++)
        for (int s = 0; s < 3; s++) {
            tu_rng rng = {7000 + 10 * t + (uint64_t)s};
            for (int i = 0; i < N; i++)
                x[i] = scales[s] * tu_rand_normal(&rng);
            cr_assert_eq(woolly_quantize_row(TYPES[t], x, q, N), woolly_row_bytes(TYPES[t], N));
            cr_assert_eq(woolly_dequantize_row(TYPES[t], q, y, N), 0);
            const double nmse = tu_nmse(y, x, N);
            cr_assert(nmse <= BOUNDS[t], "%s, N(0, %g^2): NMSE %.3g > %.3g", woolly_type_get(TYPES[t])->name,
                      scales[s], nmse, BOUNDS[t]);
        }
    free(x), free(y), free(q);
}

/* A zero row stays zero; a constant row comes back within the rounding of its f16 scales (1%: the
 * 4- and 6-bit sub-block scales meet a constant only to their step). */
Test(quant_q23k, zero_and_constant_rows)
{
    float x[512], y[512];
    uint8_t q[512];
    for (size_t t = 0; t < 3; t++) {
        memset(x, 0, sizeof x);
        cr_assert_eq(woolly_quantize_row(TYPES[t], x, q, 512), woolly_row_bytes(TYPES[t], 512));
        cr_assert_eq(woolly_dequantize_row(TYPES[t], q, y, 512), 0);
        for (int i = 0; i < 512; i++)
            cr_assert_eq(y[i], 0.0f, "%s: zero row gave y[%d] = %g", woolly_type_get(TYPES[t])->name, i, y[i]);
        for (int i = 0; i < 512; i++)
            x[i] = i < 256 ? 0.75f : -3.0f;
        woolly_quantize_row(TYPES[t], x, q, 512);
        woolly_dequantize_row(TYPES[t], q, y, 512);
        for (int i = 0; i < 512; i++)
            cr_assert(fabsf(y[i] - x[i]) <= 0.01f * fabsf(x[i]), "%s: constant %g gave y[%d] = %g",
                      woolly_type_get(TYPES[t])->name, x[i], i, y[i]);
    }
}

/* A partial block is refused, as for every format. */
Test(quant_q23k, partial_blocks_are_refused)
{
    float x[256] = {0}, y[256];
    uint8_t q[256];
    for (size_t t = 0; t < 3; t++) {
        cr_assert_eq(woolly_quantize_row(TYPES[t], x, q, 128), 0);
        cr_assert_eq(woolly_dequantize_row(TYPES[t], q, y, 128), -1);
    }
}
