/* `woolly perplexity` on stories260K (a real trained model) and the story in tests/data: the perplexity
 * is finite and is what a float64 recomputation from `woolly logits` gives, bit-identical at 1 and 2
 * threads with the scalar kernels (within 1e-6 relative with the default dispatch), the same for any
 * batch size, and bad input is a clear error. */
#include "perplexity_check.h"

#define MODEL "stories260K"
/* Small chunks and few of them: the sanitizer build evaluates some 250 tokens per second. */
#define CTX 64
#define CHUNKS 4
/* The command and the recomputation read the same logits; only the order of the sums may differ. */
#define RECOMPUTE_MAX_REL 1e-9
#define THREADS_MAX_REL 1e-6

Test(perplexity_cli, matches_a_float64_recomputation_from_woolly_logits)
{
    char args[8192];
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --chunks %d -t 2", model_file(MODEL), STORY,
             CTX, CHUNKS);
    char *out = run_ok("scalar", args);
    const printed_ppl p = parse_ppl(out);

    int n_tokens;
    int32_t *ids = story_tokens(MODEL, &n_tokens);
    cr_assert_geq(n_tokens, CHUNKS * CTX, "the story has %d tokens, fewer than %d chunks of %d", n_tokens,
                  CHUNKS, CTX);
    const woolly_token bos = model_bos(MODEL);
    cr_assert_eq(bos, ids[0], "the story's tokens start with BOS %d", bos);
    const int n_vocab = 512, first = CTX / 2;
    double *lp = malloc(sizeof(double) * n_vocab);
    double sum = 0.0, sum2 = 0.0;
    long long n = 0;
    const char *line = out;
    for (int k = 0; k < CHUNKS; k++) {
        float *z = chunk_logits("scalar", MODEL, ids, CTX, k, bos, 2, n_vocab);
        for (int pos = first; pos <= CTX - 2; pos++) {
            ref_log_softmax(z + (size_t)pos * n_vocab, n_vocab, lp);
            const double nll = -lp[ids[k * CTX + pos + 1]];
            sum += nll, sum2 += nll * nll, n++;
        }
        free(z);
        /* The running estimate after this chunk, as printed (4 decimals). */
        int chunk;
        double running;
        line = strchr(line, '[');
        cr_assert(line && sscanf(line, "[%d] %lf", &chunk, &running) == 2, "no running estimate %d:\n%s",
                  k + 1, out);
        cr_expect_eq(chunk, k + 1);
        cr_expect(fabs(running - exp(sum / (double)n)) <= 0.5e-4 * (1 + 1e-9),
                  "chunk %d: printed %.4f, recomputed %.6f", k + 1, running, exp(sum / (double)n));
        line++;
    }
    const double mean = sum / (double)n, ppl = exp(mean);
    const double err = ppl * sqrt((sum2 / (double)n - mean * mean) / (double)(n - 1));
    fprintf(stderr,
            "PPL stories260K on the story, -c %d, %d chunks: woolly %.6f +/- %.6f, float64 %.6f +/- %.6f\n",
            CTX, CHUNKS, p.ppl, p.err, ppl, err);
    cr_assert(isfinite(p.ppl) && p.ppl > 1.0 && p.ppl < n_vocab, "PPL %g", p.ppl);
    cr_expect_eq(p.n, (long long)CHUNKS * (CTX - 1 - first), "scored %lld tokens", p.n);
    cr_expect(fabs(p.mean_nll - mean) <= RECOMPUTE_MAX_REL * fabs(mean), "mean NLL %.17g, recomputed %.17g",
              p.mean_nll, mean);
    cr_expect(fabs(p.ppl - ppl) <= 0.5e-4 * (1 + 1e-9), "PPL %.4f, recomputed %.6f", p.ppl, ppl);
    cr_expect(fabs(p.err - err) <= 0.5e-5 * (1 + 1e-9), "error %.5f, recomputed %.7f", p.err, err);
    free(lp), free(ids), free(out);
}

static printed_ppl story_ppl(const char *isa, int threads, int batch, char **out_text)
{
    char args[8192];
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --chunks %d -b %d -t %d", model_file(MODEL),
             STORY, CTX, CHUNKS, batch, threads);
    char *out = run_ok(isa, args);
    const printed_ppl p = parse_ppl(out);
    if (out_text)
        *out_text = out;
    else
        free(out);
    return p;
}

Test(perplexity_cli, scalar_kernels_are_bit_identical_at_1_and_2_threads)
{
    char *one, *two;
    const printed_ppl a = story_ppl("scalar", 1, 512, &one), b = story_ppl("scalar", 2, 512, &two);
    fprintf(stderr, "PPL stories260K on the story, -c %d, scalar kernels: %.4f +/- %.5f (mean NLL %.17g)\n",
            CTX, b.ppl, b.err, b.mean_nll);
    cr_expect(isfinite(a.ppl) && a.n > 0);
    /* The whole output: every running estimate and the mean NLL to all its digits. */
    cr_expect_str_eq(one, two, "1 thread:\n%s\n2 threads:\n%s", one, two);
    free(one), free(two);
}

