/* Every finite F16 and BF16 value through every float kernel of those weights this CPU runs (F32
 * activations, every level and tile, on GGUF rows and in the 16-row layouts): a row holds one value and
 * zeros, so each output is one product, and it must be that product rounded once to F32, the bits an exact
 * widening of the weight gives. Random weights rarely reach the subnormals, the zeros of either sign or
 * the largest values; a widening done otherwise than by the conversion instruction (one tried in integer:
 * bench/journal/2026-12-06-zen5-6.md) is exact only if it gets those right too, and activations from 2^-20
 * to about 2^70 would expose a scale folded into them. The row length (45) leaves a tail after the row
 * kernels' 16-value steps and an odd column after the layouts' pairs of columns, and the value's column
 * moves along it, so the masked loads and the tails are checked too. BF16 weights on BF16 activations
 * the same, activations that BF16 holds exactly: the products are exact there too, but for vdpbf16ps,
 * which reads BF16 subnormals as zero and flushes results below F32's normal range to zero. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "registry.h"

enum { K = 45, M = 5 };

/* The activations: magnitudes from 2^-20 to about 2^70 and both signs, each token's values alike. */
static const float X_SCALE[M] = {1.0f, -3.0e4f, 1.0e-3f, 7.5e20f, -1.0f / 1048576.0f};

/* BF16 activations: powers of two over the same range, so that BF16 holds every activation exactly. */
static const float X_SCALE_BF16[M] = {1.0f, -32768.0f, 1.0f / 1024.0f, 590295810358705651712.0f /* 2^69 */,
                                      -1.0f / 1048576.0f};

static float x_at(enum woolly_act act, int t, int c)
{
    return (act == WOOLLY_ACT_BF16 ? X_SCALE_BF16 : X_SCALE)[t] * (1.0f + (float)c / 64.0f);
}

/* The finite values of a 16-bit format (exponent field not all ones), in rows of K with the value at
 * column r % K; returns the row count. */
static int64_t finite_rows(enum woolly_type wtype, uint16_t **out)
{
    uint16_t *w = calloc((size_t)65536 * K, sizeof *w);
    cr_assert_not_null(w);
    int64_t rows = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const bool finite = wtype == WOOLLY_TYPE_F16 ? (h & 0x7C00) != 0x7C00 : (h & 0x7F80) != 0x7F80;
        if (finite) {
            w[rows * K + rows % K] = (uint16_t)h;
            rows++;
        }
    }
    *out = w;
    return rows;
}

static void check_type(enum woolly_type wtype, enum woolly_act act)
{
    uint16_t *w;
    const int64_t rows = finite_rows(wtype, &w);
    float *x = malloc(sizeof(float) * M * K), *y = malloc(sizeof(float) * M * rows);
    uint16_t *xh = malloc(sizeof(uint16_t) * M * K);
    cr_assert(x && y && xh);
    for (int t = 0; t < M; t++)
        for (int c = 0; c < K; c++) {
            x[t * K + c] = x_at(act, t, c);
            xh[t * K + c] = woolly_f32_to_bf16(x[t * K + c]);
            if (act == WOOLLY_ACT_BF16)
                cr_assert_eq(woolly_bf16_to_f32(xh[t * K + c]), x[t * K + c], "activation %d, %d not BF16", t,
                             c);
        }
    void *repacked = NULL;
    int n_all, checked = 0;
    const woolly_kernel *all = woolly_kernel_list(&n_all);
    for (int i = 0; i < n_all; i++) {
        const woolly_kernel *k = &all[i];
        if ((k->op != WOOLLY_OP_GEMV && k->op != WOOLLY_OP_GEMM) || k->wtype != wtype || k->act != act ||
            !woolly_kernel_runs(k))
            continue;
        /* The amx level's F16 tiles multiply BF16 parts of split operands: within 2^-16 of each product by
         * design (matmul/amx/float_bf16_tiles.c.j2), which their generated tests hold them to. */
        if (k->isa == WOOLLY_ISA_AMX)
            continue;
        /* A layout's kernels read the rows repacked by the layout's own routine. */
        const void *wk = w;
        size_t w_row_bytes = K * sizeof *w;
        if (k->layout) {
            cr_assert_eq(rows % k->layout->rows, 0);
            w_row_bytes = woolly_layout_row_bytes(k->layout, wtype, K);
            cr_assert_gt(w_row_bytes, 0);
            free(repacked);
            repacked = malloc(w_row_bytes * (size_t)rows);
            cr_assert_not_null(repacked);
            k->layout->repack(&(woolly_repack_args){.src = w,
                                                    .src_row_bytes = K * sizeof *w,
                                                    .dst = repacked,
                                                    .dst_row_bytes = w_row_bytes,
                                                    .k = K,
                                                    .r0 = 0,
                                                    .r1 = rows});
            wk = repacked;
        }
        const int64_t m = k->op == WOOLLY_OP_GEMV ? 1 : M;
        memset(y, 0, sizeof(float) * M * rows);
        const woolly_matmul_args a = {.w = wk,
                                      .w_row_bytes = w_row_bytes,
                                      .x = act == WOOLLY_ACT_BF16 ? (const void *)xh : (const void *)x,
                                      .x_row_bytes = act == WOOLLY_ACT_BF16 ? K * sizeof *xh : K * sizeof *x,
                                      .y = y,
                                      .y_stride = (size_t)rows,
                                      .k = K,
                                      .m = m,
                                      .r0 = 0,
                                      .r1 = rows};
        k->matmul(&a);
        const bool flushes = k->features & WOOLLY_CPU_AVX512BF16; /* vdpbf16ps's subnormals */
        int64_t bad = 0;
        for (int64_t t = 0; t < m; t++)
            for (int64_t r = 0; r < rows; r++) {
                const uint16_t h = w[r * K + r % K];
                const double wv = wtype == WOOLLY_TYPE_F16 ? woolly_f16_to_f32(h) : woolly_bf16_to_f32(h);
                const float want = (float)(wv * (double)x_at(act, (int)t, (int)(r % K)));
                const float got = y[t * rows + r];
                const bool flushed = flushes && got == 0.0f && (fabs(wv) < FLT_MIN || fabsf(want) < FLT_MIN);
                if (got != want && !flushed && bad++ < 3)
                    cr_log_error("%s: value 0x%04x, token %d: %.9g, want %.9g", k->name, h, (int)t, got,
                                 want);
            }
        cr_expect_eq(bad, 0, "%s: %lld of %lld products not exact", k->name, (long long)bad,
                     (long long)(m * rows));
        checked++;
    }
    fprintf(stderr, "%s x %s: %d kernels, %lld values each\n", wtype == WOOLLY_TYPE_F16 ? "F16" : "BF16",
            woolly_act_name(act), checked, (long long)rows);
    cr_expect_geq(checked, act == WOOLLY_ACT_F32 ? 2 : 1, "the scalar kernels at least");
    free(xh);
    free(repacked);
    free(w);
    free(x);
    free(y);
}

Test(matmul_half_values, every_f16_value_exact)
{
    check_type(WOOLLY_TYPE_F16, WOOLLY_ACT_F32);
}

Test(matmul_half_values, every_bf16_value_exact)
{
    check_type(WOOLLY_TYPE_BF16, WOOLLY_ACT_F32);
}

Test(matmul_half_values, every_bf16_value_exact_on_bf16_activations)
{
    check_type(WOOLLY_TYPE_BF16, WOOLLY_ACT_BF16);
}
