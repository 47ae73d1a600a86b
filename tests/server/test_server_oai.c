/* The OpenAI API fields agents use beyond plain generation: logprobs and top_logprobs (chat), the legacy
 * logprobs (completions), whole and streamed; n > 1 choices (the prompt evaluated once, the choices
 * decoded side by side); POST /v1/embeddings; and each field's bad values (400 naming the field). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "testutil.h"

#define MODEL "models/stories260K.gguf"

static void start(th_server *s, int parallel)
{
    char *model = strdup(tu_data(MODEL));
    th_start(s, NULL, "-m %s -c 256 --parallel %d -t 1", model, parallel);
    free(model);
}

static json_t *post_ok(const th_server *s, const char *path, const char *body)
{
    th_resp r = th_post(s, path, body);
    cr_assert_eq(r.status, 200, "%s -> %ld %s", body, r.status, r.body);
    json_t *j = th_json(&r);
    th_resp_free(&r);
    return j;
}

static json_t *choice(json_t *body, size_t i)
{
    json_t *c = json_array_get(json_object_get(body, "choices"), i);
    cr_assert(json_is_object(c), "no choices[%zu]", i);
    return c;
}

static long long usage(json_t *body, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(body, "usage"), field));
}

static const char *chat_text(json_t *c)
{
    return json_string_value(json_object_get(json_object_get(c, "message"), "content"));
}

/* A 400 whose error names `param`. */
static void expect_bad(const th_server *s, const char *path, const char *body, const char *param)
{
    th_resp r = th_post(s, path, body);
    json_t *b = th_json(&r);
    th_expect_error(b, &r, 400);
    const char *got = json_string_value(json_object_get(json_object_get(b, "error"), "param"));
    cr_expect(got && !strcmp(got, param), "%s: param '%s', expected '%s'", body, got ? got : "(null)", param);
    json_decref(b);
    th_resp_free(&r);
}

/* ---- logprobs ------------------------------------------------------------------------------------ */

/* Each entry of a chat logprobs.content list: a token whose bytes spell it, a logprob <= 0, k
 * alternatives best first; at temperature 0 the token is the best alternative. Returns the tokens'
 * text. */
static char *check_chat_entries(json_t *content, int k, bool greedy)
{
    size_t i;
    json_t *e;
    char *text = calloc(1, 4096);
    json_array_foreach(content, i, e)
    {
        const char *tok = json_string_value(json_object_get(e, "token"));
        const double lp = json_real_value(json_object_get(e, "logprob"));
        json_t *bytes = json_object_get(e, "bytes"), *top = json_object_get(e, "top_logprobs");
        cr_assert(tok && json_is_array(bytes) && json_is_array(top), "entry %zu malformed", i);
        cr_expect(lp <= 0.0 && lp > -1e4, "entry %zu: logprob %g", i, lp);
        cr_assert_eq(json_array_size(bytes), strlen(tok));
        for (size_t b = 0; b < json_array_size(bytes); b++)
            cr_expect_eq(json_integer_value(json_array_get(bytes, b)), (unsigned char)tok[b]);
        cr_expect_eq(json_array_size(top), (size_t)k, "entry %zu: %zu alternatives", i, json_array_size(top));
        double prev = 0.0, mass = 0.0;
        for (size_t a = 0; a < json_array_size(top); a++) {
            const double alp = json_real_value(json_object_get(json_array_get(top, a), "logprob"));
            cr_expect(alp <= prev + 1e-12, "alternatives not best first");
            prev = alp;
            mass += exp(alp);
        }
        cr_expect(mass <= 1.0 + 1e-5, "alternatives' probabilities sum to %g", mass);
        if (greedy && k > 0) {
            json_t *best = json_array_get(top, 0);
            cr_expect_str_eq(json_string_value(json_object_get(best, "token")), tok);
            cr_expect_float_eq(json_real_value(json_object_get(best, "logprob")), lp, 1e-9);
        }
        strcat(text, tok);
    }
    return text;
}

