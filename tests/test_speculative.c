/* Speculative decoding (woolly_spec_*): greedy text with a draft model or prompt lookup is token for
 * token the text of plain greedy decoding (several prompts, draft lengths and draft pairs, among them one
 * that disagrees often); sampled text has the distribution of plain sampling (a chi-square test of
 * homogeneity per generated position over many seeded runs, with lookup, a self-draft and a quantized
 * draft that rejects about half its guesses); bad parameters and a draft of another vocabulary are
 * refused with a clear error. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "woolly.h"

static woolly_model *open_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    woolly_model *m = woolly_model_open(tu_data(rel));
    cr_assert(m != NULL, "%s", woolly_last_error());
    return m;
}

static woolly_context *open_ctx(woolly_model *m, bool logits_all)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = 256;
    p.n_batch = 64;
    p.n_threads = 1; /* tiny models: a pool's hand-offs would cost more than the work */
    p.logits_all = logits_all;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    return c;
}

static int32_t tokenize(const woolly_model *m, const char *text, woolly_token *ids, int32_t cap)
{
    const int32_t n = woolly_model_tokenize(m, text, strlen(text), true, false, ids, cap);
    cr_assert(n > 0 && n <= cap, "tokenizing '%s': %d", text, n);
    return n;
}

/* n tokens of plain decoding: the prompt in one call, then one token per call. With same_prompt, the
 * cache begins with this prompt already (an earlier run's): only its last token is evaluated again, as
 * woolly_spec_begin does with the prefix it shares. */
static void plain_tokens(woolly_context *c, woolly_sampler *s, const woolly_token *prompt, int32_t n_prompt,
                         woolly_token *out, int32_t n, bool same_prompt)
{
    const int32_t keep = same_prompt && woolly_context_n_past(c) >= n_prompt ? n_prompt - 1 : 0;
    cr_assert_eq(woolly_context_rewind(c, keep), 0);
    for (int32_t i = 0; i < n_prompt; i++)
        woolly_sampler_accept(s, prompt[i]);
    cr_assert_eq(woolly_eval(c, prompt + keep, n_prompt - keep), 0, "%s", woolly_last_error());
    for (int32_t i = 0; i < n; i++) {
        out[i] = woolly_sampler_sample(s, woolly_get_logits(c, -1));
        woolly_sampler_accept(s, out[i]);
        if (i + 1 < n)
            cr_assert_eq(woolly_eval(c, &out[i], 1), 0, "%s", woolly_last_error());
    }
}

/* n tokens of speculative decoding. */
static void spec_tokens(woolly_spec *sp, woolly_sampler *s, const woolly_token *prompt, int32_t n_prompt,
                        woolly_token *out, int32_t n)
{
    for (int32_t i = 0; i < n_prompt; i++)
        woolly_sampler_accept(s, prompt[i]);
    cr_assert_eq(woolly_spec_begin(sp, prompt, n_prompt), 0, "%s", woolly_last_error());
    for (int32_t got = 0; got < n;) {
        const int32_t k = woolly_spec_step(sp, s, out + got, n - got);
        cr_assert(k >= 1 && k <= n - got, "step: %d (%s)", k, woolly_last_error());
        got += k;
    }
}

static woolly_sampler *greedy_sampler(const woolly_model *m)
{
    woolly_sampler_params p = woolly_sampler_default_params();
    p.temp = 0.0f;
    woolly_sampler *s = woolly_sampler_open(m, &p);
    cr_assert(s != NULL, "%s", woolly_last_error());
    return s;
}

enum { N_GEN = 24 };

static const char *const PROMPTS[] = {
    "Once upon a time, there was a little girl named Lily",
    "The cat sat on the mat. The dog sat on the log. The cat sat on the",
    "Tom and Sam went to the park. They played with a ball. Tom and Sam",
};

