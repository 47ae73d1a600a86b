/* `woolly serve` end to end, one request at a time: every endpoint, whole and streamed responses in the
 * OpenAI shapes, greedy text identical to `woolly run`, chat templates, stop strings, limits, errors,
 * the API key. Each test starts its own server on a free loopback port with a tiny model. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "testutil.h"

#define STORIES "models/stories260K.gguf"

static char *stories(void)
{
    return strdup(tu_data(STORIES));
}

static json_t *choice0(json_t *body)
{
    json_t *c = json_array_get(json_object_get(body, "choices"), 0);
    cr_assert(json_is_object(c), "no choices[0] in the response");
    return c;
}

static long long usage_of(json_t *body, const char *field)
{
    json_t *u = json_object_get(body, "usage");
    cr_assert(json_is_object(u), "no usage object");
    return json_integer_value(json_object_get(u, field));
}

Test(server_api, greedy_completions_match_woolly_run)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 256", model);
    static const struct {
        const char *prompt;
        int n;
    } CASES[] = {
        {"Once upon a time", 1}, {"Once upon a time", 40}, {"The little dog", 24}, {"Lily and Ben", 60}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *want = th_woolly_run(model, CASES[i].prompt, CASES[i].n, NULL);
        char *req =
            th_fmt("{\"model\":\"stories260K\",\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0}",
                   CASES[i].prompt, CASES[i].n);
        th_resp r = th_post(&s, "/v1/completions", req);
        cr_assert_eq(r.status, 200, "%s", r.body);
        json_t *b = th_json(&r);
        cr_expect_str_eq(json_string_value(json_object_get(b, "object")), "text_completion");
        cr_expect_str_eq(json_string_value(json_object_get(b, "model")), "stories260K");
        cr_expect(!strncmp(json_string_value(json_object_get(b, "id")), "cmpl-", 5));
        cr_expect(json_is_integer(json_object_get(b, "created")));
        json_t *c = choice0(b);
        cr_expect_str_eq(json_string_value(json_object_get(c, "text")), want, "prompt '%s', %d tokens",
                         CASES[i].prompt, CASES[i].n);
        cr_expect_eq(json_integer_value(json_object_get(c, "index")), 0);
        cr_expect(json_is_null(json_object_get(c, "logprobs")));
        const long long n_out = usage_of(b, "completion_tokens");
        cr_expect_str_eq(json_string_value(json_object_get(c, "finish_reason")),
                         n_out == CASES[i].n ? "length" : "stop");
        cr_expect(n_out <= CASES[i].n);
        cr_expect_eq(usage_of(b, "total_tokens"), usage_of(b, "prompt_tokens") + n_out);
        json_decref(b);
        th_resp_free(&r);
        free(req);
        free(want);
    }
    /* The prompt as token ids: BOS + "Once upon a time" (the ids llama.cpp gives, see the test data). */
    th_resp r = th_post(&s, "/v1/completions",
                        "{\"prompt\":[1,403,407,261,378],\"max_tokens\":40,\"temperature\":0}");
    json_t *b = th_json(&r);
    char *want = th_woolly_run(model, "Once upon a time", 40, NULL);
    cr_expect_str_eq(json_string_value(json_object_get(choice0(b), "text")), want);
    cr_expect_eq(usage_of(b, "prompt_tokens"), 5);
    free(want);
    json_decref(b);
    th_resp_free(&r);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

/* The streamed text is the whole text, one event per token, in the chunk shapes; usage at the end when
 * asked for. */
