/* The reference conversions of quant.h: quantize-dequantize round trips of every format with named
 * error bounds, on random rows and on edge values; exactness of the half-precision conversions on
 * special values; the bit layout of the K-quant blocks on hand-made blocks. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "testutil.h"

/* NMSE of a round trip of N(0, s^2) rows (s = 0.02, 1, 100). The rounding of F16/BF16 bounds the
 * relative error of each element by 2^-11 / 2^-8; the block formats' figures are about 1.2x what the
 * quantizers reach (Q4_K 4.9e-3, Q5_K 1.2e-3, Q6_K 2.9e-4, Q8_0 3.0e-5), so that a quantizer that got
 * worse by more than that fails. */
#define F16_ROUNDTRIP_MAX_NMSE 1e-7
#define BF16_ROUNDTRIP_MAX_NMSE 5e-6
#define Q8_0_ROUNDTRIP_MAX_NMSE 3.6e-5
#define Q4_K_ROUNDTRIP_MAX_NMSE 5.6e-3
#define Q5_K_ROUNDTRIP_MAX_NMSE 1.4e-3
#define Q6_K_ROUNDTRIP_MAX_NMSE 3.4e-4
/* Constant rows: the error is the rounding of the f16 scale(s), relative to the constant. */
#define CONST_MAX_REL_ERR 1e-3
/* A huge outlier is reproduced to this relative accuracy (its block's scale is built around it); its
 * block's error relative to the block's energy stays below OUTLIER_BLOCK_MAX_NMSE (the other values of
 * the block lose their precision: a K-quant's 6-bit sub-block scales cannot span 1000x; measured
 * 1.6e-4 for Q4_K). */
#define OUTLIER_MAX_REL_ERR 1e-3
#define OUTLIER_BLOCK_MAX_NMSE 3e-4
/* Rows so small that the scales are f16 subnormals: coarse, but finite and still the same signal. */
#define TINY_MAX_NMSE 0.05

enum { N_BLOCKS = 64, N = 256 * N_BLOCKS };

static const enum woolly_type FORMATS[] = {
    WOOLLY_TYPE_F32,  WOOLLY_TYPE_F16,  WOOLLY_TYPE_BF16, WOOLLY_TYPE_Q8_0,
    WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q5_K, WOOLLY_TYPE_Q6_K,
};
enum { N_FORMATS = sizeof FORMATS / sizeof FORMATS[0] };

static double roundtrip_bound(enum woolly_type t)
{
    switch (t) {
    case WOOLLY_TYPE_F32:
        return 0;
    case WOOLLY_TYPE_F16:
        return F16_ROUNDTRIP_MAX_NMSE;
    case WOOLLY_TYPE_BF16:
        return BF16_ROUNDTRIP_MAX_NMSE;
    case WOOLLY_TYPE_Q8_0:
        return Q8_0_ROUNDTRIP_MAX_NMSE;
    case WOOLLY_TYPE_Q4_K:
        return Q4_K_ROUNDTRIP_MAX_NMSE;
    case WOOLLY_TYPE_Q5_K:
        return Q5_K_ROUNDTRIP_MAX_NMSE;
    case WOOLLY_TYPE_Q6_K:
        return Q6_K_ROUNDTRIP_MAX_NMSE;
    default:
        cr_assert_fail("no bound for type %d", (int)t);
        return 0;
    }
}

static const char *name_of(enum woolly_type t)
{
    return woolly_type_get(t)->name;
}

/* Quantizes x (n elements) to t and back into y; checks the byte count and that y is finite. */
static void roundtrip(enum woolly_type t, const float *x, float *y, int64_t n)
{
    const size_t bytes = woolly_row_bytes(t, n);
    void *q = malloc(bytes);
    cr_assert(q);
    cr_assert_eq(woolly_quantize_row(t, x, q, n), bytes, "%s: quantize_row returned a wrong size",
                 name_of(t));
    cr_assert_eq(woolly_dequantize_row(t, q, y, n), 0, "%s: dequantize_row failed", name_of(t));
    free(q);
}

static void fill_normal(float *x, int64_t n, float scale, uint64_t seed)
{
    tu_rng rng = {seed};
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * tu_rand_normal(&rng);
}

