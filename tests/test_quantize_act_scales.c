/* `woolly quantize --imatrix FILE --act-scales`: the scales folded into the norms keep the model's
 * function (norm x matrix column, element by element, as before up to Q8_0's rounding, with scales far from
 * 1), the search scales stories260K's layers (a trained model, whose inputs are uneven) and the file runs,
 * and the flag's errors and refusals are clear. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "testutil.h"

static char *make_imatrix(const char *model, const char *name)
{
    char args[16384], text[4096], *so, *se;
    char *im = strdup(tu_tmp_path(name));
    snprintf(text, sizeof text, "%s/tests/data/story.txt", WOOLLY_SOURCE_DIR);
    snprintf(args, sizeof args, "imatrix -m %s -f %s -o %s -c 128 --chunks 2 -t 2 --quiet", model, text, im);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    return im;
}

static float *read_rows(const gguf_file *g, const char *name, uint64_t *cols, uint64_t *rows)
{
    const gguf_tensor *t = gguf_find_tensor(g, name);
    cr_assert(t, "no tensor %s", name);
    *cols = t->ne[0], *rows = t->n_dims > 1 ? t->ne[1] : 1;
    float *x = malloc(sizeof(float) * *cols * *rows);
    cr_assert(x);
    const size_t rb = woolly_row_bytes(t->type, (int64_t)*cols);
    for (uint64_t r = 0; r < *rows; r++)
        cr_assert_eq(
            woolly_dequantize_row(t->type, (const uint8_t *)t->data + r * rb, x + r * *cols, (int64_t)*cols),
            0);
    return x;
}

/* norm[c] * w[r][c] of `in` equals that of `out` up to out's Q8_0 rounding (half a step of the block's
 * scale, the step read back from the block's largest value), and the norm changed by a spread of at
 * least `spread` between its columns' factors. */
static void assert_same_function(const gguf_file *in, const gguf_file *out, const char *norm, const char *mat,
                                 double spread)
{
    uint64_t c0, r0, c1, r1, cn, rn;
    float *ni = read_rows(in, norm, &cn, &rn), *no = read_rows(out, norm, &cn, &rn);
    float *wi = read_rows(in, mat, &c0, &r0), *wo = read_rows(out, mat, &c1, &r1);
    cr_assert(c0 == cn && c1 == c0 && r1 == r0);
    double lo = INFINITY, hi = 0;
    for (uint64_t c = 0; c < cn; c++) {
        const double f = (double)ni[c] / no[c];
        lo = fmin(lo, f), hi = fmax(hi, f);
    }
    cr_assert(hi / lo >= spread, "%s: the columns' scales spread only %.3f", norm, hi / lo);
    for (uint64_t r = 0; r < r0; r++)
        for (uint64_t b = 0; b < c0; b += 32) {
            double amax = 0;
            for (uint64_t c = b; c < b + 32; c++)
                amax = fmax(amax, fabs(wo[r * c0 + c]));
            /* half a step, and the step's own rounding to binary16 over 127 steps */
            const double half_step = 0.6 * amax / 127 + 1e-12;
            for (uint64_t c = b; c < b + 32; c++) {
                const double before = (double)ni[c] * wi[r * c0 + c], after = (double)no[c] * wo[r * c0 + c];
                cr_assert(fabs(after - before) <= fabs(no[c]) * half_step,
                          "%s row %llu col %llu: %g against %g", mat, (unsigned long long)r,
                          (unsigned long long)c, after, before);
            }
        }
    free(ni), free(no), free(wi), free(wo);
}

