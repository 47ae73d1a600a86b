/* `woolly perplexity --kl-divergence-base / --kl-divergence`: a run against its own base diverges by
 * exactly 0 with every top token the same; tiny-llama-q8_0 against a tiny-llama-f16 base (the same
 * weights, quantized) gives the mean KL divergence, top-token agreement and perplexity ratio that a
 * float64 recomputation from `woolly logits` of both models gives; malformed and mismatched bases are
 * refused with a message before anything is evaluated. */
#include "perplexity_check.h"

#define KL_MAX_REL 1e-3

static char *base_of(const char *model, const char *name, int n_ctx, int chunks)
{
    char args[8192];
    char *path = strdup(tu_tmp_path(name));
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c %d --chunks %d --kl-divergence-base %s -q",
             model_file(model), STORY, n_ctx, chunks, path);
    free(run_ok(NULL, args));
    return path;
}

static char *kl_against(const char *model, const char *base, const char *extra)
{
    char args[8192];
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence %s -q %s", model_file(model), STORY,
             base, extra);
    return run_ok(NULL, args);
}

Test(perplexity_kl, a_run_against_its_own_base_is_exactly_0)
{
    char *base = base_of("stories260K", "self.kl", 64, 2);
    char *out = kl_against("stories260K", base, "");
    fprintf(stderr, "stories260K against its own base:\n%s", out);
    cr_expect_eq(number_after(out, "Mean KLD              :"), 0.0, "%s", out);
    cr_expect_eq(number_after(out, "Maximum KLD           :"), 0.0, "%s", out);
    cr_expect_eq(number_after(out, "Same top token        :"), 100.0, "%s", out);
    cr_expect_eq(number_after(out, "ln(PPL/PPL base)      :"), 0.0, "%s", out);
    cr_expect_eq(number_after(out, "PPL/PPL base          :"), 1.0, "%s", out);
    cr_expect(strstr(out, "of 62 positions") != NULL, "2 chunks x 31 positions: %s", out);
    remove(base), free(base), free(out);
}

Test(perplexity_kl, q8_0_against_an_f16_base_matches_a_float64_recomputation)
{
    /* Tiny chunks: F16 matrices with the sanitizers evaluate a few tokens per second. */
    enum { CTX = 16, CHUNKS = 2, N_VOCAB = 32000 };
    char *base = base_of("tiny-llama-f16", "f16.kl", CTX, CHUNKS);
    char *out = kl_against("tiny-llama-q8_0", base, "-t 2");
    const double kl = number_after(out, "Mean KLD              :");
    const double same = number_after(out, "Same top token        :");
    const double ratio = number_after(out, "PPL/PPL base          :");

    int n_tokens;
    int32_t *ids = story_tokens("tiny-llama-f16", &n_tokens);
    cr_assert_geq(n_tokens, CTX * CHUNKS);
    const woolly_token bos = model_bos("tiny-llama-f16");
    double *lp_base = malloc(sizeof(double) * N_VOCAB), *lp = malloc(sizeof(double) * N_VOCAB);
    cr_assert(lp_base && lp);
    double sum_kl = 0.0, sum_nll = 0.0, sum_nll_base = 0.0;
    int n = 0, n_same = 0;
    for (int k = 0; k < CHUNKS; k++) {
        float *zb = chunk_logits(NULL, "tiny-llama-f16", ids, CTX, k, bos, 2, N_VOCAB);
        float *zq = chunk_logits(NULL, "tiny-llama-q8_0", ids, CTX, k, bos, 2, N_VOCAB);
        for (int pos = CTX / 2; pos <= CTX - 2; pos++) {
            const int top_base = ref_log_softmax(zb + (size_t)pos * N_VOCAB, N_VOCAB, lp_base);
            const int top = ref_log_softmax(zq + (size_t)pos * N_VOCAB, N_VOCAB, lp);
            double d = 0.0;
            for (int i = 0; i < N_VOCAB; i++)
                d += exp(lp_base[i]) * (lp_base[i] - lp[i]);
            const int target = ids[k * CTX + pos + 1];
            sum_kl += d, sum_nll += -lp[target], sum_nll_base += -lp_base[target];
            n_same += top == top_base;
            n++;
        }
        free(zb), free(zq);
    }
    const double ref_kl = sum_kl / n, ref_same = 100.0 * n_same / n,
                 ref_ratio = exp((sum_nll - sum_nll_base) / n);
    fprintf(
        stderr,
        "KL tiny-llama-q8_0 against tiny-llama-f16, -c %d, %d chunks: woolly %.6g, float64 %.6g; same top "
        "%.3f %% (%.3f %%); PPL ratio %.6f (%.6f)\n",
        CTX, CHUNKS, kl, ref_kl, same, ref_same, ratio, ref_ratio);
    cr_assert(ref_kl > 0.0, "quantization changes the predictions");
    cr_expect(fabs(kl - ref_kl) <= KL_MAX_REL * ref_kl, "mean KL %.9g, recomputed %.9g", kl, ref_kl);
    cr_expect(fabs(same - ref_same) <= 0.5e-3 * (1 + 1e-9), "same top %.3f %%, recomputed %.4f %%", same,
              ref_same);
    cr_expect(fabs(ratio - ref_ratio) <= 0.5e-6 * (1 + 1e-6), "PPL ratio %.6f, recomputed %.8f", ratio,
              ref_ratio);
    free(lp_base), free(lp), free(ids), remove(base), free(base), free(out);
}

