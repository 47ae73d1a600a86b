/* bench/compare.sh end to end, with tests/fake_llama_bench.sh standing in for llama-bench and
 * tests/fake_llama_sweep_bench.sh for ik_llama.cpp's llama-sweep-bench (fixed figures: pp at 1000 t/s per
 * thread, tg at 100): one table with both engines per thread count and test, and the ratio woolly/llama
 * that their figures give; a failing llama-bench or bad arguments fail the script. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* Runs bench/compare.sh with ARGS (and the environment assignments in `env`), capturing its output.
 * Returns the exit status, or -1 if it did not exit. */
static int compare(const char *env, const char *args, char **out, char **err)
{
    char cmd[32768];
    snprintf(cmd, sizeof cmd, "%s WOOLLY=%s bash %s/bench/compare.sh %s", env, WOOLLY_CLI, WOOLLY_SOURCE_DIR, args);
    return tu_run_shell(cmd, out, err);
}

static const char *standin_and_model(void)
{
    static char s[8192];
    snprintf(s, sizeof s, "%s/tests/fake_llama_bench.sh %s", WOOLLY_SOURCE_DIR,
             tu_data("models/tiny-llama-q4_k_m.gguf"));
    return s;
}

/* The cells of a table row (in place): their count, at most 10. */
static int cells(char *line, char *f[10])
{
    int n = 0;
    for (char *save, *c = strtok_r(line, "|", &save); c && n < 10; c = strtok_r(NULL, "|", &save))
        f[n++] = c;
    return n;
}

/* The numbers of a "mean ± std" cell. */
static void cell(const char *s, double *mean, double *sd)
{
    cr_assert_eq(sscanf(s, " %lf ± %lf", mean, sd), 2, "not 'mean ± std': %s", s);
}

Test(bench_compare, table_has_both_engines_and_their_ratio)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "%s -p 16 -n 4 -t 1,2 -r 2", standin_and_model());
    const int st = compare("", args, &out, &err);
    cr_assert_eq(st, 0, "compare.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(
        strstr(out, "| model | size | params | threads | test | llama.cpp t/s | woolly t/s | woolly/llama |"),
        "%s", out);
    cr_expect(strstr(err, "run 2 of 2") != NULL, "%s", err);
    const struct {
        const char *threads, *test;
        double llama;
    } want[] = {{"1", "pp16", 1000}, {"1", "tg4", 100}, {"2", "pp16", 2000}, {"2", "tg4", 200}};
    int rows = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "| synthetic-llama-256x2 |", 25))
            continue;
        cr_assert_lt(rows, 4, "more rows than tests: %s", l);
        char *f[10];
        cr_assert_eq(cells(l, f), 8, "8 columns");
        char threads[16], test[32];
        sscanf(f[3], " %15s", threads);
        sscanf(f[4], " %31s", test);
        cr_expect_str_eq(threads, want[rows].threads);
        cr_expect_str_eq(test, want[rows].test);
        double lm, ls, wm, ws, ratio;
        cell(f[5], &lm, &ls);
        cell(f[6], &wm, &ws);
        cr_expect_eq(lm, want[rows].llama, "the stand-in's figure: %s", f[5]);
        cr_expect_eq(ls, 0.0);
        cr_expect_gt(wm, 0.0, "woolly's figure: %s", f[6]);
        cr_assert_eq(sscanf(f[7], " %lf", &ratio), 1, "no ratio: %s", f[7]);
        cr_expect(ratio > 0 && fabs(ratio - wm / lm) <= 0.005 + 1e-9, "ratio %s for %g / %g", f[7], wm, lm);
        rows++;
    }
    cr_expect_eq(rows, 4, "one row per thread count and test");
    free(out);
    free(err);
}

/* c without its leading and trailing spaces (in place). */
static char *trim(char *c)
{
    while (*c == ' ')
        c++;
    for (size_t n = strlen(c); n && c[n - 1] == ' '; n--)
        c[n - 1] = '\0';
    return c;
}

/* The table's rows of the model as "threads|test|llama.cpp's cell", in order, into rows[]. */
static int table_rows(char *out, char rows[][96], int max)
{
    int n_rows = 0;
    for (char *save, *l = strtok_r(out, "\n", &save); l && n_rows < max; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "| synthetic-llama-256x2 |", 25))
            continue;
        char *f[10];
        cr_assert_eq(cells(l, f), 8, "8 columns");
        snprintf(rows[n_rows++], 96, "%s|%s|%s", trim(f[3]), trim(f[4]), trim(f[5]));
    }
    return n_rows;
}

/* At a depth: -d where llama-bench has it; where it has not (ik_llama.cpp), -gp gives its tg at that depth
 * and its pp at depth is "-". */
