/* `woolly quantize --imatrix`: the quantizers weigh each value's rounding error by its column's importance
 * (every format's weighted error on rows with a strongly uneven importance is below what the unweighted
 * quantizer leaves; without weights the bytes are the unweighted quantizer's), the importance matrix file
 * end to end (`woolly imatrix`, then `woolly quantize --imatrix`, then a run of the file), and clear errors
 * for a missing file, a file that is no GGUF or no importance matrix, and one made for another model. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quantize.h"
#include "testutil.h"

enum { COLS = 1024, ROWS = 16 };

/* sum over the rows of qw[col] * (x - dequantized)^2 */
static double weighted_error(enum woolly_type t, const float *x, const float *qw, const float *qw_used)
{
    const size_t rb = woolly_row_bytes(t, COLS);
    uint8_t *q = malloc(rb);
    float *y = malloc(sizeof(float) * COLS);
    cr_assert(q && y);
    double err = 0;
    for (int r = 0; r < ROWS; r++) {
        cr_assert_eq(woolly_quantize_row_weighted(t, x + r * COLS, q, COLS, qw_used), rb);
        cr_assert_eq(woolly_dequantize_row(t, q, y, COLS), 0);
        for (int c = 0; c < COLS; c++) {
            const double e = (double)x[r * COLS + c] - y[c];
            err += qw[c] * e * e;
        }
    }
    free(q), free(y);
    return err;
}

/* The importance of transformer inputs is far from even: a few columns carry most of the squared
 * activation. Here one column in 8 is 100 times more important, the others spread over 2 decades. */
static void make_row_data(float *x, float *qw)
{
    tu_rng rng = {0x1234abcd};
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = 0.02f * tu_rand_normal(&rng);
    for (int c = 0; c < COLS; c++)
        qw[c] = (c % 8 == 3 ? 100.0f : 1.0f) * powf(10.0f, 2.0f * tu_rand_uniform(&rng) - 1.0f);
}

Test(quantize_imatrix, weighted_rows_have_lower_weighted_error)
{
    static const enum woolly_type types[] = {
        WOOLLY_TYPE_Q2_K, WOOLLY_TYPE_Q3_K,   WOOLLY_TYPE_Q4_K,   WOOLLY_TYPE_Q5_K,
        WOOLLY_TYPE_Q6_K, WOOLLY_TYPE_Q4_0,   WOOLLY_TYPE_Q4_1,   WOOLLY_TYPE_Q5_0,
        WOOLLY_TYPE_Q5_1, WOOLLY_TYPE_IQ4_NL, WOOLLY_TYPE_IQ4_XS,
    };
    float *x = malloc(sizeof(float) * ROWS * COLS), qw[COLS];
    cr_assert(x);
    make_row_data(x, qw);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const double plain = weighted_error(types[i], x, qw, NULL);
        const double weighted = weighted_error(types[i], x, qw, qw);
        /* measured 0.16 (Q2_K) to 0.49 (Q4_0) of the unweighted error */
        cr_assert(weighted < 0.9 * plain, "%s: weighted error %g, unweighted %g",
                  woolly_type_get(types[i])->name, weighted, plain);
    }
    free(x);
}

Test(quantize_imatrix, without_importance_the_bytes_are_the_unweighted_ones)
{
    static const enum woolly_type types[] = {WOOLLY_TYPE_Q2_K, WOOLLY_TYPE_Q4_K,   WOOLLY_TYPE_Q6_K,
                                             WOOLLY_TYPE_Q4_1, WOOLLY_TYPE_IQ4_NL, WOOLLY_TYPE_IQ4_XS};
    float *x = malloc(sizeof(float) * ROWS * COLS), qw[COLS];
    cr_assert(x);
    make_row_data(x, qw);
    uint8_t a[COLS * 2], b[COLS * 2];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const size_t rb = woolly_quantize_row(types[i], x, a, COLS);
        cr_assert_eq(woolly_quantize_row_weighted(types[i], x, b, COLS, NULL), rb);
        cr_assert(memcmp(a, b, rb) == 0, "%s", woolly_type_get(types[i])->name);
    }
    /* Q8_0 ignores the importance, as llama.cpp's does */
    const size_t rb = woolly_quantize_row(WOOLLY_TYPE_Q8_0, x, a, COLS);
    cr_assert_eq(woolly_quantize_row_weighted(WOOLLY_TYPE_Q8_0, x, b, COLS, qw), rb);
    cr_assert(memcmp(a, b, rb) == 0);
    free(x);
}

/* llama.cpp's mix changes with an importance matrix: the first eighth of the layers' ffn_down keeps IQ4_NL
 * and IQ4_XS (Q5_K without one) and gets Q4_1 / Q5_1 in Q4_0 / Q5_0 (their own type without one). */