Test(quant, supported_formats)
{
    for (int i = 0; i < N_FORMATS; i++) {
        cr_assert(woolly_can_dequantize(FORMATS[i]), "%s", name_of(FORMATS[i]));
        cr_assert(woolly_can_quantize(FORMATS[i]), "%s", name_of(FORMATS[i]));
    }
    cr_assert_not(woolly_can_dequantize(WOOLLY_TYPE_Q8_1));
    cr_assert_not(woolly_can_quantize(WOOLLY_TYPE_Q8_K)); /* an intermediate format of llama.cpp, no file type */
    float x[256] = {0}, y[256];
    uint8_t q[512];
    cr_assert_eq(woolly_quantize_row(WOOLLY_TYPE_Q8_1, x, q, 32), 0, "unsupported type must give 0 bytes");
    cr_assert_eq(woolly_quantize_row(WOOLLY_TYPE_Q4_K, x, q, 128), 0, "partial block must give 0 bytes");
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q8_0, q, y, 33), -1, "partial block must fail");
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q8_1, q, y, 32), -1, "unsupported type must fail");
}

Test(quant, random_rows_roundtrip_within_bounds)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    cr_assert(x && y);
    const float scales[] = {0.02f, 1.0f, 100.0f};
    for (int i = 0; i < N_FORMATS; i++)
        for (int s = 0; s < 3; s++) {
            const enum woolly_type t = FORMATS[i];
            fill_normal(x, N, scales[s], 1000 + (uint64_t)(10 * i + s));
            roundtrip(t, x, y, N);
            const double nmse = tu_nmse(y, x, N);
            cr_assert(nmse <= roundtrip_bound(t), "%s, N(0, %g^2): NMSE %.3g > %.3g", name_of(t), scales[s],
                      nmse, roundtrip_bound(t));
        }
    free(x), free(y);
}

Test(quant, half_formats_round_each_element_to_half_an_ulp)
{
    float x[256], y[256];
    fill_normal(x, 256, 1.0f, 7);
    roundtrip(WOOLLY_TYPE_F16, x, y, 256);
    for (int i = 0; i < 256; i++)
        cr_assert(fabsf(y[i] - x[i]) <= ldexpf(fabsf(x[i]), -11), "F16: %g -> %g", x[i], y[i]);
    roundtrip(WOOLLY_TYPE_BF16, x, y, 256);
    for (int i = 0; i < 256; i++)
        cr_assert(fabsf(y[i] - x[i]) <= ldexpf(fabsf(x[i]), -8), "BF16: %g -> %g", x[i], y[i]);
    roundtrip(WOOLLY_TYPE_F32, x, y, 256);
    cr_assert(memcmp(x, y, sizeof x) == 0, "F32 must be exact");
}

Test(quant, zero_rows_stay_exactly_zero)
{
    static float x[512], y[512];
    for (int i = 0; i < N_FORMATS; i++) {
        for (int j = 0; j < 512; j++)
            y[j] = 1.0f;
        roundtrip(FORMATS[i], x, y, 512);
        for (int j = 0; j < 512; j++)
            cr_assert_eq(y[j], 0.0f, "%s: zero row gave y[%d] = %g", name_of(FORMATS[i]), j, y[j]);
    }
}

Test(quant, constant_rows_are_reproduced)
{
    static float x[512], y[512];
    /* magnitudes whose scales are normal halves in every format (tiny rows are tested below) */
    const float constants[] = {0.37f, -1.5f, -0.2f, 40.0f};
    for (int i = 0; i < N_FORMATS; i++)
        for (int c = 0; c < 4; c++) {
            const enum woolly_type t = FORMATS[i];
            for (int j = 0; j < 512; j++)
                x[j] = constants[c];
            roundtrip(t, x, y, 512);
            const double tol = t == WOOLLY_TYPE_BF16 ? ldexp(1, -8) : CONST_MAX_REL_ERR;
            for (int j = 0; j < 512; j++)
                cr_assert(fabsf(y[j] - x[j]) <= tol * fabsf(x[j]), "%s: constant %g gave y[%d] = %g",
                          name_of(t), constants[c], j, y[j]);
        }
}