Test(server_oai, chat_logprobs_whole_and_streamed)
{
    th_server s;
    start(&s, 2);
    static const char *BODY = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                              "\"max_tokens\":12,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":5%s}";
    char *req = th_fmt(BODY, "");
    json_t *b = post_ok(&s, "/v1/chat/completions", req);
    json_t *c = choice(b, 0);
    json_t *content = json_object_get(json_object_get(c, "logprobs"), "content");
    cr_assert(json_is_array(content));
    cr_expect_eq((long long)json_array_size(content), usage(b, "completion_tokens"));
    char *tokens = check_chat_entries(content, 5, true);
    cr_expect_str_eq(tokens, chat_text(c), "the tokens spell the text");

    /* Streamed: each chunk with text carries its token's entry, the same as the whole response's. */
    char *sreq = th_fmt(BODY, ",\"stream\":true");
    th_resp r = th_post(&s, "/v1/chat/completions", sreq);
    bool done;
    json_t *events = th_events(&r, &done);
    cr_expect(done);
    size_t i, k = 0;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_t *ch = json_array_get(json_object_get(ev, "choices"), 0);
        json_t *lp = json_object_get(ch, "logprobs");
        json_t *delta = json_object_get(ch, "delta");
        if (!json_is_string(json_object_get(delta, "content")) || json_object_get(delta, "role"))
            continue;
        json_t *entries = json_object_get(lp, "content");
        if (json_array_size(entries) == 0) /* text held back and released at the end has no token */
            continue;
        cr_assert_eq(json_array_size(entries), 1, "chunk %zu carries %zu entries", i,
                     json_array_size(entries));
        cr_expect(json_equal(json_array_get(entries, 0), json_array_get(content, k)), "token %zu differs", k);
        k++;
    }
    cr_expect_eq(k, json_array_size(content));
    json_decref(events);
    th_resp_free(&r);

    /* Without logprobs: null. */
    json_t *plain = post_ok(&s, "/v1/chat/completions",
                            "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}");
    cr_expect(json_is_null(json_object_get(choice(plain, 0), "logprobs")));
    json_decref(plain);
    free(tokens);
    free(sreq);
    free(req);
    json_decref(b);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, completion_legacy_logprobs)
{
    th_server s;
    start(&s, 2);
    json_t *b =
        post_ok(&s, "/v1/completions",
                "{\"prompt\":\"Once upon a time\",\"max_tokens\":10,\"temperature\":0,\"logprobs\":3}");
    json_t *c = choice(b, 0);
    const char *text = json_string_value(json_object_get(c, "text"));
    json_t *lp = json_object_get(c, "logprobs");
    json_t *tokens = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs"),
           *top = json_object_get(lp, "top_logprobs"), *off = json_object_get(lp, "text_offset");
    const size_t n = json_array_size(tokens);
    cr_assert(n == 10 && json_array_size(tlp) == n && json_array_size(top) == n && json_array_size(off) == n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_array_get(tokens, i));
        cr_expect_eq(json_integer_value(json_array_get(off, i)), (long long)at, "text_offset[%zu]", i);
        cr_expect(!strncmp(text + at, t, strlen(t)), "token %zu '%s' is not at its offset in '%s'", i, t,
                  text);
        at += strlen(t);
        json_t *alts = json_array_get(top, i);
        cr_expect_eq(json_object_size(alts), 3);
        /* Greedy: the token is the most likely, with the same logprob. */
        double best = -INFINITY;
        const char *key;
        json_t *v;
        json_object_foreach(alts, key, v) best = fmax(best, json_real_value(v));
        cr_expect_float_eq(json_real_value(json_object_get(alts, t)), best, 1e-9);
        cr_expect_float_eq(json_real_value(json_array_get(tlp, i)), best, 1e-9);
    }
    cr_expect_eq(at, strlen(text));

    /* logprobs 0: the chosen tokens' only. */
    json_t *b0 =
        post_ok(&s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":3,\"logprobs\":0}");
    json_t *top0 = json_object_get(json_object_get(choice(b0, 0), "logprobs"), "top_logprobs");
    cr_expect_eq(json_array_size(top0), 3);
    cr_expect_eq(json_object_size(json_array_get(top0, 0)), 0);
    json_decref(b0);

    /* Streamed: the chunks' tokens and offsets continue one another and equal the whole response's. */
    th_resp r = th_post(&s, "/v1/completions",
                        "{\"prompt\":\"Once upon a time\",\"max_tokens\":10,\"temperature\":0,\"logprobs\":3,"
                        "\"stream\":true}");
    bool done;
    json_t *events = th_events(&r, &done);
    size_t i, k = 0;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_t *slp = json_object_get(json_array_get(json_object_get(ev, "choices"), 0), "logprobs");
        if (!json_is_object(slp))
            continue;
        for (size_t t = 0; t < json_array_size(json_object_get(slp, "tokens")); t++, k++) {
            cr_expect(
                json_equal(json_array_get(json_object_get(slp, "tokens"), t), json_array_get(tokens, k)));
            cr_expect(
                json_equal(json_array_get(json_object_get(slp, "text_offset"), t), json_array_get(off, k)));
            cr_expect(
                json_equal(json_array_get(json_object_get(slp, "top_logprobs"), t), json_array_get(top, k)));
        }
    }
    cr_expect_eq(k, n);
    json_decref(events);
    th_resp_free(&r);
    json_decref(b);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* A logprob is the model's distribution: the same at any temperature (and penalty) for the same step. */
