/* The public conversions of quant.h: dispatch on the type, plus the plain formats (F32, F16, BF16) and
 * Q8_0. The K-quants live in quant_q2k.c, quant_q3k_iq4xs.c, quant_q45k.c (the three with mins sharing
 * quant_kmin.c's fit) and quant_q6k.c, the other 32-value formats in quant_legacy.c. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant_formats.h"

/* ---- Q8_0: 32 values share one f16 scale; q in [-127, 127] --------------------------------------- */

static void dequantize_q8_0(const void *blocks, float *y, int64_t nb)
{
    const woolly_block_q8_0 *b = blocks;
    for (int64_t i = 0; i < nb; i++) {
        const float d = woolly_f16_to_f32(b[i].d);
        for (int l = 0; l < WOOLLY_QK8_0; l++)
            y[i * WOOLLY_QK8_0 + l] = d * (float)b[i].qs[l];
    }
}

/* The integers for scale d16 (clamped to [-127, 127]); returns the squared error. */
static float q8_0_assign(const float *x, uint16_t d16, int8_t *q)
{
    const float d = woolly_f16_to_f32(d16), id = d > 0 ? 1.0f / d : 0.0f;
    float err = 0;
    for (int l = 0; l < WOOLLY_QK8_0; l++) {
        q[l] = (int8_t)woolly_round_clamp(x[l] * id, -127, 127);
        const float e = d * (float)q[l] - x[l];
        err += e * e;
    }
    return err;
}

/* The scale first maps the largest magnitude to 127 (rounded outward to f16 so that it still fits);
 * then the least-squares scale for the chosen integers is tried and kept if it lowers the error. */
/* Q8_0 ignores an importance matrix, as llama.cpp's does: at 8 bits the rounding error is small
 * everywhere. */
static void quantize_q8_0(const float *x, void *blocks, int64_t nb, const float *qw)
{
    (void)qw;
    woolly_block_q8_0 *b = blocks;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * WOOLLY_QK8_0;
        float amax = 0;
        for (int l = 0; l < WOOLLY_QK8_0; l++)
            amax = fmaxf(amax, fabsf(xb[l]));
        b[i].d = woolly_scale_to_f16_outward(amax / 127.0f);
        const float err = q8_0_assign(xb, b[i].d, b[i].qs);

        float sqq = 0, sqx = 0;
        for (int l = 0; l < WOOLLY_QK8_0; l++) {
            sqq += (float)b[i].qs[l] * b[i].qs[l];
            sqx += (float)b[i].qs[l] * xb[l];
        }
        if (sqq > 0) {
            int8_t q[WOOLLY_QK8_0];
            const uint16_t d16 = woolly_scale_to_f16(sqx / sqq);
            if (q8_0_assign(xb, d16, q) < err) {
                b[i].d = d16;
                memcpy(b[i].qs, q, sizeof q);
            }
        }
    }
}

/* ---- the plain formats: a block is one value ------------------------------------------------------ */

static void dequantize_f32(const void *src, float *y, int64_t n)
{
    memcpy(y, src, (size_t)n * sizeof *y);
}

static void quantize_f32(const float *x, void *dst, int64_t n, const float *qw)
{
    (void)qw;
    memcpy(dst, x, (size_t)n * sizeof *x);
}

static void dequantize_f16(const void *src, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = woolly_f16_to_f32(((const uint16_t *)src)[i]);
}

static void quantize_f16(const float *x, void *dst, int64_t n, const float *qw)
{
    (void)qw;
    for (int64_t i = 0; i < n; i++)
        ((uint16_t *)dst)[i] = woolly_f32_to_f16(x[i]);
}

static void dequantize_bf16(const void *src, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = woolly_bf16_to_f32(((const uint16_t *)src)[i]);
}

static void quantize_bf16(const float *x, void *dst, int64_t n, const float *qw)
{
    (void)qw;
    for (int64_t i = 0; i < n; i++)
        ((uint16_t *)dst)[i] = woolly_f32_to_bf16(x[i]);
}

/* ---- dispatch ----------------------------------------------------------------------------------- */

/* Every supported type, both directions over nb whole blocks. */
static const struct quant_format {
    enum woolly_type type;
    void (*dequantize)(const void *blocks, float *y, int64_t nb);
    void (*quantize)(const float *x, void *blocks, int64_t nb, const float *qw);
} FORMATS[] = {
    {WOOLLY_TYPE_F32, dequantize_f32, quantize_f32},
    {WOOLLY_TYPE_F16, dequantize_f16, quantize_f16},
    {WOOLLY_TYPE_BF16, dequantize_bf16, quantize_bf16},
    {WOOLLY_TYPE_Q8_0, dequantize_q8_0, quantize_q8_0},
    {WOOLLY_TYPE_Q4_0, woolly_dequantize_q4_0, woolly_quantize_q4_0},
    {WOOLLY_TYPE_Q4_1, woolly_dequantize_q4_1, woolly_quantize_q4_1},
    {WOOLLY_TYPE_Q5_0, woolly_dequantize_q5_0, woolly_quantize_q5_0},
    {WOOLLY_TYPE_Q5_1, woolly_dequantize_q5_1, woolly_quantize_q5_1},
    {WOOLLY_TYPE_IQ4_NL, woolly_dequantize_iq4_nl, woolly_quantize_iq4_nl},
    {WOOLLY_TYPE_Q4_K, woolly_dequantize_q4_k, woolly_quantize_q4_k},
    {WOOLLY_TYPE_Q5_K, woolly_dequantize_q5_k, woolly_quantize_q5_k},
    {WOOLLY_TYPE_Q6_K, woolly_dequantize_q6_k, woolly_quantize_q6_k},
    {WOOLLY_TYPE_Q2_K, woolly_dequantize_q2_k, woolly_quantize_q2_k},
    {WOOLLY_TYPE_Q3_K, woolly_dequantize_q3_k, woolly_quantize_q3_k},
    {WOOLLY_TYPE_IQ4_XS, woolly_dequantize_iq4_xs, woolly_quantize_iq4_xs},
};

static const struct quant_format *format_of(enum woolly_type t)
{
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].type == t)
            return &FORMATS[i];
    return NULL;
}

bool woolly_can_dequantize(enum woolly_type t)
{
    return format_of(t) != NULL;
}

bool woolly_can_quantize(enum woolly_type t)
{
    return format_of(t) != NULL;
}

/* Whole blocks in n elements of type t; -1 if t is not supported here or n is not a whole number. */
static int64_t whole_blocks(enum woolly_type t, int64_t n)
{
    if (!format_of(t) || n < 0)
        return -1;
    const int64_t be = woolly_type_get(t)->block_elems;
    return n % be == 0 ? n / be : -1;
}

int woolly_dequantize_row(enum woolly_type t, const void *src, float *dst, int64_t n)
{
    const int64_t nb = whole_blocks(t, n);
    if (nb < 0)
        return -1;
    format_of(t)->dequantize(src, dst, nb);
    return 0;
}

size_t woolly_quantize_row(enum woolly_type t, const float *src, void *dst, int64_t n)
{
    return woolly_quantize_row_weighted(t, src, dst, n, NULL);
}

size_t woolly_quantize_row_weighted(enum woolly_type t, const float *src, void *dst, int64_t n,
                                    const float *qw)
{
    const int64_t nb = whole_blocks(t, n);
    if (nb <= 0)
        return 0;
    format_of(t)->quantize(src, dst, nb, qw);
    return woolly_row_bytes(t, n);
}