Test(perplexity_cli, default_dispatch_agrees_at_1_and_2_threads)
{
    const printed_ppl a = story_ppl(NULL, 1, 512, NULL), b = story_ppl(NULL, 2, 512, NULL);
    cr_expect_eq(a.n, b.n);
    cr_expect(fabs(a.mean_nll - b.mean_nll) <= THREADS_MAX_REL * fabs(b.mean_nll),
              "mean NLL %.17g at 1 thread, %.17g at 2", a.mean_nll, b.mean_nll);
}

Test(perplexity_cli, batches_smaller_than_a_chunk_score_the_same)
{
    /* 64 = 24 + 24 + 16: the scored half starts inside the second batch and ends in a partial one. */
    const printed_ppl whole = story_ppl("scalar", 2, 512, NULL), split = story_ppl("scalar", 2, 24, NULL);
    cr_expect_eq(whole.n, split.n);
    cr_expect(fabs(whole.mean_nll - split.mean_nll) <= THREADS_MAX_REL * fabs(whole.mean_nll),
              "mean NLL %.17g in one batch, %.17g in batches of 24", whole.mean_nll, split.mean_nll);
}

static char *write_tmp(const char *name, const char *text)
{
    char *path = strdup(tu_tmp_path(name));
    FILE *f = fopen(path, "wb");
    cr_assert(path && f);
    fputs(text, f);
    fclose(f);
    return path;
}

Test(perplexity_cli, bad_input_is_a_clear_error)
{
    char args[8192];
    const char *m = model_file(MODEL);
    char *empty = write_tmp("empty.txt", "");
    char *shorty = write_tmp("short.txt", "Once upon a time, there was a cat.");

    snprintf(args, sizeof args, "perplexity -m %s -f %s", m, empty);
    run_refused(args, "is empty");
    snprintf(args, sizeof args, "perplexity -m %s -f %s/no-such-text.txt", m, WOOLLY_BUILD_DIR);
    run_refused(args, "cannot read");
    snprintf(args, sizeof args, "perplexity -m %s -f %s", m, WOOLLY_BUILD_DIR); /* a directory */
    run_refused(args, "cannot read");
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 128", m, shorty);
    run_refused(args, "too little text");
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 4", m, STORY);
    run_refused(args, "too small");
    snprintf(args, sizeof args, "perplexity -m %s -f %s --chunks 0", m, STORY);
    run_refused(args, "out of range");
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence-base a --kl-divergence b", m, STORY);
    run_refused(args, "not both");
    snprintf(args, sizeof args, "perplexity -m %s", m);
    run_refused(args, "-f TEXT is required");
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence-base %s", m, STORY, m);
    run_refused(args, "refusing to overwrite");
    remove(empty), remove(shorty), free(empty), free(shorty);
}

Test(perplexity_cli, progress_bar_only_on_a_terminal)
{
    char args[8192], *out, *err;
    /* stderr is a file here: the notes, but no bar. */
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --chunks 2", model_file(MODEL), STORY, CTX);
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strchr(err, '\r') == NULL, "a progress bar in a file: %s", err);
    cr_expect(strstr(err, "2 chunks of 64 tokens") != NULL, "stderr: %s", err);
    free(out), free(err);
    /* --quiet: nothing on stderr at all. */
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --chunks 2 --quiet", model_file(MODEL), STORY,
             CTX);
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect_str_empty(err, "stderr under --quiet: %s", err);
    free(out), free(err);

    /* On a terminal (script(1) gives the command one): the bar, and --quiet removes it. */
    static const char *const quiet[] = {"", " --quiet"};
    for (int q = 0; q < 2; q++) {
        char cmd[16384], log[4096];
        snprintf(log, sizeof log, "%s", tu_tmp_path("tty.log"));
        snprintf(cmd, sizeof cmd,
                 "script -qec '%s perplexity -m %s -f %s -c %d --chunks 2%s >/dev/null' %s >/dev/null 2>&1 "
                 "</dev/null",
                 WOOLLY_CLI, model_file(MODEL), STORY, CTX, quiet[q], log);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        char *tty = tu_read_file(log, NULL);
        remove(log);
        if (q == 0)
            cr_expect(strstr(tty, "chunk 2/2") && strstr(tty, "tokens/s") && strchr(tty, '\r'),
                      "no progress bar on a terminal: %s", tty);
        else
            cr_expect(strstr(tty, "tokens/s") == NULL, "a progress bar under --quiet: %s", tty);
        free(tty);
    }
}