Test(server_api, streaming_equals_the_whole_response)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 256", model);
    static const char *const PATHS[] = {"/v1/completions", "/v1/chat/completions"};
    static const char *const INPUTS[] = {"\"prompt\":\"Once upon a time\"",
                                         "\"messages\":[{\"role\":\"system\",\"content\":\"Tell a story.\"},"
                                         "{\"role\":\"user\",\"content\":\"A cat\"}]"};
    for (int k = 0; k < 2; k++) {
        const bool chat = k == 1;
        char *whole_req = th_fmt("{%s,\"max_tokens\":30,\"temperature\":0}", INPUTS[k]);
        th_resp w = th_post(&s, PATHS[k], whole_req);
        json_t *wb = th_json(&w);
        json_t *c = choice0(wb);
        const char *text = chat ? json_string_value(json_object_get(json_object_get(c, "message"), "content"))
                                : json_string_value(json_object_get(c, "text"));
        cr_assert(text != NULL, "%s", w.body);
        if (chat) {
            cr_expect_str_eq(json_string_value(json_object_get(wb, "object")), "chat.completion");
            cr_expect_str_eq(json_string_value(json_object_get(json_object_get(c, "message"), "role")),
                             "assistant");
        }

        for (int usage = 0; usage < 2; usage++) {
            char *req = th_fmt("{%s,\"max_tokens\":30,\"temperature\":0,\"stream\":true%s}", INPUTS[k],
                               usage ? ",\"stream_options\":{\"include_usage\":true}" : "");
            th_resp r = th_post(&s, PATHS[k], req);
            cr_assert_eq(r.status, 200);
            cr_expect(strstr(r.headers, "text/event-stream") != NULL, "%s", r.headers);
            bool done;
            json_t *ev = th_events(&r, &done);
            cr_expect(done, "the stream did not end with [DONE]");
            char *streamed = th_events_text(ev);
            cr_expect_str_eq(streamed, text, "%s streamed '%s', whole '%s'", PATHS[k], streamed, text);
            const size_t n = json_array_size(ev);
            const size_t n_usage = usage ? 1 : 0, n_open = chat ? 1 : 0;
            /* opening (chat), one per token, closing, usage */
            cr_expect_eq(n, n_open + (size_t)usage_of(wb, "completion_tokens") + 1 + n_usage,
                         "%zu events for %lld tokens", n, usage_of(wb, "completion_tokens"));
            for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(ev, i);
                cr_expect_str_eq(json_string_value(json_object_get(e, "object")),
                                 chat ? "chat.completion.chunk" : "text_completion");
                cr_expect_str_eq(json_string_value(json_object_get(e, "id")),
                                 json_string_value(json_object_get(json_array_get(ev, 0), "id")));
                if (usage && i + 1 < n)
                    cr_expect(json_is_null(json_object_get(e, "usage")), "event %zu lacks \"usage\": null",
                              i);
                json_t *ch = json_array_get(json_object_get(e, "choices"), 0);
                if (i + n_usage + 1 == n) { /* closing */
                    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")),
                                     json_string_value(json_object_get(c, "finish_reason")));
                } else if (ch) {
                    cr_expect(json_is_null(json_object_get(ch, "finish_reason")));
                }
            }
            if (chat) {
                json_t *d0 = json_object_get(
                    json_array_get(json_object_get(json_array_get(ev, 0), "choices"), 0), "delta");
                cr_expect_str_eq(json_string_value(json_object_get(d0, "role")), "assistant");
            }
            if (usage) {
                json_t *last = json_array_get(ev, n - 1);
                cr_expect_eq(json_array_size(json_object_get(last, "choices")), 0);
                cr_expect_eq(usage_of(last, "completion_tokens"), usage_of(wb, "completion_tokens"));
                cr_expect_eq(usage_of(last, "prompt_tokens"), usage_of(wb, "prompt_tokens"));
            }
            free(streamed);
            json_decref(ev);
            th_resp_free(&r);
            free(req);
        }
        json_decref(wb);
        th_resp_free(&w);
        free(whole_req);
    }
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

/* A random-weight model emits stray bytes and tokens with no text of their own: the stream still has
 * one chunk per token, every chunk valid UTF-8 (th_events parses each as JSON), and the same text as the
 * whole response with the same seed. */
Test(server_api, streaming_odd_bytes)
{
    char *path = strdup(tu_tmp_path("tiny.gguf"));
    char *args = th_fmt("synth --preset tiny -o %s", path);
    cr_assert_eq(tu_run_cli(args, NULL, NULL), 0);
    th_server s;
    th_start(&s, NULL, "-m %s", path);
    static const char BODY[] =
        "\"prompt\":\"x\",\"max_tokens\":60,\"temperature\":1.5,\"top_k\":0,\"top_p\":1,"
        "\"min_p\":0,\"seed\":5,\"ignore_eos\":true";
    char *whole = th_fmt("{%s}", BODY), *streamed = th_fmt("{%s,\"stream\":true}", BODY);
    th_resp w = th_post(&s, "/v1/completions", whole);
    json_t *wb = th_json(&w);
    th_resp r = th_post(&s, "/v1/completions", streamed);
    bool done;
    json_t *ev = th_events(&r, &done);
    char *text = th_events_text(ev);
    cr_expect_str_eq(text, json_string_value(json_object_get(choice0(wb), "text")));
    const size_t n = json_array_size(ev);
    cr_expect(n == 60 + 1 || n == 60 + 2, "%zu events for 60 tokens", n); /* + closing (+ released tail) */
    free(text);
    json_decref(ev);
    json_decref(wb);
    th_resp_free(&r);
    th_resp_free(&w);
    free(whole);
    free(streamed);
    cr_expect_eq(th_stop(&s, NULL), 0);
    remove(path);
    free(path);
    free(args);
}