Test(server_oai, logprobs_are_the_models_distribution)
{
    th_server s;
    start(&s, 2);
    json_t *cold = post_ok(&s, "/v1/completions",
                           "{\"prompt\":\"Lily and Ben\",\"max_tokens\":1,\"temperature\":0,\"logprobs\":5}");
    json_t *hot = post_ok(&s, "/v1/completions",
                          "{\"prompt\":\"Lily and Ben\",\"max_tokens\":1,\"temperature\":1.9,\"seed\":3,"
                          "\"frequency_penalty\":1.5,\"logprobs\":5}");
    json_t *a =
        json_array_get(json_object_get(json_object_get(choice(cold, 0), "logprobs"), "top_logprobs"), 0);
    json_t *h =
        json_array_get(json_object_get(json_object_get(choice(hot, 0), "logprobs"), "top_logprobs"), 0);
    cr_expect(json_equal(a, h), "the first step's alternatives differ with the temperature");
    json_decref(cold);
    json_decref(hot);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, bad_logprobs_fields)
{
    th_server s;
    start(&s, 2);
    static const char *MSG = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char *b1 = th_fmt("{%s,\"logprobs\":true,\"top_logprobs\":21}", MSG);
    char *b2 = th_fmt("{%s,\"top_logprobs\":2}", MSG);
    char *b3 = th_fmt("{%s,\"logprobs\":\"yes\"}", MSG);
    char *b4 = th_fmt("{%s,\"logprobs\":true,\"top_logprobs\":-1}", MSG);
    char *b5 = th_fmt("{%s,\"logprobs\":true,\"top_logprobs\":2.5}", MSG);
    expect_bad(&s, "/v1/chat/completions", b1, "top_logprobs");
    expect_bad(&s, "/v1/chat/completions", b2, "top_logprobs");
    expect_bad(&s, "/v1/chat/completions", b3, "logprobs");
    expect_bad(&s, "/v1/chat/completions", b4, "top_logprobs");
    expect_bad(&s, "/v1/chat/completions", b5, "top_logprobs");
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":21}", "logprobs");
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":-1}", "logprobs");
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":\"3\"}", "logprobs");
    free(b1);
    free(b2);
    free(b3);
    free(b4);
    free(b5);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* ---- n > 1 --------------------------------------------------------------------------------------- */

