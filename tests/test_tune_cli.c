/* `woolly tune` end to end, on short budgets: the preset tiny gives a profile that loads (a run names
 * it and uses its rows), with its default place keyed by the CPU; a model file's tuning gives logits
 * within the model tests' bar; strict accuracy keeps to F16/F32 kernels; bad arguments are errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_logits_check.h"
#include "profile.h"
#include "testutil.h"

static const char *tiny(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_data("models/tiny-llama-q4_k_m.gguf"));
    return path;
}

/* `woolly tune ARGS`: expects success; returns stdout. */
static char *tune(const char *args)
{
    char cmd[8192], *out, *err;
    snprintf(cmd, sizeof cmd, "tune %s", args);
    const int st = tu_run_cli(cmd, &out, &err);
    cr_assert_eq(st, 0, "woolly %s failed (%d):\n%s\n%s", cmd, st, out, err);
    free(err);
    return out;
}

Test(tune_cli, preset_tiny_writes_a_profile_that_loads)
{
    char path[4096], args[16384];
    snprintf(path, sizeof path, "%s", tu_tmp_path("tiny.profile"));
    snprintf(args, sizeof args, "--preset tiny --budget 3 -t 2 -o %s", path);
    char *out = tune(args);
    /* the tables: the defaults beside the choices, and the verdict (the output matrix, the largest,
     * comes first; a slow build, the sanitizers', may leave the smaller shapes to the defaults) */
    const bool ran_out = strstr(out, "the budget ran out") != NULL;
    cr_expect(ran_out || strstr(out, "| gemv | Q4_K | 768x256 | 1 (1) | 2 |") != NULL,
              "no GEMV row for ffn_gate/up:\n%s", out);
    cr_expect(ran_out || strstr(out, "| gemm | Q4_K | 768x256 | 17+ (128) | 2 |") != NULL,
              "no large-batch row:\n%s", out);
    cr_expect(strstr(out, "| Q6_K | 4096x256 | 1 (output.weight) |") != NULL,
              "no layout row for the output:\n%s", out);
    cr_expect(strstr(out, "| gemm | Q6_K | 4096x256 | 2-16 (8) | 2 |") != NULL,
              "no small-batch row for the output matrix (a server's step):\n%s", out);
    cr_expect(strstr(out, "| gemm | Q6_K | 4096x256 | 17+") == NULL,
              "the output matrix never runs a large batch:\n%s", out);
    /* attention: tiny's F16 cache, head dimension 64, one query over its 512 positions and 512 queries */
    cr_expect(strstr(out, "| decode | F16 | 64 | 1 query, 512 positions | 2 |") != NULL,
              "no decode attention row:\n%s", out);
    cr_expect(strstr(out, "| prefill | F16 | 64 | 512 queries, 512 positions | 2 |") != NULL,
              "no prefill attention row:\n%s", out);
    cr_expect(strstr(out, "every case matches or beats its default") ||
                  strstr(out, "slower than the default"),
              "%s", out);
    char want[8192];
    snprintf(want, sizeof want, "profile: %s\n", path);
    cr_expect(strstr(out, want) != NULL, "%s", out);

    woolly_error err = {{0}};
    woolly_profile *p = woolly_profile_read(path, &err);
    cr_assert(p != NULL, "the tuner's profile does not load: %s", err.msg);
    if (!ran_out) {
        cr_expect_eq(p->n_layouts, 7, "tiny's seven matrix shapes");
        cr_expect_eq(p->n_matmuls, 6 * 3 + 2, "three classes for six shapes, two for the output");
    }
    cr_expect_eq(p->n_attns, 2, "attention's decode and prefill rows");
    for (int i = 0; i < p->n_attns; i++) {
        const woolly_profile_attn *a = &p->attns[i];
        cr_expect(a->cache == WOOLLY_TYPE_F16 && a->head_dim == 64 && a->threads == 2, "attn row %d's key",
                  i);
        /* tiny's Q4_K and Q6_K matrices run int8 activations, so its attention runs rounded (BF16 or
         * FP16 P V) tiles (where the CPU has them and they pay) */
        cr_expect(a->default_kernel == woolly_kernel_choose_attn(WOOLLY_TYPE_F16, 64, WOOLLY_ACT_BF16),
                  "attn row %d: the default is not what runs without a profile", i);
        cr_expect_leq(a->us, a->default_us * 1.0001 + 0.01, "attn row %d: %g us, default %g us", i, a->us,
                      a->default_us);
    }
    cr_expect(p->n_layouts >= 1 && p->n_matmuls >= 1);
    for (int i = 0; i < p->n_matmuls; i++) {
        cr_expect_eq(p->matmuls[i].threads, 2);
        /* a choice never slower than its default beyond the noise the tuner tolerates */
        if (p->matmuls[i].default_kernel->layout == p->matmuls[i].step.kernel->layout)
            cr_expect_leq(p->matmuls[i].us, p->matmuls[i].default_us * 1.0001 + 0.01,
                          "row %d: %g us, default %g us", i, p->matmuls[i].us, p->matmuls[i].default_us);
    }
    woolly_profile_free(p);
    free(out);

    /* a run on a model with the same layer shapes uses it */
    snprintf(args, sizeof args, "bench -m %s -p 20 -n 2 -r 1 -t 2 --tune-profile %s", tiny(), path);
    char *err_text;
    cr_assert_eq(tu_run_cli(args, &out, &err_text), 0, "%s", err_text);
    snprintf(want, sizeof want, "tuning profile: %s (", path);
    cr_expect(strstr(out, want) != NULL, "%s", out);
    cr_expect(strstr(out, "(0 tuned") == NULL, "no tuned step in use:\n%s", out);
    cr_expect(strstr(err_text, "warning") == NULL, "%s", err_text);
    free(out), free(err_text);
    remove(path);
}