Test(quant, huge_outlier_is_kept_and_stays_local)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    cr_assert(x && y);
    enum { AT = 300 }; /* in the second 256-block, the second 32-block */
    for (int i = 0; i < N_FORMATS; i++) {
        const enum woolly_type t = FORMATS[i];
        fill_normal(x, N, 1.0f, 77);
        x[AT] = 1000.0f;
        roundtrip(t, x, y, N);
        cr_assert(fabsf(y[AT] - x[AT]) <= OUTLIER_MAX_REL_ERR * x[AT], "%s: outlier 1000 became %g",
                  name_of(t), y[AT]);
        /* the other 256-blocks do not notice it */
        const double rest = tu_nmse(y + 512, x + 512, N - 512);
        cr_assert(rest <= roundtrip_bound(t), "%s: NMSE away from the outlier %.3g > %.3g", name_of(t), rest,
                  roundtrip_bound(t));
        const double own = tu_nmse(y + 256, x + 256, 256);
        cr_assert(own <= OUTLIER_BLOCK_MAX_NMSE, "%s: outlier block NMSE %.3g > %.3g", name_of(t), own,
                  OUTLIER_BLOCK_MAX_NMSE);
    }
    free(x), free(y);
}

Test(quant, tiny_values_with_subnormal_scales)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    cr_assert(x && y);
    const float scales[] = {1e-5f, 1e-7f};
    for (int i = 0; i < N_FORMATS; i++)
        for (int s = 0; s < 2; s++) {
            const enum woolly_type t = FORMATS[i];
            fill_normal(x, N, scales[s], 99 + (uint64_t)s);
            roundtrip(t, x, y, N);
            for (int j = 0; j < N; j++)
                cr_assert(isfinite(y[j]), "%s: tiny row gave non-finite y[%d]", name_of(t), j);
            const double nmse = tu_nmse(y, x, N);
            cr_assert(nmse <= TINY_MAX_NMSE, "%s, N(0, %g^2): NMSE %.3g > %.3g", name_of(t), scales[s], nmse,
                      TINY_MAX_NMSE);
        }
    free(x), free(y);
}

Test(quant, non_finite_values_stay_in_their_block)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    cr_assert(x && y);
    for (int i = 1; i < N_FORMATS; i++) {
        const enum woolly_type t = FORMATS[i];
        fill_normal(x, N, 1.0f, 5);
        x[3] = NAN;
        x[40] = INFINITY;
        x[41] = -INFINITY;
        roundtrip(t, x, y, N);
        const double rest = tu_nmse(y + 256, x + 256, N - 256);
        cr_assert(rest <= roundtrip_bound(t), "%s: NMSE after a NaN/inf block %.3g", name_of(t), rest);
    }
    free(x), free(y);
}

/* ---- half-precision conversions ----------------------------------------------------------------- */

static uint16_t to_f16(float f)
{
    return woolly_f32_to_f16(f);
}

Test(quant, f16_every_value_roundtrips)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = woolly_f16_to_f32((uint16_t)h);
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
            cr_assert(isnan(f), "f16 %04x should be NaN", h);
            cr_assert(isnan(woolly_f16_to_f32(to_f16(f))), "NaN %04x must stay NaN", h);
            continue;
        }
        cr_assert_eq(to_f16(f), h, "f16 %04x -> %g -> %04x", h, f, to_f16(f));
    }
}

