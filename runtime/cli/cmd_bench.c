/* woolly bench: prompt-processing and generation speed, with llama-bench's meaning of the tests:
 * ppN evaluates an N-token prompt (batched: the GEMM path), tgN generates N tokens one at a time (the
 * GEMV path; no sampling), both after `depth` tokens already in the cache (-d, default 0: an empty
 * cache). The cache is filled to the depth once, untimed; each run then rewinds to it. One warm-up run,
 * then the mean and standard deviation of tokens/s over the repetitions, printed as llama-bench's
 * markdown table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_common.h"
#include "commands.h"
#include "registry.h"

/* One run of a test after `depth` cached tokens: seconds, or a negative number on an error. */
static double run_once(woolly_context *c, const woolly_token *ids, int32_t n, bool batched, int32_t depth)
{
    woolly_context_rewind(c, depth);
    const double t0 = cli_now_s();
    if (batched) {
        if (woolly_eval(c, ids, n))
            return -1;
    } else {
        for (int32_t i = 0; i < n; i++)
            if (woolly_eval(c, ids + i, 1))
                return -1;
    }
    return cli_now_s() - t0;
}

static void format_size(char *out, size_t cap, uint64_t bytes)
{
    const double b = (double)bytes;
    if (b >= 1024.0 * 1024.0 * 1024.0)
        snprintf(out, cap, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(out, cap, "%.2f MiB", b / (1024.0 * 1024.0));
}

static void format_count(char *out, size_t cap, uint64_t n)
{
    const double x = (double)n;
    if (x >= 1e9)
        snprintf(out, cap, "%.2f B", x / 1e9);
    else if (x >= 1e6)
        snprintf(out, cap, "%.2f M", x / 1e6);
    else
        snprintf(out, cap, "%.2f K", x / 1e3);
}

int woolly_cmd_bench(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL;
    int32_t n_prompt = 512, n_gen = 128, reps = 5, depth = 0;
    cli_context_opts ctx_opts;
    cli_table t = {.synopsis = "-m MODEL [-p 512] [-n 128] [-d 0] [-t T] [-r REPS]"};
    cli_add_model_flag(&t, &model_path);
    cli_add(&t, (cli_flag){"-p", "--n-prompt", CLI_INT, &n_prompt, 0, 1 << 20, "N",
                           "prompt tokens of the pp test; 0 skips it (default 512)", NULL});
    cli_add(&t, (cli_flag){"-n", "--n-gen", CLI_INT, &n_gen, 0, 1 << 20, "N",
                           "generated tokens of the tg test; 0 skips it (default 128)", NULL});
    cli_add(&t, (cli_flag){"-d", "--n-depth", CLI_INT, &depth, 0, 1 << 24, "N",
                           "tokens in the KV cache before each test (default 0); the context is sized to fit",
                           NULL});
    cli_add(&t, (cli_flag){"-r", "--repetitions", CLI_INT, &reps, 1, 1000, "N",
                           "measured runs of each test, after one warm-up (default 5)", NULL});
    cli_add_context_flags(&t, &ctx_opts);
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (n_prompt == 0 && n_gen == 0) {
        fprintf(stderr, "woolly %s: nothing to measure (-p 0 and -n 0)\n", cmd);
        return 2;
    }

    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m)
        return 1;
    int status = 1;
    woolly_context *c = NULL;
    const int32_t longest = n_prompt > n_gen ? n_prompt : n_gen;
    woolly_token *ids = malloc(sizeof *ids * ((size_t)longest + (size_t)depth));
    double *tps = malloc(sizeof *tps * (size_t)reps);
    woolly_context_params cp;
    if (!ids || !tps) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }
    cli_context_params(cmd, &ctx_opts, m, &cp);
    if (!ctx_opts.n_ctx_given)
        cp.n_ctx = depth + longest;
    else if (cp.n_ctx < depth + longest) {
        fprintf(stderr, "woolly %s: the tests need %d positions (depth %d + %d), more than --ctx-size %d\n",
                cmd, depth + longest, depth, longest, cp.n_ctx);
        goto done;
    }
    if (!(c = woolly_context_open(m, &cp))) {
        cli_api_error(cmd);
        goto done;
    }
    /* Fixed pseudo-random token ids: what the speed depends on is their count, not their text. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < longest + depth; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (woolly_token)(x % (uint64_t)woolly_model_n_vocab(m));
    }
    /* The depth: filled once, batched; the tests' tokens follow it. */
    if (depth > 0 && woolly_eval(c, ids + longest, depth)) {
        cli_api_error(cmd);
        goto done;
    }

    char size[32], params[32], backend[32], profile[1200];
    cli_profile_text(m, c, profile, sizeof profile);
    printf("tuning profile: %s\n\n", profile);
    format_size(size, sizeof size, woolly_model_size(m));
    format_count(params, sizeof params, woolly_model_n_params(m));
    snprintf(backend, sizeof backend, "CPU (%s)", woolly_isa_name(woolly_isa_active()));
    printf("| %-30s | %10s | %10s | %-12s | %7s | %13s | %20s |\n", "model", "size", "params", "backend",
           "threads", "test", "t/s");
    /* Column widths as in the header; right-aligned columns end their rule with ':'. */
    const char *dashes = "------------------------------";
    printf("| %.30s | %.9s: | %.9s: | %.12s | %.6s: | %.12s: | %.19s: |\n", dashes, dashes, dashes, dashes,
           dashes, dashes, dashes);
    fflush(stdout);
    for (int test = 0; test < 2; test++) {
        const bool batched = test == 0;
        const int32_t n = batched ? n_prompt : n_gen;
        if (n == 0)
            continue;
        if (run_once(c, ids, n, batched, depth) < 0) { /* warm-up */
            cli_api_error(cmd);
            goto done;
        }
        double sum = 0.0;
        for (int32_t r = 0; r < reps; r++) {
            const double s = run_once(c, ids, n, batched, depth);
            if (s < 0) {
                cli_api_error(cmd);
                goto done;
            }
            tps[r] = s > 0 ? n / s : 0.0;
            sum += tps[r];
        }
        const double mean = sum / reps;
        double var = 0.0;
        for (int32_t r = 0; r < reps; r++)
            var += (tps[r] - mean) * (tps[r] - mean);
        const double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
        char name[32], result[48]; /* "±" takes two bytes of the field width */
        if (depth > 0)
            snprintf(name, sizeof name, "%s%d @ d%d", batched ? "pp" : "tg", n, depth);
        else
            snprintf(name, sizeof name, "%s%d", batched ? "pp" : "tg", n);
        snprintf(result, sizeof result, "%.2f ± %.2f", mean, sd);
        printf("| %-30.30s | %10s | %10s | %-12s | %7d | %13s | %21s |\n", woolly_model_name(m), size, params,
               backend, woolly_context_n_threads(c), name, result);
        fflush(stdout);
    }
    status = 0;
done:
    woolly_context_close(c);
    free(tps);
    free(ids);
    woolly_model_close(m);
    return status;
}
