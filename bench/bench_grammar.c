/* The cost of a constrained sampling step against a free one (issue: at most 10% of a free decode step
 * on the llama-1b vocabulary). For a vocabulary, times woolly_sampler_sample with and without a grammar
 * over the same random logits while the grammar walks through JSON (the constrained sampler advances with
 * its own picks, as a random-weight model would), from a fresh matcher (so first visits of states, whose
 * masks are computed, are in the figures). With --decode MODEL, also times a free decode step of that
 * model (one token evaluated and sampled), the step the overhead is compared with.
 *
 *   bench_grammar [--decode MODEL.gguf] [--threads N] VOCAB_OR_MODEL.gguf...
 *
 * Sampling steps are timed in the thread's CPU time (the machine is shared; sampling is single-threaded),
 * the decode step by the wall clock (it runs a thread pool). Figures are medians; the mean and the
 * slowest step are printed too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cpu_time.h"
#include "grammar.h"
#include "sampler.h"
#include "timing.h"
#include "tokenizer.h"
#include "woolly.h"

#define STEPS 400

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4},"
    "\"kind\":{\"enum\":[\"cat\",\"dog\",\"other\"]},"
    "\"owner\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/person\"}]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"kind\",\"owner\"],\"additionalProperties\":false,"
    "\"$defs\":{\"person\":{\"type\":\"object\",\"properties\":{\"first\":{\"type\":\"string\"},"
    "\"score\":{\"type\":\"number\"}},\"required\":[\"first\"],\"additionalProperties\":false}}}";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0.0;
}

/* Times STEPS sampling steps with grammar g (NULL: free) over logits; per-step seconds into t. Returns
 * the steps taken (a grammar may end earlier; it then starts over). */
static int run_steps(int32_t n_vocab, const woolly_tokenizer *tok, const woolly_vocab_trie *trie,
                     const woolly_grammar *g, const float *logits, double *t, int *n_ends)
{
    woolly_sampler_params p = woolly_sampler_default_params();
    p.seed = 7;
    woolly_error err = {{0}};
    woolly_sampler *s = woolly_sampler_create(n_vocab, &p, &err);
    if (!s || (g && woolly_sampler_set_grammar_vocab(s, tok, trie, g, &err))) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        woolly_sampler_close(s);
        return 0;
    }
    *n_ends = 0;
    for (int i = 0; i < STEPS; i++) {
        const float *l = logits + (size_t)(i % 16) * (size_t)n_vocab;
        double t0 = bench_cpu_now_s(); /* CPU time: the machine is shared, the sampler single-threaded */
        woolly_token tok_id = woolly_sampler_sample(s, l);
        t[i] = bench_cpu_now_s() - t0;
        woolly_sampler_accept(s, tok_id);
        if (g && woolly_sampler_grammar_done(s)) { /* a whole document: start another */
            ++*n_ends;
            woolly_sampler_reset(s);
        }
    }
    woolly_sampler_close(s);
    return STEPS;
}

static double decode_step_s(const char *path, int threads)
{
    woolly_model *m = woolly_model_open(path);
    if (!m) {
        fprintf(stderr, "bench_grammar: %s\n", woolly_last_error());
        return 0.0;
    }
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = threads;
    woolly_context *c = woolly_context_open(m, &cp);
    woolly_sampler *s = woolly_sampler_open(m, NULL);
    double t[24];
    int n = 0;
    woolly_token tok = 1;
    for (int i = 0; c && s && i < 24; i++) {
        double t0 = woolly_now_s();
        if (woolly_eval(c, &tok, 1) < 0)
            break;
        tok = woolly_sampler_sample(s, woolly_get_logits(c, -1));
        t[n++] = woolly_now_s() - t0;
    }
    woolly_sampler_close(s);
    woolly_context_close(c);
    woolly_model_close(m);
    return n > 4 ? median(t + 4, n - 4) : 0.0; /* the first steps warm caches */
}

int main(int argc, char **argv)
{
    const char *decode = NULL;
    int threads = 2, rc = 0;
    double step_s = 0.0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--decode") && a + 1 < argc) {
            decode = argv[++a];
        } else if (!strcmp(argv[a], "--threads") && a + 1 < argc) {
            threads = atoi(argv[++a]);
        }
    }
    if (decode) {
        step_s = decode_step_s(decode, threads);
        printf("free decode step of %s (%d threads, sampling included): median %.2f ms\n", decode, threads,
               step_s * 1e3);
    }
    woolly_error err = {{0}};
    woolly_grammar *gs[2] = {woolly_grammar_from_json_schema("{\"type\":\"object\"}", 17, &err),
                             woolly_grammar_from_json_schema(SCHEMA, strlen(SCHEMA), &err)};
    const char *names[2] = {"json_object", "schema"};
    if (!gs[0] || !gs[1]) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        return 1;
    }
    printf("%-28s %-12s %8s %9s %10s %10s %10s %10s %6s %8s\n", "vocabulary", "grammar", "n_vocab", "trie ms",
           "free ms", "constr ms", "extra ms", "mean ms", "max ms", "docs");
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--decode") || !strcmp(argv[a], "--threads")) {
            a++;
            continue;
        }
        woolly_tokenizer *tok = woolly_tokenizer_open_file(argv[a], &err);
        if (!tok) {
            fprintf(stderr, "bench_grammar: %s\n", err.msg);
            rc = 1;
            continue;
        }
        const int32_t n_vocab = woolly_tokenizer_n_vocab(tok);
        double t0 = bench_cpu_now_s();
        woolly_vocab_trie *trie = woolly_tokenizer_trie(tok, &err);
        const double trie_s = bench_cpu_now_s() - t0;
        float *logits = malloc(sizeof *logits * (size_t)n_vocab * 16);
        double *tf = malloc(sizeof *tf * STEPS), *tc = malloc(sizeof *tc * STEPS);
        if (!trie || !logits || !tf || !tc) {
            fprintf(stderr, "bench_grammar: %s\n", trie ? "out of memory" : err.msg);
            return 1;
        }
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < (size_t)n_vocab * 16; i++) { /* logits of a flat, random-weight model */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            logits[i] = (float)((double)(x >> 11) / 9007199254740992.0) * 4.0f;
        }
        for (int gi = 0; gi < 2; gi++) {
            int ends = 0, dummy = 0;
            run_steps(n_vocab, tok, trie, NULL, logits, tf, &dummy);
            run_steps(n_vocab, tok, trie, gs[gi], logits, tc, &ends);
            double mean = 0.0, max = 0.0;
            for (int i = 0; i < STEPS; i++) {
                mean += tc[i];
                max = tc[i] > max ? tc[i] : max;
            }
            mean /= STEPS;
            const double free_med = median(tf, STEPS), con_med = median(tc, STEPS);
            printf("%-28.28s %-12s %8d %9.1f %10.3f %10.3f %10.3f %10.3f %6.1f %8d\n",
                   strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a], names[gi], (int)n_vocab,
                   trie_s * 1e3, free_med * 1e3, con_med * 1e3, (con_med - free_med) * 1e3, mean * 1e3,
                   max * 1e3, ends);
            if (step_s > 0.0)
                printf("  constrained step / free decode step: median %.3f, mean %.3f\n",
                       (step_s + con_med - free_med) / step_s, (step_s + mean - free_med) / step_s);
        }
        free(logits);
        free(tf);
        free(tc);
        woolly_vocab_trie_free(trie);
        woolly_tokenizer_close(tok);
    }
    woolly_grammar_free(gs[0]);
    woolly_grammar_free(gs[1]);
    return rc;
}
