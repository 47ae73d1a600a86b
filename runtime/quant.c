/* The public conversions of quant.h: dispatch on the type, plus the plain formats (F32, F16, BF16) and
 * Q8_0. The K-quants live in quant_q45k.c and quant_q6k.c. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant_formats.h"

uint16_t woolly_f32_to_bf16(float f)
{
    uint32_t x = woolly_f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep the sign, make sure it stays a (quiet) NaN */
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7FFF + ((x >> 16) & 1); /* round to nearest even at bit 16; overflow carries into inf */
    return (uint16_t)(x >> 16);
}

bool woolly_can_dequantize(enum woolly_type t)
{
    switch (t) {
    case WOOLLY_TYPE_F32:
    case WOOLLY_TYPE_F16:
    case WOOLLY_TYPE_BF16:
    case WOOLLY_TYPE_Q8_0:
    case WOOLLY_TYPE_Q4_K:
    case WOOLLY_TYPE_Q5_K:
    case WOOLLY_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

bool woolly_can_quantize(enum woolly_type t)
{
    return woolly_can_dequantize(t);
}

/* ---- Q8_0: 32 values share one f16 scale; q in [-127, 127] --------------------------------------- */

static void dequantize_q8_0(const woolly_block_q8_0 *b, float *y, int64_t nb)
{
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
static void quantize_q8_0(const float *x, woolly_block_q8_0 *b, int64_t nb)
{
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

/* ---- dispatch ----------------------------------------------------------------------------------- */

/* Whole blocks in n elements of type t; -1 if t is not supported here or n is not a whole number. */
static int64_t whole_blocks(enum woolly_type t, int64_t n)
{
    if (!woolly_can_dequantize(t) || n < 0)
        return -1;
    const int64_t be = woolly_type_get(t)->block_elems;
    return n % be == 0 ? n / be : -1;
}

int woolly_dequantize_row(enum woolly_type t, const void *src, float *dst, int64_t n)
{
    const int64_t nb = whole_blocks(t, n);
    if (nb < 0)
        return -1;
    switch (t) {
    case WOOLLY_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case WOOLLY_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = woolly_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case WOOLLY_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = woolly_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case WOOLLY_TYPE_Q8_0:
        dequantize_q8_0(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q4_K:
        woolly_dequantize_q4_k(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q5_K:
        woolly_dequantize_q5_k(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q6_K:
        woolly_dequantize_q6_k(src, dst, nb);
        break;
    default:
        return -1;
    }
    return 0;
}

size_t woolly_quantize_row(enum woolly_type t, const float *src, void *dst, int64_t n)
{
    const int64_t nb = whole_blocks(t, n);
    if (!woolly_can_quantize(t) || nb <= 0)
        return 0;
    const size_t bytes = woolly_row_bytes(t, n);
    switch (t) {
    case WOOLLY_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case WOOLLY_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = woolly_f32_to_f16(src[i]);
        break;
    case WOOLLY_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = woolly_f32_to_bf16(src[i]);
        break;
    case WOOLLY_TYPE_Q8_0:
        quantize_q8_0(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q4_K:
        woolly_quantize_q4_k(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q5_K:
        woolly_quantize_q5_k(src, dst, nb);
        break;
    case WOOLLY_TYPE_Q6_K:
        woolly_quantize_q6_k(src, dst, nb);
        break;
    default:
        return 0;
    }
    return bytes;
}