Test(quant, f16_special_values)
{
    cr_assert_eq(to_f16(0.0f), 0x0000);
    cr_assert_eq(to_f16(-0.0f), 0x8000);
    cr_assert_eq(to_f16(1.0f), 0x3C00);
    cr_assert_eq(to_f16(-2.0f), 0xC000);
    cr_assert_eq(to_f16(65504.0f), 0x7BFF); /* largest finite */
    cr_assert_eq(to_f16(65519.0f), 0x7BFF); /* below the halfway point to 65536 */
    cr_assert_eq(to_f16(65520.0f), 0x7C00); /* halfway rounds to even: inf */
    cr_assert_eq(to_f16(1e10f), 0x7C00);
    cr_assert_eq(to_f16(-INFINITY), 0xFC00);
    cr_assert_eq(to_f16(INFINITY), 0x7C00);
    cr_assert_eq(to_f16(ldexpf(1, -14)), 0x0400);    /* smallest normal */
    cr_assert_eq(to_f16(ldexpf(1023, -24)), 0x03FF); /* largest subnormal */
    cr_assert_eq(to_f16(ldexpf(1, -24)), 0x0001);    /* smallest subnormal */
    cr_assert_eq(to_f16(ldexpf(1, -25)), 0x0000);    /* tie between 0 and 2^-24: even */
    cr_assert_eq(to_f16(ldexpf(1.0001f, -25)), 0x0001);
    cr_assert_eq(to_f16(ldexpf(3, -25)), 0x0002);        /* tie between 1 and 2 ulps: even */
    cr_assert_eq(to_f16(1.0f + ldexpf(1, -11)), 0x3C00); /* tie: even */
    cr_assert_eq(to_f16(1.0f + ldexpf(3, -11)), 0x3C02); /* tie: even */
    cr_assert_eq(to_f16(FLT_MIN), 0x0000);
    const uint16_t nan = to_f16(NAN);
    cr_assert((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF), "NaN became %04x", nan);
    cr_assert(isnan(woolly_f16_to_f32(0x7E00)));
    cr_assert_eq(woolly_f16_to_f32(0x0001), ldexpf(1, -24));
    cr_assert_eq(woolly_f16_to_f32(0x8400), -ldexpf(1, -14));
}

static float bits(uint32_t u)
{
    return woolly_bits_to_f32(u);
}

Test(quant, bf16_every_value_roundtrips)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = woolly_bf16_to_f32((uint16_t)h);
        if (isnan(f)) {
            cr_assert(isnan(woolly_bf16_to_f32(woolly_f32_to_bf16(f))), "NaN %04x must stay NaN", h);
            continue;
        }
        cr_assert_eq(woolly_f32_to_bf16(f), h, "bf16 %04x -> %g -> %04x", h, f, woolly_f32_to_bf16(f));
    }
}

Test(quant, bf16_special_values)
{
    cr_assert_eq(woolly_f32_to_bf16(1.0f), 0x3F80);
    cr_assert_eq(woolly_f32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(woolly_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);    /* tie: even */
    cr_assert_eq(woolly_f32_to_bf16(1.0f + ldexpf(3, -8)), 0x3F82);    /* tie: even */
    cr_assert_eq(woolly_f32_to_bf16(1.0f + ldexpf(1.5f, -8)), 0x3F81); /* above the tie */
    cr_assert_eq(woolly_f32_to_bf16(FLT_MAX), 0x7F80);                 /* rounds up to inf */
    cr_assert_eq(woolly_f32_to_bf16(-INFINITY), 0xFF80);
    cr_assert_eq(woolly_f32_to_bf16(bits(0x00000001)), 0x0000); /* smallest f32 subnormal */
    cr_assert_eq(woolly_f32_to_bf16(bits(0x00018000)), 0x0002); /* subnormal tie: even */
    /* a NaN whose payload is only in the low bits must not truncate to inf */
    cr_assert(isnan(woolly_bf16_to_f32(woolly_f32_to_bf16(bits(0x7F800001)))));
    cr_assert(isnan(woolly_bf16_to_f32(woolly_f32_to_bf16(bits(0xFF800001)))));
}

Test(quant, dequantize_half_rows_uses_the_conversions)
{
    uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
    float y[4];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_F16, h, y, 4), 0);
    cr_assert(y[0] == 1.0f && y[1] == -2.0f && y[2] == ldexpf(1, -24) && y[3] == 65504.0f);
    uint16_t b[2] = {0x3F80, 0xC040};
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_BF16, b, y, 2), 0);
    cr_assert(y[0] == 1.0f && y[1] == -3.0f);
}

/* ---- block layouts, on hand-made blocks --------------------------------------------------------- */

Test(quant, q8_0_layout)
{
    woolly_block_q8_0 b = {.d = 0x3800}; /* 0.5 */
    for (int l = 0; l < 32; l++)
        b.qs[l] = (int8_t)(l * 8 - 128);
    float y[32];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q8_0, &b, y, 32), 0);
    for (int l = 0; l < 32; l++)
        cr_assert_eq(y[l], 0.5f * (float)(l * 8 - 128));
}