Test(tune_cli, without_o_the_profile_goes_to_this_cpus_place_where_runs_find_it)
{
    char cache[4096], path[4096], args[16384];
    snprintf(cache, sizeof cache, "%s", tu_tmp_path("xdg"));
    mkdir(cache, 0755);
    setenv("XDG_CACHE_HOME", cache, 1); /* for this process and the commands it starts */
    cr_assert_eq(woolly_profile_default_path(path, sizeof path), 0);
    char *out = tune("--preset tiny --budget 1 -t 1");
    free(out);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no profile at %s", path);
    snprintf(args, sizeof args, "bench -m %s -p 4 -n 2 -r 1 -t 1", tiny());
    char *err;
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    char want[8192];
    snprintf(want, sizeof want, "tuning profile: %s (", path);
    cr_expect(strstr(out, want) != NULL, "bench did not find the profile at %s:\n%s", path, out);
    free(out), free(err);
    remove(path);
}

Test(tune_cli, a_tuned_model_gives_logits_within_the_bar)
{
    const model_case *mc = &MODELS[1];
    cr_assert_str_eq(mc->name, "tiny-llama-q4_k_m");
    char path[4096], args[16384];
    snprintf(path, sizeof path, "%s", tu_tmp_path("model.profile"));
    snprintf(args, sizeof args, "-m %s --budget 3 -t 2 -o %s", tiny(), path);
    char *out = tune(args);
    cr_expect(strstr(out, "| gemv | Q6_K | 32000x256 | 1 (1) | 2 |") != NULL,
              "no row for the output matrix:\n%s", out);
    cr_expect(strstr(out, "| decode | F16 | 64 |") != NULL && strstr(out, "| prefill | F16 | 64 |") != NULL,
              "no attention rows for the model's head dimension:\n%s", out);
    free(out);
    ref r = load_ref(mc->name);
    float *x[2];
    for (int i = 0; i < 2; i++) {
        setenv("WOOLLY_TUNE_PROFILE", i ? path : "none", 1);
        woolly_model *m = woolly_model_open(model_path(mc->name));
        cr_assert(m != NULL, "%s", woolly_last_error());
        cr_assert(i == (woolly_model_tune_profile(m) != NULL));
        x[i] = api_logits(m, &r, 20, 2, r.n_tokens);
        woolly_model_close(m);
        const double e = mean_nmse(x[i], r.logits, r.n_tokens, r.n_vocab);
        fprintf(stderr, "NMSE %s %s: %.3g (bar %.2g)\n", mc->name, i ? "tuned" : "defaults", e, mc->max_nmse);
        cr_expect_leq(e, mc->max_nmse, "%s: NMSE %.3g exceeds %.2g", i ? "tuned" : "defaults", e,
                      mc->max_nmse);
    }
    const double d = mean_nmse(x[1], x[0], r.n_tokens, r.n_vocab);
    cr_expect_leq(d, mc->max_nmse, "tuned against defaults: NMSE %.3g exceeds %.2g", d, mc->max_nmse);
    free(x[0]), free(x[1]);
    free_ref(&r);
    remove(path);
}

Test(tune_cli, strict_accuracy_keeps_to_f16_and_f32_activations)
{
    char path[4096], args[16384];
    snprintf(path, sizeof path, "%s", tu_tmp_path("strict.profile"));
    snprintf(args, sizeof args, "--preset tiny --budget 2 -t 2 --accuracy strict -o %s", path);
    free(tune(args));
    woolly_error err = {{0}};
    woolly_profile *p = woolly_profile_read(path, &err);
    cr_assert(p != NULL, "%s", err.msg);
    cr_expect(p->strict);
    cr_assert(p->n_matmuls > 0);
    for (int i = 0; i < p->n_matmuls; i++)
        cr_expect(p->matmuls[i].step.kernel->act != WOOLLY_ACT_Q8, "row %d runs %s under strict accuracy", i,
                  p->matmuls[i].step.kernel->name);
    woolly_profile_free(p);
    remove(path);
}

static void expect_usage_error(const char *args, const char *needle)
{
    char cmd[4096], *out, *err;
    snprintf(cmd, sizeof cmd, "tune %s", args);
    const int st = tu_run_cli(cmd, &out, &err);
    cr_expect_eq(st, 2, "woolly %s: exit %d, expected 2", cmd, st);
    cr_expect(strstr(err, needle) != NULL, "woolly %s: '%s' not in:\n%s", cmd, needle, err);
    free(out), free(err);
}

Test(tune_cli, bad_arguments_are_errors)
{
    expect_usage_error("", "either -m MODEL or --preset NAME");
    expect_usage_error("--preset tiny -m x.gguf", "either -m MODEL or --preset NAME");
    expect_usage_error("--preset tiny --budget 0", "out of range");
    expect_usage_error("--preset tiny --mix 1,2", "--mix '1,2'");
    expect_usage_error("--preset tiny --mix 0,0,0", "not all 0");
    expect_usage_error("--preset tiny --accuracy loose", "unknown --accuracy");
    expect_usage_error("--preset tiny --kv-type q4_0", "unknown --kv-type");
    char *out, *err;
    cr_expect_eq(tu_run_cli("tune --preset huge --budget 1 -o /dev/null", &out, &err), 1);
    cr_expect(strstr(err, "unknown preset 'huge'") != NULL, "%s", err);
    free(out), free(err);
    cr_expect_eq(tu_run_cli("tune -m /nonexistent.gguf --budget 1 -o /dev/null", &out, &err), 1);
    cr_expect(strstr(err, "/nonexistent.gguf") != NULL, "%s", err);
    free(out), free(err);
}