/* A chat is rendered with the model's template: the reply equals the completion of the rendered text,
 * and the prompt's token count is the rendered text's. */
Test(server_api, chat_uses_the_models_template)
{
    char *path = strdup(tu_tmp_path("chatml.gguf"));
    char *args = th_fmt("synth --preset tiny --chat-template chatml -o %s", path);
    cr_assert_eq(tu_run_cli(args, NULL, NULL), 0);
    th_server s;
    th_start(&s, NULL, "-m %s --alias tiny-chat", path);
    th_resp r =
        th_post(&s, "/v1/chat/completions",
                "{\"model\":\"tiny-chat\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief\"},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},{\"type\":\"text\","
                "\"text\":\" there\"}]}],\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *chat = th_json(&r);
    static const char RENDERED[] = "<|im_start|>system\\nBe brief<|im_end|>\\n<|im_start|>user\\nHi there"
                                   "<|im_end|>\\n<|im_start|>assistant\\n";
    char *req =
        th_fmt("{\"prompt\":\"%s\",\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}", RENDERED);
    th_resp r2 = th_post(&s, "/v1/completions", req);
    json_t *comp = th_json(&r2);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(choice0(chat), "message"), "content")),
                     json_string_value(json_object_get(choice0(comp), "text")));
    cr_expect_eq(usage_of(chat, "prompt_tokens"), usage_of(comp, "prompt_tokens"));
    cr_expect_eq(usage_of(chat, "completion_tokens"), 12);
    free(req);
    req = th_fmt("{\"content\":\"%s\",\"add_special\":true}", RENDERED);
    th_resp t = th_post(&s, "/tokenize", req);
    json_t *tok = th_json(&t);
    cr_expect_eq((long long)json_array_size(json_object_get(tok, "tokens")), usage_of(chat, "prompt_tokens"));
    /* The control tokens are single tokens: the rendered prompt has far fewer tokens than bytes. */
    cr_expect_lt(usage_of(chat, "prompt_tokens"), 40);
    json_decref(tok);
    th_resp_free(&t);
    json_decref(comp);
    json_decref(chat);
    th_resp_free(&r2);
    th_resp_free(&r);
    free(req);
    free(args);
    cr_expect_eq(th_stop(&s, NULL), 0);
    remove(path);
    free(path);
}

Test(server_api, stop_strings_end_the_text_before_them)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 256", model);
    char *full = th_woolly_run(model, "Once upon a time", 40, NULL);
    const char *at = strstr(full, "named");
    cr_assert(at != NULL, "the greedy text changed: '%s'", full);
    for (int stream = 0; stream < 2; stream++) {
        char *req = th_fmt("{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,"
                           "\"stop\":[\"zebra\",\"named\"],\"stream\":%s}",
                           stream ? "true" : "false");
        th_resp r = th_post(&s, "/v1/completions", req);
        cr_assert_eq(r.status, 200);
        char *text;
        const char *finish;
        json_t *b;
        if (stream) {
            bool done;
            b = th_events(&r, &done);
            text = th_events_text(b);
            /* No event holds a part of the stop string: held back text is released only when clear. */
            for (size_t i = 0; i < json_array_size(b); i++) {
                const char *t = json_string_value(json_object_get(
                    json_array_get(json_object_get(json_array_get(b, i), "choices"), 0), "text"));
                cr_expect(!t || (!strstr(t, "nam") && !strstr(t, "amed")), "event %zu sent '%s'", i, t);
            }
            finish = json_string_value(json_object_get(
                json_array_get(json_object_get(json_array_get(b, json_array_size(b) - 1), "choices"), 0),
                "finish_reason"));
        } else {
            b = th_json(&r);
            text = strdup(json_string_value(json_object_get(choice0(b), "text")));
            finish = json_string_value(json_object_get(choice0(b), "finish_reason"));
        }
        cr_expect_eq(strlen(text), (size_t)(at - full), "'%s' is not '%.*s'", text, (int)(at - full), full);
        cr_expect(!strncmp(text, full, (size_t)(at - full)));
        cr_expect_str_eq(finish, "stop");
        free(text);
        json_decref(b);
        th_resp_free(&r);
        free(req);
    }
    free(full);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