Test(server_oai, n_choices_greedy_equal_and_batched)
{
    th_server s;
    start(&s, 4);
    json_t *one =
        post_ok(&s, "/v1/completions",
                "{\"prompt\":\"The little dog\",\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true}");
    const char *want = json_string_value(json_object_get(choice(one, 0), "text"));
    const double evaluated0 = th_metric(&s, "woolly_prompt_tokens_evaluated_total");
    const double steps0 = th_metric(&s, "woolly_generation_steps_total");
    /* A prompt the slots have not seen, so that nothing of it is cached. */
    json_t *b =
        post_ok(&s, "/v1/completions",
                "{\"prompt\":\"Tom found a big red ball in the park\",\"max_tokens\":16,\"temperature\":0,"
                "\"ignore_eos\":true,\"n\":4}");
    const long long n_prompt = usage(b, "prompt_tokens");
    const long long cached = json_integer_value(json_object_get(
        json_object_get(json_object_get(b, "usage"), "prompt_tokens_details"), "cached_tokens"));
    cr_expect_eq(json_array_size(json_object_get(b, "choices")), 4);
    const char *first = json_string_value(json_object_get(choice(b, 0), "text"));
    for (size_t i = 0; i < 4; i++) {
        json_t *c = choice(b, i);
        cr_expect_eq(json_integer_value(json_object_get(c, "index")), (long long)i);
        cr_expect_str_eq(json_string_value(json_object_get(c, "text")), first,
                         "choice %zu differs at temperature 0", i);
        cr_expect_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    }
    cr_expect_eq(usage(b, "completion_tokens"), 64, "completion tokens are summed");
    cr_expect_eq(usage(b, "total_tokens"), n_prompt + 64, "the prompt counts once");
    /* The prompt evaluated once (its last token once per choice), the choices decoded together. */
    const double evaluated = th_metric(&s, "woolly_prompt_tokens_evaluated_total") - evaluated0;
    cr_expect_eq(evaluated, (double)(n_prompt - cached) + 3,
                 "prompt tokens evaluated: %g for a prompt of %lld (%lld cached)", evaluated, n_prompt,
                 cached);
    const double steps = th_metric(&s, "woolly_generation_steps_total") - steps0;
    cr_expect(steps <= 17, "%g steps with generated tokens for 4 x 16 tokens: not batched", steps);

    /* n = 1 and n = 4 give the same greedy text. */
    json_t *same =
        post_ok(&s, "/v1/completions",
                "{\"prompt\":\"The little dog\",\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true,"
                "\"n\":3}");
    for (size_t i = 0; i < 3; i++)
        cr_expect_str_eq(json_string_value(json_object_get(choice(same, i), "text")), want);
    json_decref(same);
    json_decref(b);
    json_decref(one);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, n_choices_sampled_differ_and_repeat_with_a_seed)
{
    th_server s;
    start(&s, 4);
    static const char *BODY = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                              "\"max_tokens\":24,\"temperature\":1.5,\"top_k\":0,\"top_p\":1,\"min_p\":0,"
                              "\"seed\":11,\"n\":4}";
    json_t *a = post_ok(&s, "/v1/chat/completions", BODY);
    json_t *b = post_ok(&s, "/v1/chat/completions", BODY);
    int distinct = 0;
    for (size_t i = 0; i < 4; i++) {
        cr_expect_str_eq(chat_text(choice(a, i)), chat_text(choice(b, i)),
                         "choice %zu changed with the same seed", i);
        bool seen = false;
        for (size_t k = 0; k < i; k++)
            seen |= !strcmp(chat_text(choice(a, i)), chat_text(choice(a, k)));
        distinct += !seen;
    }
    cr_expect(distinct >= 2, "4 sampled choices, %d distinct", distinct);
    json_decref(a);
    json_decref(b);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, n_choices_streamed)
{
    th_server s;
    start(&s, 3);
    static const char *BODY = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                              "\"max_tokens\":10,\"temperature\":1.2,\"seed\":5,\"n\":3,\"logprobs\":true%s}";
    char *whole_req = th_fmt(BODY, "");
    json_t *whole = post_ok(&s, "/v1/chat/completions", whole_req);
    char *stream_req = th_fmt(BODY, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    th_resp r = th_post(&s, "/v1/chat/completions", stream_req);
    bool done;
    json_t *events = th_events(&r, &done);
    cr_expect(done);
    char text[3][1024] = {"", "", ""};
    int finishes[3] = {0}, roles[3] = {0}, lps[3] = {0};
    json_t *usage_ev = NULL;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_t *chs = json_object_get(ev, "choices");
        if (json_array_size(chs) == 0) {
            usage_ev = json_object_get(ev, "usage");
            continue;
        }
        cr_assert_eq(json_array_size(chs), 1);
        json_t *c = json_array_get(chs, 0);
        const long long k = json_integer_value(json_object_get(c, "index"));
        cr_assert(k >= 0 && k < 3);
        json_t *delta = json_object_get(c, "delta");
        roles[k] += json_object_get(delta, "role") != NULL;
        if (json_is_string(json_object_get(delta, "content")))
            strcat(text[k], json_string_value(json_object_get(delta, "content")));
        finishes[k] += json_is_string(json_object_get(c, "finish_reason"));
        lps[k] += (int)json_array_size(json_object_get(json_object_get(c, "logprobs"), "content"));
    }
    long long completion = 0;
    for (int k = 0; k < 3; k++) {
        json_t *c = choice(whole, (size_t)k);
        cr_expect_str_eq(text[k], chat_text(c), "choice %d streamed differs from whole", k);
        cr_expect_eq(roles[k], 1);
        cr_expect_eq(finishes[k], 1);
        cr_expect_eq(lps[k],
                     (int)json_array_size(json_object_get(json_object_get(c, "logprobs"), "content")));
        completion += lps[k];
    }
    cr_assert(usage_ev);
    cr_expect_eq(json_integer_value(json_object_get(usage_ev, "completion_tokens")),
                 usage(whole, "completion_tokens"));
    cr_expect_eq(json_integer_value(json_object_get(usage_ev, "prompt_tokens")),
                 usage(whole, "prompt_tokens"));
    json_decref(events);
    th_resp_free(&r);
    json_decref(whole);
    free(whole_req);
    free(stream_req);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, bad_n)
{
    th_server s;
    start(&s, 2);
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"n\":3}", "n");  /* above the slots */
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"n\":17}", "n"); /* above the limit */
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"n\":0}", "n");
    expect_bad(&s, "/v1/completions", "{\"prompt\":\"a\",\"n\":\"2\"}", "n");
    expect_bad(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":1.5}",
               "n");
    json_t *ok = post_ok(&s, "/v1/completions", "{\"prompt\":\"a\",\"n\":2,\"max_tokens\":2}");
    cr_expect_eq(json_array_size(json_object_get(ok, "choices")), 2);
    json_decref(ok);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* A client that leaves in the middle of an n > 1 stream frees every slot of its choices. */
