/* The public C API on the real stories260K model: tokenize/detokenize, evaluation and its limits
 * (context full, bad ids, logits positions), rewinding, parameters, errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "woolly.h"

static woolly_model *open_stories(void)
{
    woolly_model *m = woolly_model_open(tu_data("models/stories260K.gguf"));
    cr_assert(m != NULL, "%s", woolly_last_error());
    return m;
}

static woolly_context *open_ctx(woolly_model *m, int n_ctx, int n_batch, bool all)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.logits_all = all;
    woolly_context *c = woolly_context_open(m, &p);
    cr_assert(c != NULL, "%s", woolly_last_error());
    return c;
}

static const woolly_token PROMPT[5] = {1, 403, 407, 261, 378}; /* <s> Once upon a time */

Test(api, version_and_model_facts)
{
    cr_expect_str_eq(woolly_version(), "0.1.0");
    woolly_model *m = open_stories();
    cr_expect_eq(woolly_model_n_vocab(m), 512);
    cr_expect_str_eq(woolly_model_arch(m), "llama");
    cr_expect_gt(woolly_model_n_params(m), 250000);
    cr_expect_gt(woolly_model_size(m), 4 * woolly_model_n_params(m) - 1, "all F32");
    cr_expect_eq(woolly_token_bos(m), 1);
    cr_expect_eq(woolly_token_eos(m), 2);
    cr_expect(woolly_token_is_eog(m, 2));
    cr_expect(!woolly_token_is_eog(m, 403));
    cr_expect(woolly_model_adds_bos(m));
    woolly_model_close(m);
}

Test(api, tokenize_and_detokenize)
{
    woolly_model *m = open_stories();
    woolly_token ids[16];
    const char *text = "Once upon a time";
    const int32_t n = woolly_model_tokenize(m, text, strlen(text), true, false, ids, 16);
    cr_assert_eq(n, 5);
    cr_expect(memcmp(ids, PROMPT, sizeof PROMPT) == 0, "ids %d,%d,%d,%d,%d", ids[0], ids[1], ids[2], ids[3],
              ids[4]);
    cr_expect_eq(woolly_model_tokenize(m, text, strlen(text), true, false, ids, 2), 5,
                 "a short buffer gets the count");
    char out[64];
    const int64_t len = woolly_model_detokenize(m, PROMPT, 5, out, sizeof out);
    cr_expect_eq(len, (int64_t)strlen(out));
    cr_expect_str_eq(out[0] == ' ' ? out + 1 : out, "Once upon a time");
    const woolly_token bad[2] = {403, 512};
    cr_expect_eq(woolly_model_detokenize(m, bad, 2, out, sizeof out), -1);
    cr_expect(strstr(woolly_last_error(), "512") != NULL, "%s", woolly_last_error());
    woolly_model_close(m);
}

Test(api, context_defaults)
{
    woolly_model *m = open_stories();
    woolly_context *c = woolly_context_open(m, NULL);
    cr_assert(c != NULL, "%s", woolly_last_error());
    const int32_t want = woolly_model_n_ctx_train(m) < 4096 ? woolly_model_n_ctx_train(m) : 4096;
    cr_expect_eq(woolly_context_n_ctx(c), want);
    cr_expect_geq(woolly_context_n_threads(c), 1);
    cr_expect_eq(woolly_context_n_past(c), 0);
    cr_expect_null(woolly_get_logits(c, -1), "no logits before any evaluation");
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, bad_context_parameters)
{
    woolly_model *m = open_stories();
    woolly_context_params p = woolly_context_default_params();
    p.n_threads = -1;
    cr_expect_null(woolly_context_open(m, &p));
    cr_expect(strstr(woolly_last_error(), "n_threads -1") != NULL, "%s", woolly_last_error());
    p = woolly_context_default_params();
    p.n_threads = 5000;
    cr_expect_null(woolly_context_open(m, &p));
    cr_expect(strstr(woolly_last_error(), "5000") != NULL, "%s", woolly_last_error());
    p = woolly_context_default_params();
    p.kv_type = (woolly_kv_type)7;
    cr_expect_null(woolly_context_open(m, &p));
    cr_expect(strstr(woolly_last_error(), "KV cache type 7") != NULL, "%s", woolly_last_error());
    woolly_model_close(m);
}