/* A copy of `bytes` with `size` bytes, changed by `edit` (may be NULL). */
static char *variant(const char *name, const char *bytes, size_t size, void (*edit)(char *, size_t))
{
    char *copy = tu_heap_copy(bytes, size);
    if (edit)
        edit(copy, size);
    char *path = strdup(tu_tmp_path(name));
    FILE *f = fopen(path, "wb");
    cr_assert(path && f);
    cr_assert_eq(fwrite(copy, 1, size, f), size);
    fclose(f);
    free(copy);
    return path;
}

static void bad_magic(char *b, size_t n)
{
    (void)n;
    b[0] = 'X';
}

static void version_2(char *b, size_t n)
{
    (void)n;
    b[8] = 2;
}

static void huge_vocab(char *b, size_t n)
{
    (void)n;
    b[19] = 0x7f; /* n_vocab's high byte */
}

static void bad_token(char *b, size_t n)
{
    (void)n;
    memset(b + 128, 0xff, 4); /* the first record's token: -1 */
}

Test(perplexity_kl, malformed_bases_are_refused)
{
    enum { CTX = 32, CHUNKS = 2 };
    char *good = base_of("stories260K", "good.kl", CTX, CHUNKS);
    size_t size;
    char *bytes = tu_read_file(good, &size);
    char args[8192];
    const struct {
        const char *name;
        size_t size;
        void (*edit)(char *, size_t);
        const char *want;
    } CASES[] = {
        {"empty.kl", 0, NULL, "is not a woolly KL-divergence base"},
        {"magic.kl", size, bad_magic, "is not a woolly KL-divergence base"},
        {"version.kl", size, version_2, "format version 2"},
        {"header-cut.kl", 100, NULL, "is truncated"},
        {"records-cut.kl", size - 1000, NULL, "is truncated"},
        {"too-long.kl", size, NULL, NULL}, /* written with extra bytes below */
        {"vocab.kl", size, huge_vocab, "out of range"},
        {"token.kl", size, bad_token, "token id -1 is out of range"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *path;
        const char *want = CASES[i].want;
        if (!want) {
            char *longer = malloc(size + 7);
            cr_assert(longer);
            memcpy(longer, bytes, size);
            memset(longer + size, 0, 7);
            path = variant(CASES[i].name, longer, size + 7, NULL);
            free(longer);
            want = "has 7 bytes after";
        } else {
            path = variant(CASES[i].name, bytes, CASES[i].size, CASES[i].edit);
        }
        snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence %s", model_file("stories260K"),
                 STORY, path);
        run_refused(args, want);
        remove(path), free(path);
    }
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence %s/no-such.kl",
             model_file("stories260K"), STORY, WOOLLY_BUILD_DIR);
    run_refused(args, "cannot read");
    free(bytes), remove(good), free(good);
}

Test(perplexity_kl, mismatched_bases_are_refused)
{
    enum { CTX = 32, CHUNKS = 2 };
    char *base = base_of("stories260K", "mismatch.kl", CTX, CHUNKS);
    char args[8192];
    char *m = strdup(model_file("stories260K")); /* model_file's buffer is reused by the next call */

    /* Another vocabulary: tiny-llama's 32000 tokens against stories260K's 512. */
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence %s", model_file("tiny-llama-q8_0"),
             STORY, base);
    run_refused(args, "another vocabulary");
    /* Other chunking: chunk size, chunk count. */
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 64 --kl-divergence %s", m, STORY, base);
    run_refused(args, "chunks of 32 tokens");
    snprintf(args, sizeof args, "perplexity -m %s -f %s --chunks 1 --kl-divergence %s", m, STORY, base);
    run_refused(args, "holds 2 chunks");
    /* Another text: the story with one word changed. */
    size_t size;
    char *story = tu_read_file(STORY, &size);
    char *at = strstr(story, "Tom");
    cr_assert(at);
    memcpy(at, "Tim", 3);
    char *other = strdup(tu_tmp_path("other-story.txt"));
    FILE *f = fopen(other, "wb");
    cr_assert(other && f);
    fwrite(story, 1, size, f);
    fclose(f);
    snprintf(args, sizeof args, "perplexity -m %s -f %s --kl-divergence %s", m, other, base);
    run_refused(args, "another text");
    remove(other), free(other), free(story), remove(base), free(base), free(m);
}