/* Greedy text of target with draft (a model name, or NULL) and lookup, for every prompt and draft length
 * (fixed lengths, and the adaptive one), equals plain greedy text. Returns the guesses accepted. */
static int64_t check_greedy_identity(const char *target, const char *draft, int32_t lookup)
{
    woolly_model *tm = open_model(target), *dm = draft ? open_model(draft) : NULL;
    woolly_context *plain = open_ctx(tm, false), *tc = open_ctx(tm, true),
                   *dc = dm ? open_ctx(dm, false) : NULL;
    static const int32_t draft_max[] = {1, 3, 16};
    int64_t accepted = 0, drafted = 0;
    for (size_t pi = 0; pi < sizeof PROMPTS / sizeof *PROMPTS; pi++) {
        woolly_token prompt[64], want[N_GEN], got[N_GEN];
        const int32_t n_prompt = tokenize(tm, PROMPTS[pi], prompt, 64);
        woolly_sampler *s = greedy_sampler(tm);
        plain_tokens(plain, s, prompt, n_prompt, want, N_GEN, false);
        for (size_t di = 0; di <= sizeof draft_max / sizeof *draft_max; di++) {
            woolly_spec_params sp = woolly_spec_default_params();
            const bool adaptive = di == sizeof draft_max / sizeof *draft_max;
            sp.draft_max = adaptive ? 8 : draft_max[di];
            sp.adaptive = adaptive;
            sp.lookup = lookup;
            woolly_spec *spec = woolly_spec_open(tc, dc, &sp);
            cr_assert(spec != NULL, "%s", woolly_last_error());
            woolly_sampler_reset(s);
            spec_tokens(spec, s, prompt, n_prompt, got, N_GEN);
            for (int32_t i = 0; i < N_GEN; i++)
                cr_assert_eq(
                    got[i], want[i],
                    "%s, draft %s, lookup %d, draft-max %d%s, prompt %zu: token %d is %d, plain greedy "
                    "gives %d",
                    target, draft ? draft : "none", lookup, sp.draft_max, adaptive ? " (adaptive)" : "", pi,
                    i, got[i], want[i]);
            const woolly_spec_stats st = woolly_spec_get_stats(spec);
            cr_assert_eq(st.n_tokens, N_GEN - 1); /* the first token came from the prompt's logits */
            cr_assert(st.n_accepted <= st.n_drafted && st.n_steps >= 1);
            accepted += st.n_accepted;
            drafted += st.n_drafted;
            woolly_spec_close(spec);
        }
        woolly_sampler_close(s);
    }
    cr_assert(drafted > 0, "%s with %s: nothing was drafted, so nothing was checked", target,
              draft ? draft : "lookup");
    woolly_context_close(dc);
    woolly_context_close(tc);
    woolly_context_close(plain);
    woolly_model_close(dm);
    woolly_model_close(tm);
    return accepted;
}

Test(spec_greedy, stories260K_self_draft_accepts_and_matches)
{
    /* The draft is the target: every guess that is checked passes, the longest steps are exercised. */
    cr_assert(check_greedy_identity("stories260K", "stories260K", 0) > 0,
              "a model drafting for itself accepts");
}

Test(spec_greedy, stories260K_lookup_matches)
{
    cr_assert(check_greedy_identity("stories260K", NULL, 2) > 0, "the prompts repeat: lookup accepts some");
}

Test(spec_greedy, tiny_llama_q8_0_with_q4_k_m_draft_matches)
{
    /* Random weights, flat logits: the two types disagree often, rejections at every depth. */
    check_greedy_identity("tiny-llama-q8_0", "tiny-llama-q4_k_m", 0);
}

Test(spec_greedy, tiny_llama_q4_k_m_with_q6_k_draft_and_lookup_matches)
{
    check_greedy_identity("tiny-llama-q4_k_m", "tiny-llama-q6_k", 1);
}

/* ---- the distribution of sampled text ----------------------------------------------------------------- */