/* Packs 6-bit scales and mins as GGUF stores them: sub-blocks 0-3 in the low 6 bits of bytes 0-3
 * (scales) and 4-7 (mins); sub-blocks 4-7 in the nibbles of bytes 8-11 (scale low, min high) with their
 * top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins). */
static void pack_6bit(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[12])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

static const uint8_t SC[8] = {1, 2, 3, 63, 17, 33, 49, 62};
static const uint8_t MN[8] = {5, 6, 7, 8, 20, 36, 52, 63};

Test(quant, q4_k_layout)
{
    woolly_block_q4_k b = {.d = 0x3C00, .dmin = 0x3800}; /* 1.0, 0.5 */
    pack_6bit(SC, MN, b.scales);
    for (int i = 0; i < 128; i++) /* byte i of 32-byte chunk c: low nibble -> sub-block 2c, high -> 2c+1 */
        b.qs[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    float y[256];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q4_K, &b, y, 256), 0);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            const int q = j % 2 == 0 ? l % 16 : 15 - l % 16;
            cr_assert_eq(y[32 * j + l], (float)SC[j] * q - 0.5f * MN[j], "y[%d]", 32 * j + l);
        }
}

Test(quant, q5_k_layout)
{
    woolly_block_q5_k b = {.d = 0x3C00, .dmin = 0x3800};
    pack_6bit(SC, MN, b.scales);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    for (int l = 0; l < 32; l++) /* bit j of qh[l]: the fifth bit of element l of sub-block j */
        b.qh[l] = (uint8_t)(l * 37 + 11);
    float y[256];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q5_K, &b, y, 256), 0);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            const int q = (j % 2 == 0 ? l % 16 : 15 - l % 16) + 16 * ((b.qh[l] >> j) & 1);
            cr_assert_eq(y[32 * j + l], (float)SC[j] * q - 0.5f * MN[j], "y[%d]", 32 * j + l);
        }
}

Test(quant, q6_k_layout)
{
    woolly_block_q6_k b = {.d = 0x3800}; /* 0.5 */
    int8_t want_q[256];
    for (int i = 0; i < 256; i++)
        want_q[i] = (int8_t)((i * 7 + 3) % 64 - 32);
    for (int s = 0; s < 16; s++)
        b.scales[s] = (int8_t)(s * 17 - 128);
    /* per half h: ql[64h + l] = low nibbles of values l (bits 0-3) and l + 64 (bits 4-7), ql[64h + 32 + l]
     * those of l + 32 and l + 96; qh[32h + l] the high 2 bits of l, l + 32, l + 64, l + 96 */
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            uint8_t u[4];
            for (int r = 0; r < 4; r++)
                u[r] = (uint8_t)(want_q[128 * h + 32 * r + l] + 32);
            b.ql[64 * h + l] = (uint8_t)((u[0] & 15) | (u[2] & 15) << 4);
            b.ql[64 * h + 32 + l] = (uint8_t)((u[1] & 15) | (u[3] & 15) << 4);
            b.qh[32 * h + l] = (uint8_t)(u[0] >> 4 | (u[1] >> 4) << 2 | (u[2] >> 4) << 4 | (u[3] >> 4) << 6);
        }
    float y[256];
    cr_assert_eq(woolly_dequantize_row(WOOLLY_TYPE_Q6_K, &b, y, 256), 0);
    for (int i = 0; i < 256; i++)
        cr_assert_eq(y[i], 0.5f * (float)b.scales[i / 16] * want_q[i], "y[%d]", i);
}

Test(quant, quantize_then_dequantize_is_stable)
{
    /* values that are already on a block's grid quantize again with far less error than a random row:
     * the quantizer's choices are consistent with the layout it writes */
    float x[256], y[256], z[256];
    fill_normal(x, 256, 0.02f, 3);
    const enum woolly_type fmts[] = {WOOLLY_TYPE_Q8_0, WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q5_K, WOOLLY_TYPE_Q6_K};
    for (int i = 0; i < 4; i++) {
        roundtrip(fmts[i], x, y, 256);
        roundtrip(fmts[i], y, z, 256);
        const double nmse = tu_nmse(z, y, 256);
        cr_assert(nmse <= 0.1 * roundtrip_bound(fmts[i]),
                  "%s: re-quantizing dequantized values moved them (NMSE %.3g)", name_of(fmts[i]), nmse);
    }
}