Test(quantize_act_scales, folded_scales_keep_the_function)
{
    char args[16384], *so, *se;
    char model[4096];
    snprintf(model, sizeof model, "%s", tu_data("models/stories260K.gguf"));
    char *im = make_imatrix(model, "stories-fold.imatrix"), *out = strdup(tu_tmp_path("stories-fold.gguf"));
    snprintf(args, sizeof args, "quantize -t 2 --imatrix %s --act-scales-alpha 1 %s %s Q8_0", im, model, out);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    cr_assert(strstr(se, "activation scales: 10 of 10 norm groups scaled"), "%s", se);
    free(so), free(se);
    woolly_error err = {{0}};
    gguf_file *a = gguf_open(model, &err), *b = gguf_open(out, &err);
    cr_assert(a && b, "%s", err.msg);
    /* alpha 1: s = sqrt(importance); a trained model's inputs spread it by far more than 2 */
    static const char *const pairs[][2] = {
        {"blk.0.attn_norm.weight", "blk.0.attn_q.weight"}, {"blk.0.attn_norm.weight", "blk.0.attn_k.weight"},
        {"blk.0.attn_norm.weight", "blk.0.attn_v.weight"}, {"blk.3.ffn_norm.weight", "blk.3.ffn_gate.weight"},
        {"blk.3.ffn_norm.weight", "blk.3.ffn_up.weight"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        assert_same_function(a, b, pairs[i][0], pairs[i][1], 2.0);
    /* what no norm feeds alone is as it was: ffn_down's input is the FFN's product */
    uint64_t c, r;
    float *x = read_rows(a, "output_norm.weight", &c, &r), *y = read_rows(b, "output_norm.weight", &c, &r);
    cr_assert(memcmp(x, y, sizeof(float) * c) == 0, "output_norm changed");
    free(x), free(y);
    gguf_close(a), gguf_close(b);
    remove(im), remove(out);
    free(im), free(out);
}

static double ppl_of(const char *model)
{
    char args[16384], *so, *se;
    snprintf(args, sizeof args, "perplexity -m %s -f %s/tests/data/story.txt -c 128 --chunks 2 -t 2 -q",
             model, WOOLLY_SOURCE_DIR);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    double ppl = 0;
    const char *at = strstr(so, "Final estimate: PPL = ");
    cr_assert(at && sscanf(at, "Final estimate: PPL = %lf", &ppl) == 1 && isfinite(ppl), "%s", so);
    free(so), free(se);
    return ppl;
}

/* The search on stories260K in Q4_0: some layers scaled, their error lower, and the file runs about as
 * well as the one without scales. */
Test(quantize_act_scales, search_scales_a_trained_model)
{
    char args[16384], *so, *se;
    char model[4096];
    snprintf(model, sizeof model, "%s", tu_data("models/stories260K.gguf"));
    char *im = make_imatrix(model, "stories-search.imatrix");
    char *scaled = strdup(tu_tmp_path("stories-as.gguf")), *plain = strdup(tu_tmp_path("stories-plain.gguf"));
    snprintf(args, sizeof args, "quantize -t 2 --imatrix %s --act-scales %s %s Q4_0", im, model, scaled);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    int n = 0, groups = 0;
    double gain = 0;
    const char *at = strstr(se, "activation scales: ");
    cr_assert(at && sscanf(at,
                           "activation scales: %d of %d norm groups scaled, their output error on the "
                           "sampled rows x%lf",
                           &n, &groups, &gain) == 3,
              "%s", se);
    cr_assert(groups == 10 && n >= 1 && gain < 0.99, "%d of %d groups, error x%g", n, groups, gain);
    cr_assert(strstr(se, "blk.0.attn_norm.weight") && strstr(se, "note: activation scales, alpha"), "%s", se);
    free(so), free(se);
    snprintf(args, sizeof args, "quantize -q -t 2 --imatrix %s %s %s Q4_0", im, model, plain);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    free(so), free(se);
    const double p_scaled = ppl_of(scaled), p_plain = ppl_of(plain), p_orig = ppl_of(model);
    /* both near the original's; the scales' effect on the KL divergence is measured in bench/RESULTS.md */
    cr_assert(fabs(p_scaled / p_orig - 1) < 0.1 && fabs(p_plain / p_orig - 1) < 0.1,
              "PPL %g, %g, original %g", p_scaled, p_plain, p_orig);
    remove(im), remove(scaled), remove(plain);
    free(im), free(scaled), free(plain);
}

Test(quantize_act_scales, refusals_are_clear)
{
    char args[16384], model[4096], moe[4096], *so, *se;
    char *out = strdup(tu_tmp_path("act-scales-out.gguf"));
    snprintf(model, sizeof model, "%s", tu_data("models/stories260K.gguf"));
    snprintf(moe, sizeof moe, "%s", tu_data("models/tiny-qwen3moe-f16.gguf"));
    snprintf(args, sizeof args, "quantize --act-scales %s %s Q4_0", model, out);
    tu_cli_fails(args, "need an importance matrix (--imatrix FILE)");
    snprintf(args, sizeof args, "quantize --act-scales-alpha 1.5 %s %s Q4_0", model, out);
    tu_cli_fails(args, "--act-scales-alpha");
    /* a mixture's router reads ffn_norm's output too: nothing is scaled, and it says so */
    char *im = make_imatrix(moe, "moe.imatrix");
    snprintf(args, sizeof args, "quantize -t 2 --imatrix %s --act-scales %s %s Q4_K_M", im, moe, out);
    cr_assert_eq(tu_run_cli(args, &so, &se), 0, "woolly %s: %s", args, se);
    cr_assert(strstr(se, "activation scales: none applied (the architecture is none of"), "%s", se);
    free(so), free(se);
    remove(im), remove(out);
    free(im), free(out);
}
