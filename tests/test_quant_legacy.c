/* The 32-value formats beside Q8_0 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): their bit layouts on hand-made
 * blocks (llama.cpp's, value j in the low nibble of qs[j] or the high nibble of qs[j - 16], Q5's fifth
 * bit j in bit j of qh), quantize-dequantize round trips with named bounds, and the edge rows (zeros,
 * constants) the quantizers must keep. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "testutil.h"

/* NMSE of a round trip of N(0, s^2) rows (s = 0.02, 1, 100): about 1.2x what the quantizers reach (Q4_0
 * 6.7e-3, Q4_1 5.4e-3, Q5_0 1.6e-3, Q5_1 1.26e-3, IQ4_NL 5.4e-3), so that one that gets worse fails. The
 * plain scales llama.cpp's reference quantizers take (the largest magnitude on the end of the range, or
 * min/max) reach 7.5e-3, 6.3e-3, 1.8e-3 and 1.45e-3 on the same rows. */
#define Q4_0_ROUNDTRIP_MAX_NMSE 8.0e-3
#define Q4_1_ROUNDTRIP_MAX_NMSE 6.5e-3
#define Q5_0_ROUNDTRIP_MAX_NMSE 1.95e-3
#define Q5_1_ROUNDTRIP_MAX_NMSE 1.55e-3
#define IQ4_NL_ROUNDTRIP_MAX_NMSE 6.5e-3
/* Constant rows: the error is the rounding of the f16 scale (and minimum), relative to the constant. */
#define CONST_MAX_REL_ERR 2e-3

enum { N = 32 * 512 };

static const struct {
    enum woolly_type type;
    double max_nmse;
} FORMATS[] = {
    {WOOLLY_TYPE_Q4_0, Q4_0_ROUNDTRIP_MAX_NMSE}, {WOOLLY_TYPE_Q4_1, Q4_1_ROUNDTRIP_MAX_NMSE},
    {WOOLLY_TYPE_Q5_0, Q5_0_ROUNDTRIP_MAX_NMSE}, {WOOLLY_TYPE_Q5_1, Q5_1_ROUNDTRIP_MAX_NMSE},
    {WOOLLY_TYPE_IQ4_NL, IQ4_NL_ROUNDTRIP_MAX_NMSE},
};
enum { N_FORMATS = sizeof FORMATS / sizeof FORMATS[0] };

static const char *name_of(enum woolly_type t)
{
    return woolly_type_get(t)->name;
}

static void roundtrip(enum woolly_type t, const float *x, float *y, int64_t n)
{
    const size_t bytes = woolly_row_bytes(t, n);
    void *q = malloc(bytes);
    cr_assert(q);
    cr_assert_eq(woolly_quantize_row(t, x, q, n), bytes, "%s: quantize_row returned a wrong size", name_of(t));
    cr_assert_eq(woolly_dequantize_row(t, q, y, n), 0, "%s: dequantize_row failed", name_of(t));
    free(q);
}

static void fill_normal(float *x, int64_t n, float scale, uint64_t seed)
{
    tu_rng rng = {seed};
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * tu_rand_normal(&rng);
}

Test(quant_legacy, geometry_and_support)
{
    const struct {
        enum woolly_type t;
        size_t bytes;
    } want[] = {{WOOLLY_TYPE_Q4_0, 18}, {WOOLLY_TYPE_Q4_1, 20}, {WOOLLY_TYPE_Q5_0, 22}, {WOOLLY_TYPE_Q5_1, 24},
                {WOOLLY_TYPE_IQ4_NL, 18}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert(woolly_can_quantize(want[i].t) && woolly_can_dequantize(want[i].t), "%s", name_of(want[i].t));
        cr_assert_eq(woolly_row_bytes(want[i].t, 64), 2 * want[i].bytes, "%s", name_of(want[i].t));
        cr_assert_eq(woolly_row_bytes(want[i].t, 48), 0, "%s: a partial block", name_of(want[i].t));
    }
    cr_assert_eq(woolly_type_from_name("IQ4_NL"), WOOLLY_TYPE_IQ4_NL);
    cr_assert_eq(WOOLLY_TYPE_IQ4_NL, 20, "GGUF's number for IQ4_NL");
    float x[32] = {0};
    uint8_t q[64];
    cr_assert_eq(woolly_quantize_row(WOOLLY_TYPE_Q4_0, x, q, 31), 0, "partial block must give 0 bytes");
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q5_1, q, x, 33), -1, "partial block must fail");
}