/* Generation stops with "length" when the context is full, as `woolly run` does. */
Test(server_api, a_full_context_ends_with_length)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 32", model);
    char *want = th_woolly_run(model, "Once upon a time", 100, "-c 32 --ignore-eos");
    th_resp r = th_post(&s, "/v1/completions",
                        "{\"prompt\":\"Once upon a time\",\"temperature\":0,\"ignore_eos\":true}");
    json_t *b = th_json(&r);
    cr_expect_str_eq(json_string_value(json_object_get(choice0(b), "text")), want);
    cr_expect_str_eq(json_string_value(json_object_get(choice0(b), "finish_reason")), "length");
    cr_expect_eq(usage_of(b, "completion_tokens"), 32 - 5 + 1); /* the last one is sampled, not evaluated */
    json_decref(b);
    th_resp_free(&r);
    free(want);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

Test(server_api, seeded_sampling_is_reproducible)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 256", model);
    char *texts[3];
    static const char *const REQ[] = {
        "{\"prompt\":\"Once\",\"max_tokens\":30,\"temperature\":1.0,\"top_k\":0,\"top_p\":1,\"min_p\":0,"
        "\"seed\":42}",
        "{\"prompt\":\"Once\",\"max_tokens\":30,\"temperature\":1.0,\"top_k\":0,\"top_p\":1,\"min_p\":0,"
        "\"seed\":42}",
        "{\"prompt\":\"Once\",\"max_tokens\":30,\"temperature\":1.0,\"top_k\":0,\"top_p\":1,\"min_p\":0,"
        "\"seed\":43,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":0.5,\"repeat_penalty\":1.1}",
    };
    for (int i = 0; i < 3; i++) {
        th_resp r = th_post(&s, "/v1/completions", REQ[i]);
        cr_assert_eq(r.status, 200, "%s", r.body);
        json_t *b = th_json(&r);
        texts[i] = strdup(json_string_value(json_object_get(choice0(b), "text")));
        json_decref(b);
        th_resp_free(&r);
    }
    cr_expect_str_eq(texts[0], texts[1], "the same seed gave different text");
    cr_expect_str_neq(texts[0], texts[2], "another seed and penalties gave the same 30 tokens");
    for (int i = 0; i < 3; i++)
        free(texts[i]);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

/* The token texts of a completion's choice i (logprobs 1). */
static const json_t *choice_tokens(json_t *body, size_t i)
{
    const json_t *t = json_object_get(
        json_object_get(json_array_get(json_object_get(body, "choices"), i), "logprobs"), "tokens");
    cr_assert(json_is_array(t), "no logprobs.tokens in choice %zu", i);
    return t;
}

/* logit_bias steers every choice's tokens: +100 on " upon" (id 407: "Once upon a time" is BOS 403 407
 * 261 378) makes it every token; -100 on " a" (261), greedy's fourth token, changes only that one. */