Test(quantize_imatrix, mix_rules_with_an_importance_matrix)
{
    const uint64_t ne[2] = {4096, 4096};
    const woolly_mix_model plain = {.n_layer = 16}, imq = {.n_layer = 16, .imatrix = true};
    static const struct {
        enum woolly_ftype f;
        enum woolly_type without, with;
    } cases[] = {
        {WOOLLY_FTYPE_IQ4_NL, WOOLLY_TYPE_Q5_K, WOOLLY_TYPE_IQ4_NL},
        {WOOLLY_FTYPE_IQ4_XS, WOOLLY_TYPE_Q5_K, WOOLLY_TYPE_IQ4_XS},
        {WOOLLY_FTYPE_Q4_0, WOOLLY_TYPE_Q4_0, WOOLLY_TYPE_Q4_1},
        {WOOLLY_FTYPE_Q5_0, WOOLLY_TYPE_Q5_0, WOOLLY_TYPE_Q5_1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *fn = woolly_ftype_name(cases[i].f);
        cr_assert_eq(woolly_mix_type(cases[i].f, "blk.1.ffn_down.weight", 2, ne, &plain, NULL, 0),
                     cases[i].without, "%s", fn);
        cr_assert_eq(woolly_mix_type(cases[i].f, "blk.1.ffn_down.weight", 2, ne, &imq, NULL, 0),
                     cases[i].with, "%s", fn);
        /* past the first eighth (2 of 16 layers) both are the mix's own type */
        cr_assert_eq(woolly_mix_type(cases[i].f, "blk.2.ffn_down.weight", 2, ne, &imq, NULL, 0),
                     woolly_mix_type(cases[i].f, "blk.2.ffn_down.weight", 2, ne, &plain, NULL, 0), "%s", fn);
    }
}

/* `woolly imatrix` on tiny-llama-f16, `woolly quantize --imatrix` of it, and the file runs. */
Test(quantize_imatrix, imatrix_then_quantize_then_run)
{
    char args[16384], *so, *se;
    char *im = strdup(tu_tmp_path("tiny-llama.imatrix")), *out = strdup(tu_tmp_path("tiny-llama-imq.gguf")),
         *plain = strdup(tu_tmp_path("tiny-llama-noimq.gguf"));
    const char *model = tu_data("models/tiny-llama-f16.gguf");
    char text[4096];
    snprintf(text, sizeof text, "%s/tests/data/story.txt", WOOLLY_SOURCE_DIR);
    snprintf(args, sizeof args, "imatrix -m %s -f %s -o %s -c 128 --chunks 2 -t 2 --quiet", model, text, im);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);

    snprintf(args, sizeof args, "quantize -t 2 --imatrix %s %s %s Q4_K_M", im, model, out);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    /* 2 layers of 7 matrices; the output matrix has no importance data, as in llama.cpp's files */
    cr_assert(strstr(se, "14 matrices weighted") != NULL, "%s", se);
    cr_assert(strstr(se, "output.weight") && strstr(se, "no importance data: unweighted"), "%s", se);
    free(so), free(se);

    snprintf(args, sizeof args, "quantize -q -t 2 %s %s Q4_K_M", model, plain);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    size_t na, nb;
    char *a = tu_read_file(out, &na), *b = tu_read_file(plain, &nb);
    cr_assert(a && b && na == nb, "the same mix has the same size");
    cr_assert(memcmp(a, b, na) != 0, "the importance matrix changed nothing");
    free(a), free(b);

    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128 --chunks 1 -t 2 -q", out, text);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    double ppl = 0;
    const char *at = strstr(so, "Final estimate: PPL = ");
    cr_assert(at && sscanf(at, "Final estimate: PPL = %lf", &ppl) == 1 && isfinite(ppl) && ppl > 1, "%s", so);
    free(so), free(se);
    remove(im), remove(out), remove(plain);
    free(im), free(out), free(plain);
}

Test(quantize_imatrix, bad_importance_matrices_fail_with_a_message)
{
    char args[16384], model[4096], other[4096], text[4096], *so, *se;
    char *im = strdup(tu_tmp_path("stories.imatrix")), *out = strdup(tu_tmp_path("never-written.gguf"));
    snprintf(model, sizeof model, "%s", tu_data("models/tiny-llama-f16.gguf"));
    snprintf(other, sizeof other, "%s", tu_data("models/stories260K.gguf"));
    snprintf(text, sizeof text, "%s/tests/data/story.txt", WOOLLY_SOURCE_DIR);

    snprintf(args, sizeof args, "quantize --imatrix %s/no-such.imatrix %s %s Q4_K_M", tu_tmp_path(""), model,
             out);
    tu_cli_fails(args, "no-such.imatrix");
    snprintf(args, sizeof args, "quantize --imatrix %s %s %s Q4_K_M", text, model, out);
    tu_cli_fails(args, "importance matrix");
    snprintf(args, sizeof args, "quantize --imatrix %s %s %s Q4_K_M", other, model, out);
    tu_cli_fails(args, "is not an importance matrix");

    /* stories260K's matrices have the same names as tiny-llama's, with 64 columns instead of 256 */
    snprintf(args, sizeof args, "imatrix -m %s -f %s -o %s -c 64 --chunks 1 -t 2 --quiet", other, text, im);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    snprintf(args, sizeof args, "quantize --imatrix %s %s %s Q4_K_M", im, model, out);
    tu_cli_fails(args, "tensor 'blk.0.attn_q.weight' has 256 columns");
    FILE *f = fopen(out, "rb");
    cr_assert(f == NULL, "a failed quantization left %s", out);
    remove(im);
    free(im), free(out);
}