Test(api, the_context_never_overflows)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 8, 4, false);
    const woolly_token nine[9] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
    cr_expect_eq(woolly_eval(c, nine, 9), -1);
    cr_expect(strstr(woolly_last_error(), "context full") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_past(c), 0, "nothing evaluated on error");
    cr_assert_eq(woolly_eval(c, nine, 8), 0, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_past(c), 8);
    cr_expect_eq(woolly_eval(c, nine, 1), -1);
    cr_expect(strstr(woolly_last_error(), "8 tokens in the cache + 1 new ones exceed the context size 8") !=
                  NULL,
              "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_past(c), 8);
    cr_expect(woolly_get_logits(c, -1) != NULL, "the last good evaluation's logits stay");
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, bad_token_ids_evaluate_nothing)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 16, 16, false);
    const woolly_token ids[3] = {1, 600, 2};
    cr_expect_eq(woolly_eval(c, ids, 3), -1);
    cr_expect(strstr(woolly_last_error(), "token id 600 (at index 1) is out of range [0, 512)") != NULL, "%s",
              woolly_last_error());
    const woolly_token neg = -1;
    cr_expect_eq(woolly_eval(c, &neg, 1), -1);
    cr_expect_eq(woolly_eval(c, ids, 0), -1);
    cr_expect_eq(woolly_context_n_past(c), 0);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, logits_positions)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 16, 5, true);
    cr_assert_eq(woolly_eval(c, PROMPT, 5), 0, "%s", woolly_last_error());
    for (int i = 0; i < 5; i++)
        cr_expect(woolly_get_logits(c, i) != NULL, "position %d", i);
    cr_expect_eq(woolly_get_logits(c, -1), woolly_get_logits(c, 4));
    cr_expect_null(woolly_get_logits(c, 5));
    const woolly_token six[6] = {1, 403, 407, 261, 378, 432};
    cr_expect_eq(woolly_eval(c, six, 6), -1, "with every position's logits, at most n_batch tokens per call");
    cr_expect(strstr(woolly_last_error(), "n_batch = 5") != NULL, "%s", woolly_last_error());
    woolly_context_close(c);

    c = open_ctx(m, 16, 2, false); /* the last token only, prompt in batches of 2 */
    cr_assert_eq(woolly_eval(c, PROMPT, 5), 0, "%s", woolly_last_error());
    cr_expect(woolly_get_logits(c, 4) != NULL);
    cr_expect_null(woolly_get_logits(c, 3));
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, rewinding_recomputes_the_same_logits)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 32, 8, false);
    cr_assert_eq(woolly_eval(c, PROMPT, 5), 0);
    float *first = malloc(512 * sizeof(float));
    cr_assert(first != NULL);
    memcpy(first, woolly_get_logits(c, -1), 512 * sizeof(float));
    cr_expect_eq(woolly_context_rewind(c, 6), -1, "cannot rewind forward");
    cr_assert_eq(woolly_context_rewind(c, 2), 0);
    cr_expect_eq(woolly_context_n_past(c), 2);
    cr_assert_eq(woolly_eval(c, PROMPT + 2, 1), 0); /* one at a time now: the decode path */
    cr_assert_eq(woolly_eval(c, PROMPT + 3, 1), 0);
    cr_assert_eq(woolly_eval(c, PROMPT + 4, 1), 0);
    const double e = tu_nmse(woolly_get_logits(c, -1), first, 512);
    cr_expect_leq(e, 1e-12, "batched and decoded logits differ by NMSE %g", e);
    free(first);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, greedy_generation_through_the_sampler)
{
    woolly_model *m = open_stories();
    woolly_context *c = open_ctx(m, 64, 64, false);
    woolly_sampler_params sp = woolly_sampler_default_params();
    sp.temp = 0.0f;
    woolly_sampler *s = woolly_sampler_open(m, &sp);
    cr_assert(s != NULL, "%s", woolly_last_error());
    woolly_token ids[32];
    memcpy(ids, PROMPT, sizeof PROMPT);
    int n = 5;
    cr_assert_eq(woolly_eval(c, ids, n), 0);
    while (n < 20) {
        const float *l = woolly_get_logits(c, -1);
        const woolly_token t = woolly_sampler_sample(s, l);
        cr_assert_eq(t, woolly_sample_greedy(l, woolly_model_n_vocab(m)));
        ids[n++] = t;
        cr_assert_eq(woolly_eval(c, &t, 1), 0);
    }
    char text[512];
    woolly_model_detokenize(m, ids, n, text, sizeof text);
    char *want = tu_read_file(tu_data("refs/stories260K.greedy200.txt"), NULL);
    const char *w = want[0] == ' ' ? want + 1 : want, *g = text[0] == ' ' ? text + 1 : text;
    cr_expect(strncmp(g, w, strlen(g)) == 0, "greedy text\n%s\nis not a prefix of the reference\n%s", g, w);
    free(want);
    woolly_sampler_close(s);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(api, bad_sampler_parameters)
{
    woolly_model *m = open_stories();
    woolly_sampler_params sp = woolly_sampler_default_params();
    sp.top_p = 2.0f;
    cr_expect_null(woolly_sampler_open(m, &sp));
    cr_expect(strstr(woolly_last_error(), "top-p 2") != NULL, "%s", woolly_last_error());
    woolly_sampler *s = woolly_sampler_open(m, NULL);
    cr_expect(s != NULL, "NULL parameters mean the defaults");
    woolly_sampler_close(s);
    woolly_model_close(m);
}