/* Upper tail of the chi-square distribution with df degrees of freedom at x, by the Wilson-Hilferty
 * normal approximation (within a factor of about 2 of the exact tail down to 1e-8 for df >= 3, and
 * conservative enough for a bar of 1e-6). */
static double chi2_tail(double x, int df)
{
    const double v = 2.0 / (9.0 * df), z = (cbrt(x / df) - (1.0 - v)) / sqrt(v);
    return 0.5 * erfc(z / sqrt(2.0));
}

/* The chance a correct implementation fails one comparison; the runs are seeded, so a result never
 * changes between runs of one build. */
#define FALSE_ALARM 1e-6
enum { N_POS = 4, MIN_BIN = 10 };

/* Two equal-sized samples of tokens: the chi-square statistic of homogeneity over the tokens seen at least
 * MIN_BIN times in both together (the rest pooled in one bin), and its tail probability. */
static double homogeneity_tail(const int32_t *a, const int32_t *b, int32_t n, int32_t n_vocab, int *df_out)
{
    int32_t *ca = calloc((size_t)n_vocab, sizeof *ca), *cb = calloc((size_t)n_vocab, sizeof *cb);
    cr_assert(ca && cb);
    for (int32_t i = 0; i < n; i++) {
        ca[a[i]]++;
        cb[b[i]]++;
    }
    double chi2 = 0.0;
    int bins = 0;
    int64_t ra = 0, rb = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (ca[t] + cb[t] >= MIN_BIN) {
            const double d = ca[t] - cb[t];
            chi2 += d * d / (ca[t] + cb[t]);
            bins++;
        } else {
            ra += ca[t];
            rb += cb[t];
        }
    }
    if (ra + rb > 0) {
        const double d = (double)(ra - rb);
        chi2 += d * d / (double)(ra + rb);
        bins++;
    }
    free(ca);
    free(cb);
    *df_out = bins - 1;
    return bins > 1 ? chi2_tail(chi2, bins - 1) : 1.0;
}

/* The sanitizer build makes a quarter of the runs: it is there for memory errors on these paths, which a
 * few hundred runs reach as surely as the full count (the test ran 11 times slower there); the
 * release build keeps the check's full power. */
#if defined(__SANITIZE_ADDRESS__)
enum { RUNS_DIVISOR = 4 };
#else
enum { RUNS_DIVISOR = 1 };
#endif

/* n_runs seeded runs (n_runs / RUNS_DIVISOR) of N_POS sampled tokens each, plain and speculative; the
 * tokens at each position must come from one distribution. Returns the spec's counts. */