/* ---- block layouts, on hand-made blocks --------------------------------------------------------- */

/* The nibbles of value j: qs[j] low (j < 16), qs[j - 16] high. */
static void put_nibbles(uint8_t qs[16], const int q[32])
{
    for (int l = 0; l < 16; l++)
        qs[l] = (uint8_t)((q[l] & 15) | (q[16 + l] & 15) << 4);
}

/* The fifth bits: bit j of qh, read as a little-endian uint32. */
static void put_qh(uint8_t qh[4], const int q[32])
{
    for (int j = 0; j < 32; j++)
        qh[j / 8] = (uint8_t)(qh[j / 8] | (q[j] >> 4 & 1) << (j % 8));
}

Test(quant_legacy, q4_0_layout)
{
    woolly_block_q4_0 b = {.d = 0x3800}; /* 0.5 */
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (j * 7 + 3) % 16;
    put_nibbles(b.qs, q);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q4_0, &b, y, 32), 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], 0.5f * (float)(q[j] - 8), "y[%d]", j);
}

Test(quant_legacy, q4_1_layout)
{
    woolly_block_q4_1 b = {.d = 0x3800, .m = 0xC000}; /* 0.5, -2 */
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (j * 5 + 1) % 16;
    put_nibbles(b.qs, q);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q4_1, &b, y, 32), 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], 0.5f * (float)q[j] - 2.0f, "y[%d]", j);
}

Test(quant_legacy, q5_0_layout)
{
    woolly_block_q5_0 b = {.d = 0x3800};
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (j * 13 + 5) % 32;
    put_nibbles(b.qs, q);
    put_qh(b.qh, q);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q5_0, &b, y, 32), 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], 0.5f * (float)(q[j] - 16), "y[%d]", j);
}

Test(quant_legacy, q5_1_layout)
{
    woolly_block_q5_1 b = {.d = 0x3400, .m = 0x3C00}; /* 0.25, 1 */
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (j * 11 + 7) % 32;
    put_nibbles(b.qs, q);
    put_qh(b.qh, q);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q5_1, &b, y, 32), 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], 0.25f * (float)q[j] + 1.0f, "y[%d]", j);
}

Test(quant_legacy, iq4_nl_layout)
{
    /* llama.cpp's table (kvalues_iq4nl) */
    static const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    woolly_block_iq4_nl b = {.d = 0x4000}; /* 2 */
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (j * 3 + 2) % 16;
    put_nibbles(b.qs, q);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_IQ4_NL, &b, y, 32), 0);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], 2.0f * (float)values[q[j]], "y[%d]", j);
}

/* ---- quantizing ---------------------------------------------------------------------------------- */

Test(quant_legacy, random_rows_roundtrip_within_bounds)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    cr_assert(x && y);
    const float scales[] = {0.02f, 1.0f, 100.0f};
    for (int i = 0; i < N_FORMATS; i++)
        for (int s = 0; s < 3; s++) {
            fill_normal(x, N, scales[s], 2000 + (uint64_t)(10 * i + s));
            roundtrip(FORMATS[i].type, x, y, N);
            const double nmse = tu_nmse(y, x, N);
            cr_assert(nmse <= FORMATS[i].max_nmse, "%s, N(0, %g^2): NMSE %.3g > %.3g", name_of(FORMATS[i].type),
                      scales[s], nmse, FORMATS[i].max_nmse);
        }
    free(x), free(y);
}

/* The plain scale of llama.cpp's reference Q4_0 (d = v / -8 for the value v of largest magnitude, q
 * rounded and clamped to [0, 15]): ours searches around it and may only do better. */
