/* bench_quant_error end to end on tiny-llama-f16, quantized here to Q4_0 and Q8_0 by `woolly quantize`:
 * each tensor's relative rounding error in both files, Q8_0's far below Q4_0's in every tensor both
 * quantize to their own type, the summary's ratio and counts (what bench/quant_kl.sh reads); a file
 * against itself is the same in every tensor; with an importance matrix, Woolly's weighted Q4_K_M has
 * the lower weighted error in every matrix it weighs; a file of another model, and bad arguments, fail
 * with a message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *quantized(const char *type)
{
    static char paths[2][4096];
    static int next;
    char *path = paths[next++ % 2];
    snprintf(path, sizeof paths[0], "%s", tu_tmp_path(type));
    char args[16384], *err;
    snprintf(args, sizeof args, "quantize -q %s %s %s", tu_data("models/tiny-llama-f16.gguf"), path, type);
    const int st = tu_run_cli(args, NULL, &err);
    cr_assert_eq(st, 0, "woolly quantize to %s failed: %s", type, err);
    free(err);
    return path;
}

static int quant_error(const char *args, char **out, char **err)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s/bench/bench_quant_error %s", WOOLLY_BUILD_DIR, args);
    return tu_run_shell(cmd, out, err);
}

Test(bench_quant_error, q8_0_rounds_closer_than_q4_0_in_every_tensor)
{
    const char *q4 = quantized("Q4_0"), *q8 = quantized("Q8_0");
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "%s %s %s", tu_data("models/tiny-llama-f16.gguf"), q4, q8);
    const int st = quant_error(args, &out, &err);
    cr_assert_eq(st, 0, "bench_quant_error failed (%d): %s", st, err);
    /* no tensor has the same type in both files (Q4_0's mix gives the output matrix Q6_K), so nothing is
     * summed */
    cr_expect(strstr(out, "| all tensors of the same types | none: the files quantize no tensor alike |"),
              "%s", out);
    int rows = 0, pairs = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char name[256], t4[16], t8[16];
        double e4, e8, ratio;
        if (sscanf(l, "| %255s | %lf %15s | %lf %15s | %lf |", name, &e4, t4, &e8, t8, &ratio) != 6 ||
            strcmp(name, "all") == 0)
            continue;
        rows++;
        cr_expect(e4 > 0 && e8 > 0 && ratio > 0, "%s", l);
        if (strcmp(t4, "Q4_0") == 0 && strcmp(t8, "Q8_0") == 0) {
            pairs++;
            /* 8 bits against 4: some 250 times less squared error on Gaussian weights */
            cr_expect(ratio < 0.02, "Q8_0's error is not far below Q4_0's: %s", l);
        }
    }
    /* the token embedding and the 2 layers' 7 matrices in Q4_0 and Q8_0; the output matrix in Q6_K and
     * Q8_0 */
    cr_expect_eq(pairs, 15, "Q4_0 / Q8_0 tensors: %d", pairs);
    cr_expect_eq(rows, 16, "rows: %d", rows);
    free(out), free(err);
}

/* What the quantizer minimizes with an importance matrix, measured by the same matrix: lower in each of the
 * 14 matrices it weighs, the same in the token embedding and the output matrix (no importance data: both
 * files quantize them unweighted). */
Test(bench_quant_error, the_importance_matrix_lowers_the_weighted_error)
{
    char args[16384], *out, *err;
    char *model = strdup(tu_data("models/tiny-llama-f16.gguf")), *im = strdup(tu_tmp_path("tl.imatrix")),
         *plain = strdup(tu_tmp_path("plain.gguf")), *weighted = strdup(tu_tmp_path("weighted.gguf"));
    snprintf(args, sizeof args,
             "imatrix -m %s -f %s/tests/data/story.txt -o %s -c 128 --chunks 2 -t 2 --quiet", model,
             WOOLLY_SOURCE_DIR, im);
    cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s: %s", args, err);
    free(err);
    snprintf(args, sizeof args, "quantize -q %s %s Q4_K_M", model, plain);
    cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s: %s", args, err);
    free(err);
    snprintf(args, sizeof args, "quantize -q --imatrix %s %s %s Q4_K_M", im, model, weighted);
    cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "woolly %s: %s", args, err);
    free(err);
    snprintf(args, sizeof args, "%s %s %s --imatrix %s", model, plain, weighted, im);
    cr_assert_eq(quant_error(args, &out, &err), 0, "%s", err);
    const char *sum = strstr(out, "| all tensors of the same types |");
    double e_plain, e_weighted, ratio, lo, hi;
    int closer, same, of;
    cr_assert(sum &&
                  sscanf(sum,
                         "| all tensors of the same types | %lf | %lf | %lf (tensors %lf-%lf; closer in %d, "
                         "the same in %d, of %d) |",
                         &e_plain, &e_weighted, &ratio, &lo, &hi, &closer, &same, &of) == 8,
              "%s", out);
    cr_expect(ratio < 1 && e_weighted < e_plain && lo < 1 && hi == 1, "%s", sum);
    cr_expect(closer == 14 && same == 2 && of == 16, "%s", sum);
    free(out), free(err);
    free(model), free(im), free(plain), free(weighted);
}

Test(bench_quant_error, a_file_against_itself_is_the_same_everywhere)
{
    const char *q4 = quantized("Q4_0");
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "%s %s %s", tu_data("models/tiny-llama-f16.gguf"), q4, q4);
    cr_assert_eq(quant_error(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "| 1.000 (tensors 1.000-1.000; closer in 0, the same in 16, of 16) |"), "%s", out);
    free(out), free(err);
}

Test(bench_quant_error, bad_input)
{
    char args[16384], *out, *err;
    char *model = strdup(tu_data("models/tiny-llama-f16.gguf"));
    /* a file of another model: its tensors are not the original's */
    snprintf(args, sizeof args, "%s %s", model, tu_data("models/stories260K.gguf"));
    cr_expect_eq(quant_error(args, &out, &err), 1);
    cr_expect(strstr(err, "has no tensor token_embd.weight of the original's shape"), "%s", err);
    free(out), free(err);
    /* no quantized file; an option without its value; an unknown option */
    const char *usage[] = {"", " --imatrix", " --frobnicate"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s%s%s", model, i == 0 ? "" : " ", i == 0 ? "" : model);
        strcat(args, usage[i]);
        cr_expect_eq(quant_error(args, &out, &err), 2, "%s", args);
        cr_expect(strstr(err, "usage: bench_quant_error"), "%s: %s", args, err);
        free(out), free(err);
    }
    free(model);
}