Test(server_api, logit_bias_steers_the_sampled_tokens)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 128", model);
    const char *base = "\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"logprobs\":1";
    char *req = th_fmt("{%s,\"temperature\":0}", base);
    th_resp r = th_post(&s, "/v1/completions", req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *plain = th_json(&r);
    const json_t *want = choice_tokens(plain, 0);
    cr_assert_eq(json_array_size(want), 4);
    cr_assert_str_eq(json_string_value(json_array_get(want, 3)), " a", "the test's premise: %s", r.body);
    th_resp_free(&r);
    free(req);

    req = th_fmt("{%s,\"temperature\":0.8,\"seed\":5,\"n\":2,\"logit_bias\":{\"407\":100}}", base);
    r = th_post(&s, "/v1/completions", req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *b = th_json(&r);
    for (size_t c = 0; c < 2; c++)
        cr_expect_str_eq(
            json_string_value(json_object_get(json_array_get(json_object_get(b, "choices"), c), "text")),
            " upon upon upon upon", "choice %zu: %s", c, r.body);
    json_decref(b);
    th_resp_free(&r);
    free(req);

    req = th_fmt("{%s,\"temperature\":0,\"logit_bias\":{\"261\":-100}}", base);
    r = th_post(&s, "/v1/completions", req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    b = th_json(&r);
    const json_t *got = choice_tokens(b, 0);
    for (size_t i = 0; i < 3; i++)
        cr_expect_str_eq(json_string_value(json_array_get(got, i)),
                         json_string_value(json_array_get(want, i)), "token %zu: %s", i, r.body);
    cr_expect_str_neq(json_string_value(json_array_get(got, 3)), " a", "%s", r.body);
    json_decref(b);
    json_decref(plain);
    th_resp_free(&r);
    free(req);
    cr_expect_eq(th_stop(&s, NULL), 0);

    /* serve's --logit-bias is the default of requests that give none; one that gives any replaces it */
    th_start(&s, NULL, "-m %s -c 128 --logit-bias 407+100", model);
    static const struct {
        const char *bias, *text;
    } DEFAULTS[] = {{"", " upon upon upon upon"},
                    {",\"logit_bias\":{}", ", there was a"},
                    {",\"logit_bias\":{\"261\":100}", " a a a a"}};
    for (size_t i = 0; i < sizeof DEFAULTS / sizeof DEFAULTS[0]; i++) {
        req = th_fmt("{%s,\"temperature\":0%s}", base, DEFAULTS[i].bias);
        r = th_post(&s, "/v1/completions", req);
        cr_assert_eq(r.status, 200, "%s", r.body);
        b = th_json(&r);
        cr_expect_str_eq(json_string_value(json_object_get(choice0(b), "text")), DEFAULTS[i].text, "%s", req);
        json_decref(b);
        th_resp_free(&r);
        free(req);
    }
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

Test(server_api, models_health_tokenize_detokenize_metrics)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 256 --parallel 3", model);
    th_resp r = th_get(&s, "/v1/models");
    json_t *b = th_json(&r);
    cr_expect_str_eq(json_string_value(json_object_get(b, "object")), "list");
    json_t *m = json_array_get(json_object_get(b, "data"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(m, "id")), "stories260K");
    cr_expect_str_eq(json_string_value(json_object_get(m, "object")), "model");
    cr_expect(json_is_integer(json_object_get(m, "created")));
    cr_expect(json_is_string(json_object_get(m, "owned_by")));
    json_decref(b);
    th_resp_free(&r);
    r = th_get(&s, "/v1/models/stories260K");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    r = th_get(&s, "/v1/models/gpt-4");
    b = th_json(&r);
    th_expect_error(b, &r, 404);
    json_decref(b);
    th_resp_free(&r);

    r = th_get(&s, "/health");
    b = th_json(&r);
    cr_expect_str_eq(json_string_value(json_object_get(b, "status")), "ok");
    cr_expect_eq(json_integer_value(json_object_get(b, "slots_total")), 3);
    cr_expect_eq(json_integer_value(json_object_get(b, "slots_idle")), 3);
    json_decref(b);
    th_resp_free(&r);

    r = th_post(&s, "/tokenize", "{\"content\":\"Once upon a time\",\"add_special\":true}");
    cr_expect_str_eq(r.body, "{\"tokens\":[1,403,407,261,378]}");
    th_resp_free(&r);
    r = th_post(&s, "/tokenize", "{\"content\":\"Once upon a time\"}");
    cr_expect_str_eq(r.body, "{\"tokens\":[403,407,261,378]}");
    th_resp_free(&r);
    r = th_post(&s, "/detokenize", "{\"tokens\":[1,403,407,261,378]}");
    cr_expect_str_eq(r.body, "{\"content\":\"Once upon a time\"}");
    th_resp_free(&r);
    r = th_post(&s, "/detokenize", "{\"tokens\":[1,512]}");
    b = th_json(&r);
    cr_expect(strstr(th_expect_error(b, &r, 400), "512") != NULL);
    json_decref(b);
    th_resp_free(&r);

    r = th_post(&s, "/v1/completions",
                "{\"prompt\":\"Once upon a time\",\"max_tokens\":7,\"temperature\":0}");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    r = th_get(&s, "/metrics");
    cr_expect(strstr(r.headers, "text/plain") != NULL);
    cr_expect(strstr(r.body, "# TYPE woolly_requests_total counter") != NULL);
    th_resp_free(&r);
    cr_expect_eq(th_metric(&s, "woolly_requests_total{endpoint=\"completions\",status=\"200\"}"), 1);
    cr_expect_eq(th_metric(&s, "woolly_requests_total{endpoint=\"detokenize\",status=\"400\"}"), 1);
    cr_expect_eq(th_metric(&s, "woolly_requests_total{endpoint=\"models\",status=\"404\"}"), 1);
    cr_expect_eq(th_metric(&s, "woolly_prompt_tokens_total"), 5);
    cr_expect_eq(th_metric(&s, "woolly_completion_tokens_total"), 7);
    cr_expect_eq(th_metric(&s, "woolly_queue_depth"), 0);
    cr_expect_eq(th_metric(&s, "woolly_slots_total"), 3);
    cr_expect_eq(th_metric(&s, "woolly_slots_busy"), 0);
    cr_expect_gt(th_metric(&s, "woolly_generation_tokens_per_second"), 0);
    cr_expect_gt(th_metric(&s, "woolly_prompt_tokens_per_second"), 0);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

/* Each bad request gets the API's error shape, its status and a message naming what was wrong. */
Test(server_api, bad_requests_get_their_4xx)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -c 64 --max-body 4096 --max-tokens 50", model);
    static const struct {
        const char *method, *path, *body;
        long status;
        const char *in_message;
    } CASES[] = {
        {"POST", "/v1/completions", "{\"prompt\": \"a\",", 400, "JSON"},
        {"POST", "/v1/completions", "[1, 2]", 400, "object"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": \"ten\"}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 51}", 400, "50"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 99999999999999999999999}", 400,
         "integer"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 1e300}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 2.5}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"temperature\": 3}", 400, "temperature"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"temperature\": true}", 400, "temperature"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"top_p\": -0.5}", 400, "top_p"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"n\": 17}", 400, "'n'"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logprobs\": 21}", 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400,
         "stop"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"stop\": 5}", 400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"stream\": \"yes\"}", 400, "stream"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": [5]}", 400, "logit_bias"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"512\": 1}}", 400,
         "not a token id in [0, 512)"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"the\": 1}}", 400, "'the'"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"5\": -101}}", 400,
         "outside [-100, 100]"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"5\": \"-1\"}}", 400,
         "must be a number"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"5\": 1, \"005\": 2}}", 400,
         "twice"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\\u0000b\"}", 400, "JSON"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2, 99999]}", 400, "99999"},
        {"POST", "/v1/completions", "{\"prompt\": [\"a\", \"b\"]}", 400, "batch"},
        {"POST", "/v1/completions", "{\"prompt\": {}}", 400, "prompt"},
        {"POST", "/v1/completions", "{\"max_tokens\": 3}", 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\": \"a\", \"model\": \"gpt-4o\"}", 404, "gpt-4o"},
        {"POST", "/v1/chat/completions", "{\"messages\": []}", 400, "messages"},
        {"POST", "/v1/chat/completions", "{\"messages\": \"hi\"}", 400, "messages"},
        {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", 400,
         "wizard"},
        {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\"}]}", 400, "content"},
        {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": 7}]}", 400,
         "content"},
        {"POST", "/v1/chat/completions",
         "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", 400,
         "image_url"},
        {"POST", "/v1/chat/completions",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 0}", 400, "'n'"},
        {"POST", "/v1/chat/completions",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\"}]}",
         400, "tools"},
        {"GET", "/v1/chat/completions", NULL, 405, "POST"},
        {"POST", "/v1/models", "{}", 405, "GET"},
        {"GET", "/v2/everything", NULL, 404, "/v2/everything"},
        {"POST", "/tokenize", "{\"content\": 5}", 400, "content"},
        {"POST", "/detokenize", "{\"tokens\": \"1,2\"}", 400, "tokens"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        th_resp r = th_request(&s, CASES[i].method, CASES[i].path, CASES[i].body,
                               CASES[i].body ? strlen(CASES[i].body) : 0, NULL, 0);
        json_t *b = th_json(&r);
        const char *msg = th_expect_error(b, &r, CASES[i].status);
        cr_expect(strstr(msg, CASES[i].in_message) != NULL, "case %zu (%s): '%s' does not mention '%s'", i,
                  CASES[i].body, msg, CASES[i].in_message);
        json_decref(b);
        th_resp_free(&r);
    }

    /* Invalid UTF-8 in a string. */
    static const char BAD_UTF8[] = "{\"prompt\": \"a\xff\xfe b\"}";
    th_resp r = th_request(&s, "POST", "/v1/completions", BAD_UTF8, sizeof BAD_UTF8 - 1, NULL, 0);
    json_t *b = th_json(&r);
    cr_expect(strstr(th_expect_error(b, &r, 400), "JSON") != NULL);
    json_decref(b);
    th_resp_free(&r);

    /* A prompt longer than the context: 400 with both numbers. */
    static const char SENTENCE[] = "Once upon a time there was a little girl named Lily. She loved to play. ";
    char *longp = th_fmt("{\"prompt\": \"%s%s%s%s\"}", SENTENCE, SENTENCE, SENTENCE, SENTENCE);
    r = th_post(&s, "/v1/completions", longp);
    b = th_json(&r);
    const char *msg = th_expect_error(b, &r, 400);
    cr_expect(strstr(msg, "64") != NULL, "'%s' does not give the context size", msg);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(b, "error"), "code")),
                     "context_length_exceeded");
    json_decref(b);
    th_resp_free(&r);
    free(longp);

    /* A body over the limit: 413, whether its size is announced or not. */
    char *big = malloc(5000);
    memset(big, ' ', 5000);
    r = th_request(&s, "POST", "/v1/completions", big, 5000, NULL, 0);
    b = th_json(&r);
    cr_expect(strstr(th_expect_error(b, &r, 413), "4096") != NULL);
    json_decref(b);
    th_resp_free(&r);
    r = th_request(&s, "POST", "/v1/completions", big, 5000, "Transfer-Encoding: chunked", 0);
    b = th_json(&r);
    th_expect_error(b, &r, 413);
    json_decref(b);
    th_resp_free(&r);
    free(big);

    /* Headers past the limit are refused by the HTTP layer. */
    char *hdr = malloc(80000);
    memcpy(hdr, "X-Filler: ", 10);
    memset(hdr + 10, 'x', 80000 - 11);
    hdr[80000 - 1] = 0;
    r = th_request(&s, "GET", "/health", NULL, 0, hdr, 0);
    cr_expect(r.status == 431 || r.status == 413 || r.status == 0, "a 80 kB header got %ld", r.status);
    th_resp_free(&r);
    free(hdr);

    cr_expect(th_wait_idle(&s, 1000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

Test(server_api, the_api_key_guards_every_endpoint_but_health)
{
    char *model = stories();
    for (int from_env = 0; from_env < 2; from_env++) {
        th_server s;
        if (from_env)
            th_start(&s, "WOOLLY_API_KEY=s3cret-key", "-m %s -c 64", model);
        else
            th_start(&s, NULL, "-m %s -c 64 --api-key s3cret-key", model);
        static const char *const PATHS[] = {"/v1/models", "/metrics", "/v1/nothing"};
        for (size_t i = 0; i < 3; i++) {
            static const char *const BAD[] = {
                NULL, "Authorization: Bearer wrong", "Authorization: Bearer s3cret-ke",
                "Authorization: Bearer s3cret-key2", "Authorization: s3cret-key"};
            for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
                th_resp r = th_request(&s, "GET", PATHS[i], NULL, 0, BAD[k], 0);
                json_t *b = th_json(&r);
                th_expect_error(b, &r, 401);
                cr_expect_str_eq(json_string_value(json_object_get(json_object_get(b, "error"), "code")),
                                 "invalid_api_key");
                json_decref(b);
                th_resp_free(&r);
            }
        }
        th_resp r = th_request(&s, "GET", "/v1/models", NULL, 0, "Authorization: Bearer s3cret-key", 0);
        cr_expect_eq(r.status, 200, "%s", r.body);
        th_resp_free(&r);
        static const char REQ[] = "{\"prompt\":\"Once\",\"max_tokens\":3}";
        r = th_request(&s, "POST", "/v1/completions", REQ, strlen(REQ), NULL, 0);
        cr_expect_eq(r.status, 401);
        th_resp_free(&r);
        r = th_request(&s, "POST", "/v1/completions", REQ, strlen(REQ), "Authorization: Bearer s3cret-key",
                       0);
        cr_expect_eq(r.status, 200);
        th_resp_free(&r);
        r = th_get(&s, "/health");
        cr_expect_eq(r.status, 200);
        th_resp_free(&r);
        cr_expect_eq(th_stop(&s, NULL), 0);
    }
    free(model);
}
