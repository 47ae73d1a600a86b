/* bench/attn_pair.sh end to end: this tree against itself (the scalar attention kernel, which every
 * machine runs) gives one row per cache size, with outputs that agree exactly, since both versions are
 * the same code; decode and prefill; another kernel on another cache type (OLD_KERNEL) gives outputs
 * that differ by that cache's rounding; a missing tree or kernel, kernels of two head dimensions and
 * bad sizes fail with a message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KERNEL "attn_f16_flash_scalar_d64_b8x64"

/* Runs bench/attn_pair.sh ARGS with the environment assignments `env`, against this build, capturing
 * its output. Returns the exit status, or -1 if it did not exit. */
static int attn_pair(const char *env, const char *args, char **out, char **err)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s BUILD=%s sh %s/bench/attn_pair.sh %s", env, WOOLLY_BUILD_DIR,
             WOOLLY_SOURCE_DIR, args);
    return tu_run_shell(cmd, out, err);
}

/* Checks the table's rows: one per n_kv in `sizes` (in order), with n_q, head dimension 64, positive
 * rates and a largest difference of exactly 0, or, with max_diff > 0, above 0 and at most max_diff. */
static void check_rows(char *out, const long *sizes, int n_sizes, int n_q, double max_diff)
{
    int rows = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        long n_kv;
        int nq, d;
        double old_rate, new_rate, ratio, lo, hi;
        char diff[32];
        if (sscanf(l, "| %ld | %d | %d | %lf | %lf | %lf (%lf-%lf) | %31s |", &n_kv, &nq, &d, &old_rate,
                   &new_rate, &ratio, &lo, &hi, diff) != 9)
            continue;
        cr_assert_lt(rows, n_sizes, "more rows than sizes: %s", l);
        cr_expect_eq(n_kv, sizes[rows], "%s", l);
        cr_expect_eq(nq, n_q, "%s", l);
        cr_expect_eq(d, 64, "%s", l);
        cr_expect(old_rate > 0 && new_rate > 0 && ratio > 0 && lo <= ratio && ratio <= hi, "%s", l);
        if (max_diff == 0)
            cr_expect_str_eq(diff, "0", "the same code gave different outputs: %s", l);
        else
            cr_expect(atof(diff) > 0 && atof(diff) <= max_diff, "outputs %s apart, expected (0, %g]: %s",
                      diff, max_diff, l);
        rows++;
    }
    cr_expect_eq(rows, n_sizes, "rows: %d", rows);
}

Test(bench_attn_pair, same_tree_decode)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "%s %s 17 70", WOOLLY_SOURCE_DIR, KERNEL);
    const int st = attn_pair("ROUNDS=3", args, &out, &err);
    cr_assert_eq(st, 0, "attn_pair.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(strstr(out, KERNEL ": ") && strstr(out, "3 alternating rounds"), "%s", out);
    cr_expect(strstr(out, "| n_kv | n_q | d | old GB/s | new |"), "%s", out);
    const long sizes[] = {17, 70};
    check_rows(out, sizes, 2, 1, 0);
    free(out);
    free(err);
}

Test(bench_attn_pair, same_tree_prefill)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "%s %s 40", WOOLLY_SOURCE_DIR, KERNEL);
    const int st = attn_pair("ROUNDS=2 N_Q=9", args, &out, &err);
    cr_assert_eq(st, 0, "attn_pair.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(strstr(out, "| old GFLOP/s |"), "%s", out);
    const long sizes[] = {40};
    check_rows(out, sizes, 1, 9, 0);
    free(out);
    free(err);
}

/* A Q8_0 cache's kernel against the F16 one, each reading its own cache of the same values: the outputs
 * differ by the 8-bit rounding of the Q8_0 rows, values of about 1 rounded to 1/127 of a block's largest. */
Test(bench_attn_pair, another_kernel_on_another_cache)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "%s %s 70", WOOLLY_SOURCE_DIR, KERNEL);
    const int st = attn_pair("ROUNDS=2 OLD_KERNEL=attn_q80_flash_scalar_d64_b8x64", args, &out, &err);
    cr_assert_eq(st, 0, "attn_pair.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(strstr(out, KERNEL ": attn_q80_flash_scalar_d64_b8x64 of "), "%s", out);
    const long sizes[] = {70};
    check_rows(out, sizes, 1, 1, 0.005);
    free(out);
    free(err);
}

Test(bench_attn_pair, bad_input_fails_with_a_message)
{
    char args[8192], *out, *err;
    cr_expect_eq(attn_pair("", "/nonexistent-tree", &out, &err), 2);
    cr_expect(strstr(err, "usage: bench/attn_pair.sh OLD_TREE") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s attn_f16_flash_nosuch_d64_b8x64", WOOLLY_SOURCE_DIR);
    cr_expect_eq(attn_pair("", args, &out, &err), 1);
    cr_expect(strstr(err, "attn_f16_flash_nosuch_d64_b8x64.c is missing") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s %s 70", WOOLLY_SOURCE_DIR, KERNEL);
    cr_expect_eq(attn_pair("OLD_KERNEL=attn_f16_flash_scalar_d128_b8x64", args, &out, &err), 2);
    cr_expect(strstr(err, "differ in head dimension") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s %s 0", WOOLLY_SOURCE_DIR, KERNEL);
    cr_expect_eq(attn_pair("", args, &out, &err), 2);
    cr_expect(strstr(err, "usage: attn_pair N_KV") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s %s 8", WOOLLY_SOURCE_DIR, KERNEL); /* more queries than positions */
    cr_expect_eq(attn_pair("N_Q=9", args, &out, &err), 2);
    cr_expect(strstr(err, "usage: attn_pair N_KV") != NULL, "%s", err);
    free(out), free(err);
}
