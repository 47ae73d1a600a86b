#include "kernel_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "testutil.h"

/* Paddings that are not multiples of anything, so that a kernel assuming packed rows is caught. */
enum { X_PAD_FLOATS = 5, Y_PAD_FLOATS = 7, KV_PAD_ELEMS = 3, Q_PAD_FLOATS = 11 };
static const float SENTINEL = -12345.0f;

void kc_check_matmul(woolly_matmul_fn fn, const char *name, enum woolly_type wtype, const kc_matmul_case *c,
                     double max_nmse)
{
    const int64_t rows = c->r1 + 2, k = c->k, m = c->m;
    const size_t row_bytes = woolly_row_bytes(wtype, k);
    cr_assert(row_bytes > 0, "%s: k=%lld is not a whole number of blocks", name, (long long)k);
    tu_rng rng = {(uint64_t)(k * 1000003 + m * 101 + c->r0 * 7 + c->r1)};

    uint8_t *w = malloc(row_bytes * (size_t)rows);
    float *src = malloc(sizeof(float) * (size_t)k);
    float *wf = malloc(sizeof(float) * (size_t)(k * rows));
    const size_t x_stride = (size_t)k + X_PAD_FLOATS, y_stride = (size_t)rows + Y_PAD_FLOATS;
    float *x = malloc(sizeof(float) * x_stride * (size_t)m);
    float *y = malloc(sizeof(float) * y_stride * (size_t)m);
    cr_assert(w && src && wf && x && y);

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++)
            src[i] = 0.02f * tu_rand_normal(&rng);
        cr_assert_eq(woolly_quantize_row(wtype, src, w + (size_t)r * row_bytes, k), row_bytes);
        cr_assert_eq(woolly_dequantize_row(wtype, w + (size_t)r * row_bytes, wf + r * k, k), 0);
    }
    for (size_t i = 0; i < x_stride * (size_t)m; i++)
        x[i] = tu_rand_normal(&rng);
    for (size_t i = 0; i < y_stride * (size_t)m; i++)
        y[i] = SENTINEL;

    woolly_matmul_args a = {.w = w, .w_row_bytes = row_bytes, .x = x, .x_row_bytes = x_stride * sizeof(float),
                            .y = y, .y_stride = y_stride, .k = k, .m = m, .r0 = c->r0, .r1 = c->r1};
    fn(&a);

    double num = 0, den = 0;
    for (int64_t t = 0; t < m; t++)
        for (size_t r = 0; r < y_stride; r++) {
            const float got = y[(size_t)t * y_stride + r];
            if ((int64_t)r < c->r0 || (int64_t)r >= c->r1) {
                cr_assert_eq(got, SENTINEL, "%s: wrote y[%lld][%zu] outside rows [%lld, %lld)", name,
                             (long long)t, r, (long long)c->r0, (long long)c->r1);
                continue;
            }
            double ref = 0;
            for (int64_t i = 0; i < k; i++)
                ref += (double)wf[(int64_t)r * k + i] * (double)x[(size_t)t * x_stride + (size_t)i];
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
    const double nmse = num / (den > 0 ? den : 1);
    cr_assert(nmse <= max_nmse, "%s: k=%lld m=%lld rows [%lld, %lld): NMSE %.3g > %.3g", name, (long long)k,
              (long long)m, (long long)c->r0, (long long)c->r1, nmse, max_nmse);
    free(w), free(src), free(wf), free(x), free(y);
}

static void store_cache(enum woolly_type t, void *dst, size_t i, float v, float *back)
{
    if (t == WOOLLY_TYPE_F16) {
        uint16_t h = woolly_f32_to_f16(v);
        ((uint16_t *)dst)[i] = h;
        *back = woolly_f16_to_f32(h);
    } else {
        ((float *)dst)[i] = v;
        *back = v;
    }
}

void kc_check_attn(woolly_attn_fn fn, const char *name, enum woolly_type cache_type, const kc_attn_case *c,
                   double max_nmse)
{
    cr_assert(cache_type == WOOLLY_TYPE_F16 || cache_type == WOOLLY_TYPE_F32, "%s: cache type", name);
    const int64_t hd = c->head_dim, n = c->n_kv, g = c->n_group;
    const size_t elem = cache_type == WOOLLY_TYPE_F16 ? 2 : 4;
    const size_t kv_stride = (size_t)hd + KV_PAD_ELEMS, q_stride = (size_t)hd + Q_PAD_FLOATS;
    tu_rng rng = {(uint64_t)(hd * 7919 + n * 31 + g)};

    void *k = malloc(elem * kv_stride * (size_t)n), *v = malloc(elem * kv_stride * (size_t)n);
    float *kf = malloc(sizeof(float) * (size_t)(hd * n)), *vf = malloc(sizeof(float) * (size_t)(hd * n));
    float *q = malloc(sizeof(float) * q_stride * (size_t)g), *out = malloc(sizeof(float) * q_stride * (size_t)g);
    double *p = malloc(sizeof(double) * (size_t)n);
    cr_assert(k && v && kf && vf && q && out && p);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < hd; i++) {
            store_cache(cache_type, k, (size_t)j * kv_stride + (size_t)i, tu_rand_normal(&rng), &kf[j * hd + i]);
            store_cache(cache_type, v, (size_t)j * kv_stride + (size_t)i, tu_rand_normal(&rng), &vf[j * hd + i]);
        }
    for (size_t i = 0; i < q_stride * (size_t)g; i++)
        q[i] = tu_rand_normal(&rng), out[i] = SENTINEL;
    const float scale = 1.0f / sqrtf((float)hd);

    woolly_attn_args a = {.q = q, .q_stride = q_stride, .k = k, .v = v, .kv_stride = kv_stride, .n_kv = n,
                          .head_dim = hd, .n_group = g, .scale = scale, .out = out, .out_stride = q_stride};
    fn(&a);

    double num = 0, den = 0;
    for (int64_t h = 0; h < g; h++) {
        const float *qh = q + (size_t)h * q_stride;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t i = 0; i < hd; i++)
                s += (double)qh[i] * kf[j * hd + i];
            p[j] = s * scale;
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int64_t j = 0; j < n; j++)
            sum += (p[j] = exp(p[j] - mx));
        for (int64_t i = 0; i < (int64_t)q_stride; i++) {
            const float got = out[(size_t)h * q_stride + (size_t)i];
            if (i >= hd) {
                cr_assert_eq(got, SENTINEL, "%s: wrote past head_dim in head %lld", name, (long long)h);
                continue;
            }
            double ref = 0;
            for (int64_t j = 0; j < n; j++)
                ref += p[j] / sum * vf[j * hd + i];
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
    }
    const double nmse = num / (den > 0 ? den : 1);
    cr_assert(nmse <= max_nmse, "%s: head_dim=%lld n_kv=%lld group=%lld: NMSE %.3g > %.3g", name, (long long)hd,
              (long long)n, (long long)g, nmse, max_nmse);
    free(k), free(v), free(kf), free(vf), free(q), free(out), free(p);
}