static woolly_spec_stats check_distribution(const char *target, const char *draft, int32_t lookup, const char *text,
                                  woolly_sampler_params sp_base, int32_t n_runs)
{
    n_runs /= RUNS_DIVISOR;
    woolly_model *tm = open_model(target), *dm = draft ? open_model(draft) : NULL;
    woolly_context *plain = open_ctx(tm, false), *tc = open_ctx(tm, true),
                   *dc = dm ? open_ctx(dm, false) : NULL;
    woolly_spec_params sp = woolly_spec_default_params();
    sp.draft_max = 4;
    sp.adaptive = false;
    sp.lookup = lookup;
    woolly_spec *spec = woolly_spec_open(tc, dc, &sp);
    cr_assert(spec != NULL, "%s", woolly_last_error());
    woolly_token prompt[96];
    const int32_t n_prompt = tokenize(tm, text, prompt, 96);
    const int32_t n_vocab = woolly_model_n_vocab(tm);
    int32_t *a = malloc(sizeof *a * (size_t)n_runs * N_POS), *b = malloc(sizeof *b * (size_t)n_runs * N_POS);
    cr_assert(a && b);
    for (int32_t r = 0; r < n_runs; r++) {
        woolly_token out[N_POS];
        woolly_sampler_params p = sp_base;
        p.seed = 1000003u * (uint64_t)r + 17u;
        woolly_sampler *s = woolly_sampler_open(tm, &p);
        cr_assert(s != NULL, "%s", woolly_last_error());
        plain_tokens(plain, s, prompt, n_prompt, out, N_POS, true);
        for (int i = 0; i < N_POS; i++)
            a[i * n_runs + r] = out[i];
        woolly_sampler_close(s);
        p.seed += 0x9E3779B97F4A7C15ull; /* independent of the plain run's */
        s = woolly_sampler_open(tm, &p);
        spec_tokens(spec, s, prompt, n_prompt, out, N_POS);
        for (int i = 0; i < N_POS; i++)
            b[i * n_runs + r] = out[i];
        woolly_sampler_close(s);
    }
    for (int i = 0; i < N_POS; i++) {
        int df;
        const double tail = homogeneity_tail(a + i * n_runs, b + i * n_runs, n_runs, n_vocab, &df);
        cr_assert(df >= 1, "position %d: a single token, nothing to compare", i);
        cr_assert(tail > FALSE_ALARM,
                  "%s, draft %s, lookup %d: generated token %d has another distribution with speculation "
                  "(chi-square tail %.3g over %d degrees of freedom, bar %g)",
                  target, draft ? draft : "none", lookup, i, tail, df, FALSE_ALARM);
    }
    const woolly_spec_stats st = woolly_spec_get_stats(spec);
    cr_assert(st.n_drafted > 0);
    free(a);
    free(b);
    woolly_spec_close(spec);
    woolly_context_close(dc);
    woolly_context_close(tc);
    woolly_context_close(plain);
    woolly_model_close(dm);
    woolly_model_close(tm);
    return st;
}