Test(quant_legacy, q4_0_no_worse_than_the_plain_scale)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *z = malloc(sizeof(float) * N);
    cr_assert(x && y && z);
    fill_normal(x, N, 1.0f, 77);
    roundtrip(WOOLLY_TYPE_Q4_0, x, y, N);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0, v = 0;
        for (int l = 0; l < 32; l++)
            if (fabsf(x[32 * b + l]) > amax)
                amax = fabsf(x[32 * b + l]), v = x[32 * b + l];
        const float d = woolly_f16_to_f32(woolly_f32_to_f16(v / -8.0f));
        for (int l = 0; l < 32; l++) {
            const float q = fminf(15.0f, fmaxf(0.0f, roundf(x[32 * b + l] / d + 8.0f)));
            z[32 * b + l] = d * (q - 8.0f);
        }
    }
    const double ours = tu_nmse(y, x, N), plain = tu_nmse(z, x, N);
    cr_assert(ours < plain, "Q4_0: NMSE %.4g, the plain scale's %.4g", ours, plain);
    free(x), free(y), free(z);
}

/* IQ4_NL's grid is asymmetric (-127 .. 113): a block whose largest magnitude belongs on the +113 end is
 * only represented well from that end. Values on the grid at a scale of 0.5, the largest +113: the
 * quantizer must find that scale and reproduce them exactly (from the -127 end alone the best fit errs). */
Test(quant_legacy, iq4_nl_fits_from_either_end_of_its_grid)
{
    static const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
    float x[32], y[32];
    for (int l = 0; l < 32; l++)
        x[l] = 0.5f * (float)values[l == 5 ? 15 : 1 + (l * 7) % 14];
    roundtrip(WOOLLY_TYPE_IQ4_NL, x, y, 32);
    for (int l = 0; l < 32; l++)
        cr_assert_eq(y[l], x[l], "y[%d] = %g for %g", l, y[l], x[l]);
}

Test(quant_legacy, zero_rows_stay_exactly_zero)
{
    float x[64] = {0}, y[64];
    for (int i = 0; i < N_FORMATS; i++) {
        roundtrip(FORMATS[i].type, x, y, 64);
        for (int l = 0; l < 64; l++)
            cr_assert_eq(y[l], 0.0f, "%s: y[%d] = %g", name_of(FORMATS[i].type), l, y[l]);
    }
}

Test(quant_legacy, constant_rows_are_reproduced)
{
    const float c[] = {0.37f, -2.5f, 1000.0f};
    float x[64], y[64];
    for (int i = 0; i < N_FORMATS; i++)
        for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
            for (int l = 0; l < 64; l++)
                x[l] = c[k];
            roundtrip(FORMATS[i].type, x, y, 64);
            for (int l = 0; l < 64; l++)
                cr_assert(fabsf(y[l] - c[k]) <= CONST_MAX_REL_ERR * fabsf(c[k]), "%s: %g -> %g",
                          name_of(FORMATS[i].type), c[k], y[l]);
        }
}

Test(quant_legacy, quantize_then_dequantize_is_stable)
{
    /* values already on a block's grid quantize again with far less error than a random row */
    float x[256], y[256], z[256];
    fill_normal(x, 256, 0.02f, 3);
    for (int i = 0; i < N_FORMATS; i++) {
        roundtrip(FORMATS[i].type, x, y, 256);
        roundtrip(FORMATS[i].type, y, z, 256);
        const double nmse = tu_nmse(z, y, 256);
        cr_assert(nmse <= 0.1 * FORMATS[i].max_nmse, "%s: re-quantizing dequantized values moved them (NMSE %.3g)",
                  name_of(FORMATS[i].type), nmse);
    }
}

Test(quant_legacy, non_finite_values_stay_in_their_block)
{
    float x[96], y[96];
    fill_normal(x, 96, 1.0f, 5);
    x[40] = NAN;
    for (int i = 0; i < N_FORMATS; i++) {
        roundtrip(FORMATS[i].type, x, y, 96);
        for (int l = 0; l < 96; l++)
            if (l < 32 || l >= 64)
                cr_assert(fabsf(y[l] - x[l]) < 0.5f, "%s: y[%d] = %g for %g", name_of(FORMATS[i].type), l, y[l],
                          x[l]);
    }
}