Test(server_oai, n_choices_cancelled)
{
    th_server s;
    start(&s, 3);
    const int got = th_stream_abort(&s, "/v1/completions",
                                    "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"ignore_eos\":true,"
                                    "\"n\":3,\"stream\":true}",
                                    6);
    cr_expect_eq(got, 6);
    cr_expect(th_wait_idle(&s, 5000), "the slots of a cancelled n > 1 request stay busy");
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* ---- embeddings ---------------------------------------------------------------------------------- */

static float *vector_of(json_t *item, int *dim)
{
    json_t *v = json_object_get(item, "embedding");
    cr_assert(json_is_array(v));
    *dim = (int)json_array_size(v);
    float *x = malloc(sizeof *x * (size_t)*dim);
    for (int i = 0; i < *dim; i++)
        x[i] = (float)json_real_value(json_array_get(v, (size_t)i));
    return x;
}

static double max_diff(const float *a, const float *b, int n)
{
    double d = 0.0;
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static const char *const TEXTS[] = {"Once upon a time", "The little dog ran to the park.", "Lily and Ben"};

Test(server_oai, embeddings)
{
    th_server s;
    start(&s, 2);
    /* Each text alone. */
    float *alone[3];
    int dim = 0;
    long long tokens = 0;
    for (int t = 0; t < 3; t++) {
        char *req = th_fmt("{\"input\":\"%s\",\"model\":\"stories260K\"}", TEXTS[t]);
        json_t *b = post_ok(&s, "/v1/embeddings", req);
        cr_expect_str_eq(json_string_value(json_object_get(b, "object")), "list");
        cr_expect_str_eq(json_string_value(json_object_get(b, "model")), "stories260K");
        json_t *item = json_array_get(json_object_get(b, "data"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(item, "object")), "embedding");
        cr_expect_eq(json_integer_value(json_object_get(item, "index")), 0);
        alone[t] = vector_of(item, &dim);
        cr_expect_eq(dim, 64, "stories260K's hidden state has 64 dimensions");
        double norm = 0.0;
        for (int i = 0; i < dim; i++)
            norm += (double)alone[t][i] * alone[t][i];
        cr_expect_float_eq(norm, 1.0, 1e-5, "not normalized: |v|^2 = %g", norm);
        tokens += usage(b, "prompt_tokens");
        cr_expect_eq(usage(b, "total_tokens"), usage(b, "prompt_tokens"));
        json_decref(b);
        free(req);
    }
    cr_expect(max_diff(alone[0], alone[1], dim) > 1e-2 && max_diff(alone[1], alone[2], dim) > 1e-2,
              "different texts give the same vector");
    /* Together in one request (evaluated side by side): the same vectors, in order, the same usage. */
    char *req = th_fmt("{\"input\":[\"%s\",\"%s\",\"%s\"]}", TEXTS[0], TEXTS[1], TEXTS[2]);
    json_t *b = post_ok(&s, "/v1/embeddings", req);
    json_t *data = json_object_get(b, "data");
    cr_assert_eq(json_array_size(data), 3);
    for (int t = 0; t < 3; t++) {
        json_t *item = json_array_get(data, (size_t)t);
        cr_expect_eq(json_integer_value(json_object_get(item, "index")), t);
        int d;
        float *v = vector_of(item, &d);
        cr_expect(max_diff(v, alone[t], dim) <= 1e-6, "text %d: %g apart alone and in a batch", t,
                  max_diff(v, alone[t], dim));
        free(v);
    }
    cr_expect_eq(usage(b, "prompt_tokens"), tokens);
    json_decref(b);
    free(req);

    /* As token ids (the text's tokens, BOS included) and as a list of token lists. */
    char *treq = th_fmt("{\"content\":\"%s\",\"add_special\":true}", TEXTS[0]);
    json_t *tk = post_ok(&s, "/tokenize", treq);
    char *ids = json_dumps(json_object_get(tk, "tokens"), JSON_COMPACT);
    char *ireq = th_fmt("{\"input\":%s}", ids);
    json_t *bi = post_ok(&s, "/v1/embeddings", ireq);
    int d;
    float *v = vector_of(json_array_get(json_object_get(bi, "data"), 0), &d);
    cr_expect(max_diff(v, alone[0], dim) <= 1e-6, "token ids give another vector than their text");
    free(v);
    char *lreq = th_fmt("{\"input\":[%s,%s]}", ids, ids);
    json_t *bl = post_ok(&s, "/v1/embeddings", lreq);
    cr_expect_eq(json_array_size(json_object_get(bl, "data")), 2);
    v = vector_of(json_array_get(json_object_get(bl, "data"), 1), &d);
    cr_expect(max_diff(v, alone[0], dim) <= 1e-6);
    free(v);

    /* base64: the little-endian float32s of the same vector. */
    char *breq = th_fmt("{\"input\":\"%s\",\"encoding_format\":\"base64\"}", TEXTS[0]);
    json_t *bb = post_ok(&s, "/v1/embeddings", breq);
    const char *b64 =
        json_string_value(json_object_get(json_array_get(json_object_get(bb, "data"), 0), "embedding"));
    cr_assert(b64);
    cr_assert_eq(strlen(b64), (size_t)(dim * 4 + 2) / 3 * 4);
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char *raw = calloc((size_t)dim * 4 + 3, 1);
    size_t nraw = 0;
    for (size_t i = 0; b64[i]; i += 4) {
        unsigned q = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char ch = b64[i + k];
            pad += ch == '=';
            q = q << 6 | (ch == '=' ? 0u : (unsigned)(strchr(A, ch) - A));
        }
        for (int k = 0; k < 3 - pad; k++)
            raw[nraw++] = (unsigned char)(q >> (16 - 8 * k));
    }
    cr_assert_eq(nraw, (size_t)dim * 4);
    for (int i = 0; i < dim; i++) {
        const uint32_t u = raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
                           (uint32_t)raw[4 * i + 3] << 24;
        float f;
        memcpy(&f, &u, 4);
        cr_expect_eq(f, alone[0][i], "base64 element %d", i);
    }
    free(raw);
    json_decref(bb);
    free(breq);
    json_decref(bl);
    free(lreq);
    json_decref(bi);
    free(ireq);
    free(ids);
    json_decref(tk);
    free(treq);
    for (int t = 0; t < 3; t++)
        free(alone[t]);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* More inputs than slots: they go in waves, every one answered, in order. */
Test(server_oai, embeddings_more_inputs_than_slots)
{
    th_server s;
    start(&s, 2);
    json_t *single = post_ok(&s, "/v1/embeddings", "{\"input\":\"Lily and Ben\"}");
    int dim;
    float *want = vector_of(json_array_get(json_object_get(single, "data"), 0), &dim);
    json_t *b = post_ok(&s, "/v1/embeddings",
                        "{\"input\":[\"a\",\"b\",\"c\",\"Lily and Ben\",\"d\",\"e\",\"Lily and Ben\"]}");
    json_t *data = json_object_get(b, "data");
    cr_assert_eq(json_array_size(data), 7);
    for (size_t i = 0; i < 7; i++)
        cr_expect_eq(json_integer_value(json_object_get(json_array_get(data, i), "index")), (long long)i);
    for (size_t i = 3; i < 7; i += 3) {
        int d;
        float *v = vector_of(json_array_get(data, i), &d);
        cr_expect(max_diff(v, want, dim) <= 1e-6);
        free(v);
    }
    free(want);
    json_decref(b);
    json_decref(single);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_oai, bad_embeddings_fields)
{
    th_server s;
    start(&s, 2);
    expect_bad(&s, "/v1/embeddings", "{}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":[]}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":\"\"}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":5}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":[\"a\",5]}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":[1,2,99999]}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":[[1,2],[]]}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":[{}]}", "input");
    expect_bad(&s, "/v1/embeddings", "{\"input\":\"a\",\"encoding_format\":\"int8\"}", "encoding_format");
    expect_bad(&s, "/v1/embeddings", "{\"input\":\"a\",\"dimensions\":32}", "dimensions");
    expect_bad(&s, "/v1/embeddings", "{\"input\":\"a\",\"dimensions\":\"64\"}", "dimensions");
    /* Longer than a slot's context (256 positions). */
    char *longreq = malloc(300 * 2 + 64);
    strcpy(longreq, "{\"input\":[");
    for (int i = 0; i < 300; i++)
        strcat(longreq, i ? ",5" : "5");
    strcat(longreq, "]}");
    expect_bad(&s, "/v1/embeddings", longreq, "input");
    free(longreq);
    th_resp r = th_post(&s, "/v1/embeddings", "{\"input\":\"a\",\"model\":\"gpt-4o\"}");
    json_t *b = th_json(&r);
    th_expect_error(b, &r, 404);
    json_decref(b);
    th_resp_free(&r);
    json_t *ok =
        post_ok(&s, "/v1/embeddings", "{\"input\":\"a\",\"dimensions\":64,\"encoding_format\":\"float\"}");
    json_decref(ok);
    cr_expect_eq(th_stop(&s, NULL), 0);
}