static woolly_sampler_params hot(void)
{
    woolly_sampler_params p = woolly_sampler_default_params();
    p.temp = 1.5f; /* flat: the guesses' probabilities are far from 0 and 1, where errors show most */
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

Test(spec_sampling, stories260K_lookup_has_the_plain_distribution)
{
    /* Lookup's guesses are point masses: the acceptance with probability p(x) and the draw from p without
     * x are exercised (accepting with probability 2 p(x) instead fails here: tail 9e-8). */
    cr_assert(check_distribution("stories260K", NULL, 1,
                                 "Once upon a time, there was a girl. She had a cat. She liked the cat. She",
                                 hot(), 1500)
                  .n_accepted > 0);
}

Test(spec_sampling, stories260K_draft_with_penalties_has_the_plain_distribution)
{
    /* The draft's sampler has no penalties, the target's strong ones: q and p differ where the text
     * repeats, both branches of min(1, p/q) and the draw from max(0, p - q) run. A weaker check than the
     * lookup one (the two distributions stay close on this model: about 94% of guesses pass). */
    woolly_sampler_params p = hot();
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 1.0f;
    cr_assert(check_distribution("stories260K", "stories260K", 0, "Once upon a time, there was a", p, 800)
                  .n_accepted > 0);
}

Test(spec_sampling, tiny_qwen3_f16_with_its_q4_k_m_draft_has_the_plain_distribution)
{
    /* The same random weights in F16 and Q4_K_M: the quantized draft's top-4 distribution differs from the
     * target's enough that about half its guesses are rejected (stories260K drafting for itself keeps
     * 94%), so both branches of min(1, p/q) and the draw from max(0, p - q) carry weight. Resampling from
     * p instead of max(0, p - q) fails here (tail 7e-12 at generated token 1), and so does keeping a guess
     * with probability p(x) regardless of q (tail 2e-31). */
    woolly_sampler_params p = hot();
    p.temp = 1.0f;
    p.top_k = 4;
    const woolly_spec_stats st = check_distribution("tiny-qwen3-f16", "tiny-qwen3-q4_k_m", 0,
                                                    "The quick brown fox jumps over the", p, 600);
    const double kept = (double)st.n_accepted / (double)st.n_drafted;
    cr_assert(kept > 0.2 && kept < 0.8, "the pair should disagree often but not always: %.0f%% of guesses kept",
              100.0 * kept);
}

/* ---- bad input ---------------------------------------------------------------------------------------- */

Test(spec_refuses, bad_parameters)
{
    woolly_model *m = open_model("stories260K");
    woolly_context *tc = open_ctx(m, true), *plain = open_ctx(m, false);
    woolly_spec_params p = woolly_spec_default_params();
    p.draft_max = 0;
    p.lookup = 2;
    cr_assert_null(woolly_spec_open(tc, NULL, &p));
    cr_assert(strstr(woolly_last_error(), "draft-max 0"), "%s", woolly_last_error());
    p.draft_max = 1000;
    cr_assert_null(woolly_spec_open(tc, NULL, &p));
    cr_assert(strstr(woolly_last_error(), "draft-max 1000"), "%s", woolly_last_error());
    p.draft_max = 4;
    p.lookup = 99;
    cr_assert_null(woolly_spec_open(tc, NULL, &p));
    cr_assert(strstr(woolly_last_error(), "lookup 99"), "%s", woolly_last_error());
    p.lookup = 0;
    cr_assert_null(woolly_spec_open(tc, NULL, &p));
    cr_assert(strstr(woolly_last_error(), "draft model or prompt lookup"), "%s", woolly_last_error());
    p.lookup = 2;
    cr_assert_null(woolly_spec_open(plain, NULL, &p));
    cr_assert(strstr(woolly_last_error(), "logits_all"), "%s", woolly_last_error());
    cr_assert_null(woolly_spec_open(tc, tc, &p));

    /* A grammar samples only greedily. */
    woolly_spec *spec = woolly_spec_open(tc, NULL, &p);
    cr_assert(spec != NULL, "%s", woolly_last_error());
    woolly_grammar *g = woolly_grammar_open_gbnf("root ::= \"a\"+", 13);
    cr_assert(g != NULL, "%s", woolly_last_error());
    woolly_sampler_params sp = woolly_sampler_default_params();
    woolly_sampler *s = woolly_sampler_open(m, &sp);
    cr_assert_eq(woolly_sampler_set_grammar(s, m, g), 0, "%s", woolly_last_error());
    woolly_token prompt[] = {1, 400}, out[4];
    cr_assert_eq(woolly_spec_begin(spec, prompt, 2), 0, "%s", woolly_last_error());
    cr_assert_eq(woolly_spec_step(spec, s, out, 4), -1);
    cr_assert(strstr(woolly_last_error(), "grammar"), "%s", woolly_last_error());
    cr_assert_eq(woolly_spec_begin(spec, prompt, 0), -1);
    woolly_sampler_close(s);
    woolly_grammar_close(g);
    woolly_spec_close(spec);
    woolly_context_close(plain);
    woolly_context_close(tc);
    woolly_model_close(m);
}

static void check_vocab_refused(const char *target, const char *draft, const char *what)
{
    woolly_model *tm = open_model(target), *dm = open_model(draft);
    woolly_context *tc = open_ctx(tm, true), *dc = open_ctx(dm, false);
    woolly_spec_params p = woolly_spec_default_params();
    cr_assert_null(woolly_spec_open(tc, dc, &p), "%s with a %s draft", target, draft);
    cr_assert(strstr(woolly_last_error(), "draft model") && strstr(woolly_last_error(), what), "%s",
              woolly_last_error());
    woolly_context_close(dc);
    woolly_context_close(tc);
    woolly_model_close(dm);
    woolly_model_close(tm);
}

Test(spec_refuses, draft_of_another_vocabulary)
{
    check_vocab_refused("tiny-llama-q4_k_m", "stories260K", "512 tokens");
    /* The same size (SPM 4000), the last four pieces differ: found token by token. */
    check_vocab_refused("tiny-mixtral-f16", "tiny-phi3-f16", "token 3996");
}
