/* Shared by the tests of `woolly perplexity` (test_perplexity_cli.c, test_perplexity_kl.c): running the
 * command and reading its output, and an independent float64 recomputation of what it prints, from the
 * logits `woolly logits` writes for the same chunks.
 *
 * The recomputation follows the definition, not the command's code: the text's tokens (as `woolly
 * tokenize --file` gives them, BOS first) in chunks of n_ctx with the first token of each chunk set to
 * BOS, rows n_ctx/2 .. n_ctx-2 scored against the next token, log-softmax in double. */
#ifndef WOOLLY_TEST_PERPLEXITY_CHECK_H
#define WOOLLY_TEST_PERPLEXITY_CHECK_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "woolly.h"

/* The story every test scores (original prose, in the repository). */
#define STORY WOOLLY_SOURCE_DIR "/tests/data/story.txt"

static inline const char *model_file(const char *name)
{
    static char rel[256];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    return tu_data(rel);
}

/* Runs `woolly ARGS` with WOOLLY_ISA set to isa (NULL: as the environment has it). */
static inline int run_isa(const char *isa, const char *args, char **out, char **err)
{
    const char *old = getenv("WOOLLY_ISA");
    char *saved = old ? strdup(old) : NULL;
    if (isa)
        setenv("WOOLLY_ISA", isa, 1);
    const int st = tu_run_cli(args, out, err);
    if (isa) {
        if (saved)
            setenv("WOOLLY_ISA", saved, 1);
        else
            unsetenv("WOOLLY_ISA");
    }
    free(saved);
    return st;
}

/* `woolly ARGS` must succeed; returns its stdout. Not inlined: GCC 12 then takes the returned buffer for
 * a pointer to the local that held it (-Wdangling-pointer). */
__attribute__((noinline)) static char *run_ok(const char *isa, const char *args)
{
    char *out, *err;
    const int st = run_isa(isa, args, &out, &err);
    cr_assert_eq(st, 0, "woolly %s exited %d: %s", args, st, err);
    free(err);
    return out;
}

/* `woolly ARGS` must fail with a message containing `want`. */
static inline void run_refused(const char *args, const char *want)
{
    char *out, *err;
    const int st = tu_run_cli(args, &out, &err);
    cr_assert(st > 0, "woolly %s exited %d, expected an error", args, st);
    cr_assert(strstr(err, want) != NULL, "woolly %s: stderr lacks \"%s\": %s", args, want, err);
    free(out), free(err);
}

/* The number after `label` in the output (the first occurrence); fails the test if absent. */
static inline double number_after(const char *out, const char *label)
{
    const char *p = strstr(out, label);
    cr_assert(p != NULL, "no \"%s\" in the output:\n%s", label, out);
    char *end;
    const double v = strtod(p + strlen(label), &end);
    cr_assert(end != p + strlen(label), "no number after \"%s\" in:\n%s", label, out);
    return v;
}

typedef struct printed_ppl {
    double ppl, err, mean_nll;
    long long n;
} printed_ppl;

static inline printed_ppl parse_ppl(const char *out)
{
    printed_ppl p = {0};
    const char *f = strstr(out, "Final estimate: PPL = ");
    const int got_final = f ? sscanf(f, "Final estimate: PPL = %lf +/- %lf", &p.ppl, &p.err) : 0;
    cr_assert_eq(got_final, 2, "no final estimate:\n%s", out);
    const char *n = strstr(out, "Mean NLL: ");
    const int got_nll = n ? sscanf(n, "Mean NLL: %lf nats/token over %lld tokens", &p.mean_nll, &p.n) : 0;
    cr_assert_eq(got_nll, 2, "no mean NLL:\n%s", out);
    return p;
}

/* The token ids of the story for a model's vocabulary (heap). */
static inline int32_t *story_tokens(const char *model, int *n)
{
    char args[8192];
    snprintf(args, sizeof args, "tokenize -m %s --file %s", model_file(model), STORY);
    char *out = run_ok(NULL, args);
    int32_t *ids;
    *n = tu_parse_ids(out, &ids);
    free(out);
    cr_assert(*n > 0, "no tokens for the story");
    return ids;
}

static inline woolly_token model_bos(const char *model)
{
    woolly_model *m = woolly_model_open(model_file(model));
    cr_assert(m != NULL, "%s", woolly_last_error());
    const woolly_token bos = woolly_model_adds_bos(m) ? woolly_token_bos(m) : -1;
    woolly_model_close(m);
    return bos;
}

/* The logits of chunk k (n_ctx tokens, the first set to bos), through `woolly logits` with one batch of
 * n_ctx and the given threads (heap, [n_ctx][n_vocab]). */
static inline float *chunk_logits(const char *isa, const char *model, const int32_t *ids, int n_ctx, int k,
                                  woolly_token bos, int threads, int n_vocab)
{
    size_t cap = (size_t)n_ctx * 12 + 16;
    char *list = malloc(cap), *args = malloc(cap + 8192), out_path[4096];
    cr_assert(list && args);
    list[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < n_ctx; i++) {
        const int32_t id = i == 0 && bos >= 0 ? bos : ids[(size_t)k * n_ctx + i];
        len += (size_t)snprintf(list + len, cap - len, "%s%d", i ? "," : "", id);
    }
    snprintf(out_path, sizeof out_path, "%s", tu_tmp_path("chunk.f32"));
    snprintf(args, cap + 8192, "logits -m %s --tokens %s -o %s -c %d -b %d -t %d", model_file(model), list,
             out_path, n_ctx, n_ctx, threads);
    free(run_ok(isa, args));
    size_t size;
    float *x = (float *)tu_read_file(out_path, &size);
    remove(out_path);
    cr_assert_eq(size, (size_t)n_ctx * n_vocab * sizeof(float), "%s: %zu bytes of logits", model, size);
    free(list), free(args);
    return x;
}

/* log p_i = z_i - log sum_j exp z_j, in double; returns the index of the largest logit (first on ties). */
static inline int ref_log_softmax(const float *z, int n, double *out)
{
    int top = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[top])
            top = i;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)z[i] - (double)z[top]);
    const double lse = (double)z[top] + log(sum);
    for (int i = 0; i < n; i++)
        out[i] = (double)z[i] - lse;
    return top;
}

#endif
