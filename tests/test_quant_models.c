/* The reference conversions on the shared models, whose quantized files llama.cpp wrote from the same
 * weights as tiny-llama-f16.gguf:
 *  - dequantizing every tensor of the Q4_K_M, Q6_K and Q8_0 files lands within the format's expected
 *    error of the F16 source (a layout mistake would give errors of the order of the weights);
 *  - quantizing the F16 source to each tensor's type in those files gives an RMS error at most
 *    MAX_RMS_RATIO times the error of llama.cpp's quantization of the same tensor. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "gguf_check.h"
#include "testutil.h"

/* NMSE of llama.cpp's files against the F16 source, N(0, 0.02) weights: Q4_K 5.1e-3, Q6_K 3.2e-4,
 * Q8_0 2.9e-5 (measured); the bounds leave 20%. */
#define SHARED_Q4_K_MAX_NMSE 6.1e-3
#define SHARED_Q6_K_MAX_NMSE 3.8e-4
#define SHARED_Q8_0_MAX_NMSE 3.5e-5
/* Our quantizer against llama.cpp's, per tensor: RMS(ours - f16) <= MAX_RMS_RATIO * RMS(theirs - f16),
 * on the first MAX_ROWS rows of each tensor (test_quantize checks whole files through the CLI). */
#define MAX_RMS_RATIO 1.02
#define MAX_ROWS 2048

static gguf_file *open_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    return tu_gguf_open_data(rel);
}

static int64_t n_elems(const gguf_tensor *t)
{
    return (int64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
}

/* The whole tensor as floats (heap). */
static float *dequantize_tensor(const gguf_tensor *t)
{
    const int64_t n = n_elems(t);
    float *y = malloc(sizeof(float) * (size_t)n);
    cr_assert(y);
    cr_assert(woolly_can_dequantize(t->type), "%s: type %d", t->name, (int)t->type);
    cr_assert_eq(woolly_dequantize_row(t->type, t->data, y, n), 0, "%s", t->name);
    return y;
}

static double bound_for(enum woolly_type t)
{
    switch (t) {
    case WOOLLY_TYPE_Q4_K:
        return SHARED_Q4_K_MAX_NMSE;
    case WOOLLY_TYPE_Q6_K:
        return SHARED_Q6_K_MAX_NMSE;
    case WOOLLY_TYPE_Q8_0:
        return SHARED_Q8_0_MAX_NMSE;
    default:
        cr_assert_fail("unexpected type %d", (int)t);
        return 0;
    }
}

static void check_dequantization(const char *model)
{
    gguf_file *src = open_model("tiny-llama-f16"), *q = open_model(model);
    cr_assert_eq(q->n_tensors, src->n_tensors, "%s: tensor count", model);
    for (uint64_t i = 0; i < q->n_tensors; i++) {
        const gguf_tensor *t = &q->tensors[i];
        const gguf_tensor *s = gguf_find_tensor(src, t->name);
        cr_assert(s != NULL, "%s: %s not in the F16 file", model, t->name);
        cr_assert_eq(n_elems(s), n_elems(t), "%s: %s shape", model, t->name);
        float *x = dequantize_tensor(s), *y = dequantize_tensor(t);
        if (t->type == WOOLLY_TYPE_F32) {
            cr_assert(memcmp(x, y, sizeof(float) * (size_t)n_elems(t)) == 0, "%s: F32 %s differs", model,
                      t->name);
        } else {
            const double nmse = tu_nmse(y, x, (size_t)n_elems(t)), bound = bound_for(t->type);
            cr_assert(nmse <= bound, "%s: %s (%s) NMSE against F16 %.3g > %.3g", model, t->name,
                      woolly_type_get(t->type)->name, nmse, bound);
        }
        free(x), free(y);
    }
    gguf_close(src), gguf_close(q);
}

Test(quant_models, dequantize_q4_k_m_file)
{
    check_dequantization("tiny-llama-q4_k_m");
}
Test(quant_models, dequantize_q6_k_file)
{
    check_dequantization("tiny-llama-q6_k");
}
Test(quant_models, dequantize_q8_0_file)
{
    check_dequantization("tiny-llama-q8_0");
}

static void check_quantizer(const char *model)
{
    gguf_file *src = open_model("tiny-llama-f16"), *ref = open_model(model);
    double worst = 0;
    const char *worst_name = "";
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const gguf_tensor *r = &ref->tensors[i];
        if (r->type == WOOLLY_TYPE_F32)
            continue;
        const gguf_tensor *s = gguf_find_tensor(src, r->name);
        cr_assert(s != NULL, "%s missing in the F16 file", r->name);
        const int64_t k = (int64_t)s->ne[0], rows = n_elems(s) / k < MAX_ROWS ? n_elems(s) / k : MAX_ROWS;
        const int64_t n = rows * k;
        float *x = dequantize_tensor(s), *theirs = dequantize_tensor(r),
              *ours = malloc(sizeof(float) * (size_t)n);
        const size_t row_bytes = woolly_row_bytes(r->type, k);
        uint8_t *q = malloc(row_bytes);
        cr_assert(ours && q && row_bytes > 0);
        for (int64_t row = 0; row < rows; row++) {
            cr_assert_eq(woolly_quantize_row(r->type, x + row * k, q, k), row_bytes);
            cr_assert_eq(woolly_dequantize_row(r->type, q, ours + row * k, k), 0);
        }
        const double ratio = sqrt(tu_nmse(ours, x, (size_t)n) / tu_nmse(theirs, x, (size_t)n));
        cr_assert(ratio <= MAX_RMS_RATIO, "%s: %s (%s) RMS error %.4fx llama.cpp's > %.2f", model, r->name,
                  woolly_type_get(r->type)->name, ratio, MAX_RMS_RATIO);
        if (ratio > worst)
            worst = ratio, worst_name = r->name;
        free(x), free(theirs), free(ours), free(q);
    }
    cr_log_info("%s: worst RMS error ratio %.4f (%s)", model, worst, worst_name);
    gguf_close(src), gguf_close(ref);
}

Test(quant_models, quantizer_matches_llama_cpp_q4_k_m)
{
    check_quantizer("tiny-llama-q4_k_m");
}
Test(quant_models, quantizer_matches_llama_cpp_q6_k)
{
    check_quantizer("tiny-llama-q6_k");
}
Test(quant_models, quantizer_matches_llama_cpp_q8_0)
{
    check_quantizer("tiny-llama-q8_0");
}