Test(bench_compare, depth_with_and_without_llama_bench_d)
{
    char args[16384], *out, *err, rows[8][96];
    snprintf(args, sizeof args, "%s -p 16 -n 4 -t 1 -r 1 -d 32", standin_and_model());
    int st = compare("", args, &out, &err);
    cr_assert_eq(st, 0, "compare.sh failed (%d):\n%s\n%s", st, out, err);
    cr_assert_eq(table_rows(out, rows, 8), 2, "%s", out);
    cr_expect_str_eq(rows[0], "1|pp16 @ d32|1000.00 ± 0.00");
    cr_expect_str_eq(rows[1], "1|tg4 @ d32|100.00 ± 0.00");
    free(out), free(err);

    st = compare("FAKE_LLAMA_NO_DEPTH=1", args, &out, &err);
    cr_assert_eq(st, 0, "compare.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(strstr(err, "from -gp 32,4") != NULL, "%s", err);
    cr_assert_eq(table_rows(out, rows, 8), 2, "%s", out);
    cr_expect_str_eq(rows[0], "1|pp16 @ d32|-");
    cr_expect_str_eq(rows[1], "1|tg4 @ d32|100.00 ± 0.00");
    free(out), free(err);
}

/* At a depth, against a llama-bench without -d that has a llama-sweep-bench beside it (ik_llama.cpp's):
 * both tests at depth come from the sweep, with llama-bench's "-rtr 1" passed as the sweep's "-rtr"; the
 * sweep runs out of the caller's folder, where it would leave its llama.log, and still finds a model
 * named relative to that folder. */
Test(bench_compare, depth_from_a_sweep_bench_beside_it)
{
    char dir[4096], link[8192], env[8192], args[16384], *out, *err, rows[8][96];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("sweep"));
    cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s", dir);
    char tools[2][8192];
    snprintf(tools[0], sizeof tools[0], "%s/tests/fake_llama_bench.sh", WOOLLY_SOURCE_DIR);
    snprintf(tools[1], sizeof tools[1], "%s/tests/fake_llama_sweep_bench.sh", WOOLLY_SOURCE_DIR);
    const char *names[3] = {"llama-bench", "llama-sweep-bench", "model.gguf"};
    const char *targets[3] = {tools[0], tools[1], tu_data("models/tiny-llama-q4_k_m.gguf")};
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        cr_assert_eq(symlink(targets[i], link), 0, "symlink %s", link);
    }
    snprintf(env, sizeof env, "cd %s && FAKE_LLAMA_NO_DEPTH=1", dir);
    snprintf(args, sizeof args,
             "%s/llama-bench model.gguf -p 16 -n 4 -t 1 -r 1 -d 32 --llama-args '-fa 1 -rtr 1'", dir);
    const int st = compare(env, args, &out, &err);
    cr_assert_eq(st, 0, "compare.sh failed (%d):\n%s\n%s", st, out, err);
    cr_expect(strstr(err, "/llama-sweep-bench") != NULL, "%s", err);
    cr_assert_eq(table_rows(out, rows, 8), 2, "%s", out);
    cr_expect_str_eq(rows[0], "1|pp16 @ d32|1000.00 ± 0.00");
    cr_expect_str_eq(rows[1], "1|tg4 @ d32|100.00 ± 0.00");
    snprintf(link, sizeof link, "%s/llama.log", dir);
    cr_expect_neq(access(link, F_OK), 0, "the sweep left %s", link);
    remove(link);
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        remove(link);
    }
    rmdir(dir);
    free(out), free(err);
}

Test(bench_compare, failures_are_reported)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "%s -p 8 -n 2 -t 1 -r 1", standin_and_model());
    cr_expect_eq(compare("FAKE_LLAMA_FAIL=1", args, &out, &err), 1);
    cr_expect(strstr(err, "invalid parameter") && strstr(err, "llama-bench failed"), "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s -p 8 -n 2 -t 0 -r 1", standin_and_model());
    cr_expect_eq(compare("", args, &out, &err), 1, "woolly rejects -t 0");
    cr_expect(strstr(err, "woolly bench failed") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s -p 8 -x", standin_and_model());
    cr_expect_eq(compare("", args, &out, &err), 2);
    cr_expect(strstr(err, "-x needs a value") != NULL, "%s", err);
    free(out), free(err);

    cr_expect_eq(compare("", "only-one-arg", &out, &err), 2);
    cr_expect(strstr(err, "usage: ") != NULL, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "%s/tests/fake_llama_bench.sh /nonexistent.gguf", WOOLLY_SOURCE_DIR);
    cr_expect_eq(compare("", args, &out, &err), 2);
    cr_expect(strstr(err, "no model file /nonexistent.gguf") != NULL, "%s", err);
    free(out), free(err);
}
