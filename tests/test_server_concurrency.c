/* `woolly serve` with several requests at once: the text of a request is the same alone and beside
 * others, the slots take turns (a short request is not stuck behind a long one), a client that leaves
 * frees its slot at once (streaming, waiting, or queued), a full queue answers 503 with Retry-After, and
 * a conversation that goes on reuses its slot's cache, and a beginning another slot holds is copied from it.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_harness.h"
#include "testutil.h"

/* A tiny random-weight model (about 200 tokens/s on 2 cores): slow enough for requests to overlap. */
static char *tiny_model(void)
{
    char *path = strdup(tu_tmp_path("tiny.gguf"));
    char *args = th_fmt("synth --preset tiny -o %s", path);
    cr_assert_eq(tu_run_cli(args, NULL, NULL), 0);
    free(args);
    return path;
}

/* For the tests whose long request must outlast what the test does meanwhile, at any kernel speed: the
 * F16 test model (about 540 tokens/s at 2 threads on the project's machine, against 2700 for the tiny
 * synthetic one), run with a context that lets a request ask for 4000 tokens. Not to be removed. */
static char *slow_model(void)
{
    return strdup(tu_data("models/tiny-llama-f16.gguf"));
}

static char *text_of(const th_resp *r, bool stream)
{
    cr_assert_eq(r->status, 200, "%s", r->body);
    if (stream) {
        bool done;
        json_t *ev = th_events(r, &done);
        cr_assert(done);
        char *t = th_events_text(ev);
        json_decref(ev);
        return t;
    }
    json_t *b = th_json(r);
    json_t *c = json_array_get(json_object_get(b, "choices"), 0);
    json_t *msg = json_object_get(c, "message");
    char *t = strdup(json_string_value(msg ? json_object_get(msg, "content") : json_object_get(c, "text")));
    json_decref(b);
    return t;
}

typedef struct call {
    const th_server *s;
    const char *path, *body;
    th_resp resp;
    pthread_t thread;
} call;

static void *run_call(void *arg)
{
    call *c = arg;
    c->resp = th_post(c->s, c->path, c->body);
    return NULL;
}

/* Runs the requests one at a time, then all at once, and compares. How much the "all at once" requests
 * overlap depends on the model's speed (these test models finish a request in milliseconds); that
 * concurrent requests do share the engine's steps is concurrent_decode_steps_run_as_one_batch's check,
 * on a model slow enough at any kernel speed. */
static void alone_and_together(const th_server *s, const char *const *paths, const char *const *bodies, int n)
{
    char **alone = calloc((size_t)n, sizeof *alone);
    for (int i = 0; i < n; i++) {
        th_resp r = th_post(s, paths[i], bodies[i]);
        alone[i] = text_of(&r, strstr(bodies[i], "\"stream\":true") != NULL);
        th_resp_free(&r);
    }
    call *calls = calloc((size_t)n, sizeof *calls);
    for (int i = 0; i < n; i++) {
        calls[i] = (call){.s = s, .path = paths[i], .body = bodies[i]};
        cr_assert(pthread_create(&calls[i].thread, NULL, run_call, &calls[i]) == 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(calls[i].thread, NULL);
    for (int i = 0; i < n; i++) {
        char *together = text_of(&calls[i].resp, strstr(bodies[i], "\"stream\":true") != NULL);
        cr_expect_str_eq(together, alone[i], "request %d: '%s' beside others, '%s' alone", i, together,
                         alone[i]);
        free(together);
        free(alone[i]);
        th_resp_free(&calls[i].resp);
    }
    free(calls);
    free(alone);
}

Test(server_concurrency, greedy_text_is_the_same_alone_and_beside_others)
{
    /* stories260K: the text also equals woolly run's. */
    th_server s;
    th_start(&s, NULL, "-m %s -c 512 --parallel 4", tu_data("models/stories260K.gguf"));
    static const char *const PROMPTS[] = {"Once upon a time", "The little dog", "Lily and Ben", "One day"};
    const char *paths[8], *bodies[8];
    char *owned[8];
    for (int i = 0; i < 8; i++) {
        paths[i] = "/v1/completions";
        owned[i] = th_fmt("{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0%s}", PROMPTS[i % 4],
                          16 + 8 * i, i % 2 ? ",\"stream\":true" : "");
        bodies[i] = owned[i];
    }
    alone_and_together(&s, paths, bodies, 8);
    for (int i = 0; i < 4; i++) {
        char *want = th_woolly_run(tu_data("models/stories260K.gguf"), PROMPTS[i], 16 + 8 * i, "-c 512");
        th_resp r = th_post(&s, paths[i], bodies[i]);
        char *got = text_of(&r, i % 2);
        cr_expect_str_eq(got, want);
        free(got);
        free(want);
        th_resp_free(&r);
    }
    for (int i = 0; i < 8; i++)
        free(owned[i]);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);

    /* The tiny model: chat and completions, streaming and not, beside each other. */
    char *tiny = tiny_model();
    th_start(&s, NULL, "-m %s --parallel 3", tiny);
    for (int i = 0; i < 6; i++) {
        paths[i] = i % 3 ? "/v1/completions" : "/v1/chat/completions";
        owned[i] =
            i % 3
                ? th_fmt("{\"prompt\":\"word %d\",\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true%s}",
                         i, i % 2 ? ",\"stream\":true" : "")
                : th_fmt("{\"messages\":[{\"role\":\"user\",\"content\":\"hi %d\"}],\"max_tokens\":12,"
                         "\"temperature\":0,\"ignore_eos\":true%s}",
                         i, i % 2 ? ",\"stream\":true" : "");
        bodies[i] = owned[i];
    }
    alone_and_together(&s, paths, bodies, 6);
    for (int i = 0; i < 6; i++)
        free(owned[i]);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    remove(tiny);
    free(tiny);
}

/* The slots take turns: a short request beside a long one finishes while the long one still runs (one
 * slot after the other would finish the 4000 tokens first). */
Test(server_concurrency, slots_take_turns)
{
    char *tiny = slow_model();
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 2 -c 4096", tiny);
    th_bg *longer = th_bg_stream(&s, "/v1/completions",
                                 "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}");
    cr_assert(th_bg_wait_events(longer, 2, 60000));
    th_resp r = th_post(&s, "/v1/completions", "{\"prompt\":\"b\",\"max_tokens\":8,\"ignore_eos\":true}");
    cr_expect_eq(r.status, 200);
    const int seen = th_bg_events(longer);
    cr_expect_lt(seen, 4000, "the long request had sent %d events when the short one (8 tokens) finished",
                 seen);
    th_resp_free(&r);
    th_bg_close(longer);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(tiny);
}

/* Continuous batching: requests that generate at the same time share forward passes (one batch per
 * step holds every busy slot's next token). That their text is the same as alone is the first test's
 * check. The F16 test model is slow enough at any kernel speed for the requests to overlap. */
Test(server_concurrency, concurrent_decode_steps_run_as_one_batch)
{
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 4", tu_data("models/tiny-llama-f16.gguf"));
    enum { N = 4, TOKENS = 64 };
    const char *paths[N], *bodies[N];
    char *owned[N];
    call calls[N];
    for (int i = 0; i < N; i++) {
        paths[i] = "/v1/completions";
        owned[i] = th_fmt("{\"prompt\":\"word %d\",\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true}",
                          i, TOKENS);
        bodies[i] = owned[i];
        calls[i] = (call){.s = &s, .path = paths[i], .body = bodies[i]};
        cr_assert(pthread_create(&calls[i].thread, NULL, run_call, &calls[i]) == 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(calls[i].thread, NULL);
        cr_expect_eq(calls[i].resp.status, 200, "%s", calls[i].resp.body);
        th_resp_free(&calls[i].resp);
    }
    const double tokens = th_metric(&s, "woolly_completion_tokens_total");
    const double steps = th_metric(&s, "woolly_generation_steps_total");
    cr_expect_eq(tokens, N * TOKENS);
    /* One slot after the other would take N * TOKENS steps; together about TOKENS. */
    cr_expect_leq(steps, N * TOKENS / 2, "%g generated tokens took %g forward passes", tokens, steps);
    for (int i = 0; i < N; i++)
        free(owned[i]);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* A long prompt joins in chunks: while it is evaluated, a request that is generating keeps getting a
 * token per step (one forward pass for the whole prompt would give it one). The generating request
 * outlasts the prompt whatever the kernels' speed: 4000 tokens of the F16 test model. The steps are
 * counted by the server (before it tells a step's requests), not by the streaming client, whose
 * reading of its events lags on a busy machine. Steps also run while the request travels and is
 * tokenized; the prompt is long enough (about 24 chunks) that those cannot make up the count. */
Test(server_concurrency, a_long_prompt_joins_in_chunks_without_stalling_decoding)
{
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 2 -c 4096", tu_data("models/tiny-llama-f16.gguf"));
    th_bg *longer = th_bg_stream(
        &s, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}");
    cr_assert(th_bg_wait_events(longer, 2, 60000));
    char prompt[8000] = "";
    for (int i = 0; i < 1500; i++)
        strcat(prompt, " word");
    char *body = th_fmt("{\"prompt\":\"%s\",\"max_tokens\":1,\"ignore_eos\":true}", prompt);
    const double before = th_metric(&s, "woolly_generation_steps_total");
    th_resp r = th_post(&s, "/v1/completions", body);
    const int during = (int)(th_metric(&s, "woolly_generation_steps_total") - before);
    cr_expect_eq(r.status, 200, "%s", r.body);
    json_t *b = th_json(&r);
    const long long n_prompt =
        json_integer_value(json_object_get(json_object_get(b, "usage"), "prompt_tokens"));
    json_decref(b);
    cr_assert_geq(n_prompt, 20 * 64, "the prompt has %lld tokens", n_prompt);
    cr_expect_geq(during, (int)(n_prompt / 64),
                  "the generating request got %d steps while a %lld-token prompt was evaluated", during,
                  n_prompt);
    th_resp_free(&r);
    free(body);
    th_bg_close(longer);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_concurrency, a_client_that_leaves_frees_its_slot)
{
    char *tiny = slow_model();
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 1 -c 4096", tiny);
    static const char LONG_STREAM[] =
        "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}";
    static const char LONG_WHOLE[] = "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true}";

    /* Streaming: the client closes the connection after 3 events. */
    cr_expect_eq(th_stream_abort(&s, "/v1/completions", LONG_STREAM, 3), 3);
    cr_expect(th_wait_idle(&s, 5000), "the slot is still busy 5 s after its client left");
    cr_expect_eq(th_metric(&s, "woolly_requests_cancelled_total"), 1);
    double out = th_metric(&s, "woolly_completion_tokens_total");
    cr_expect_lt(out, 4000, "the cancelled request generated %g of its 4000 tokens", out);

    /* Waiting for a whole response: the client gives up after 300 ms. */
    th_resp r = th_request(&s, "POST", "/v1/completions", LONG_WHOLE, strlen(LONG_WHOLE), NULL, 300);
    cr_expect_eq(r.status, 0);
    th_resp_free(&r);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_metric(&s, "woolly_requests_cancelled_total"), 2);
    out = th_metric(&s, "woolly_completion_tokens_total");
    cr_expect_lt(out, 8000, "%g tokens generated for two cancelled requests of 4000", out);

    /* Queued: a request waiting for the busy slot leaves the queue when its client goes. */
    th_bg *running = th_bg_stream(&s, "/v1/completions", LONG_STREAM);
    cr_assert(th_bg_wait_events(running, 1, 60000));
    th_bg *queued = th_bg_stream(&s, "/v1/completions", LONG_STREAM);
    bool in_queue = false;
    for (int i = 0; i < 500 && !in_queue; i++) {
        usleep(10000);
        in_queue = th_metric(&s, "woolly_queue_depth") == 1;
    }
    cr_expect(in_queue, "the second request never waited in the queue");
    th_bg_close(queued);
    bool left = false;
    for (int i = 0; i < 500 && !left; i++) {
        usleep(10000);
        left = th_metric(&s, "woolly_queue_depth") == 0;
    }
    cr_expect(left, "the queued request is still queued after its client left");
    cr_expect_eq(th_metric(&s, "woolly_slots_busy"), 1, "the running request should be unaffected");
    th_bg_close(running);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_metric(&s, "woolly_requests_cancelled_total"), 4);

    /* The slot serves the next request normally. */
    r = th_post(&s, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":5,\"ignore_eos\":true}");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(tiny);
}

Test(server_concurrency, a_full_queue_answers_503_with_retry_after)
{
    char *tiny = slow_model();
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 1 --queue 1 -c 4096", tiny);
    static const char LONG_STREAM[] =
        "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}";
    th_bg *running = th_bg_stream(&s, "/v1/completions", LONG_STREAM);
    cr_assert(th_bg_wait_events(running, 1, 60000));
    th_bg *queued = th_bg_stream(&s, "/v1/completions", LONG_STREAM);
    bool in_queue = false;
    for (int i = 0; i < 500 && !in_queue; i++) {
        usleep(10000);
        in_queue = th_metric(&s, "woolly_queue_depth") == 1;
    }
    cr_assert(in_queue);
    for (int stream = 0; stream < 2; stream++) {
        th_resp r =
            th_post(&s, "/v1/completions",
                    stream ? "{\"prompt\":\"b\",\"stream\":true}" : "{\"prompt\":\"b\",\"max_tokens\":3}");
        json_t *b = th_json(&r);
        th_expect_error(b, &r, 503);
        cr_expect(strstr(r.headers, "Retry-After: ") != NULL, "no Retry-After in %s", r.headers);
        json_decref(b);
        th_resp_free(&r);
    }
    cr_expect_eq(th_metric(&s, "woolly_requests_total{endpoint=\"completions\",status=\"503\"}"), 2);
    th_bg_close(queued);
    th_bg_close(running);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(tiny);
}

/* A request that continues an earlier one evaluates only what is new, with the same text as a fresh
 * evaluation; an unrelated request in between does not evict the conversation. */
Test(server_concurrency, prompt_caching_reuses_a_conversation)
{
    const char *model = tu_data("models/stories260K.gguf");
    char *model_path = strdup(model);
    th_server s;
    th_start(&s, NULL, "-m %s -c 512 --parallel 2", model_path);
    th_resp r = th_post(&s, "/v1/completions",
                        "{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"temperature\":0}");
    char *t1 = text_of(&r, false);
    th_resp_free(&r);
    r = th_post(&s, "/v1/completions", "{\"prompt\":\"The cat sat\",\"max_tokens\":10,\"temperature\":0}");
    json_t *cat = th_json(&r);
    /* It shares BOS with the story: the one token copied from the story's slot into the empty one. */
    const long long cat_cached = json_integer_value(json_object_get(
        json_object_get(json_object_get(cat, "usage"), "prompt_tokens_details"), "cached_tokens"));
    cr_expect_eq(cat_cached, 1);
    json_decref(cat);
    th_resp_free(&r);

    char *prompt2 = th_fmt("Once upon a time%s She", t1);
    char *req = th_fmt("{\"prompt\":\"%s\",\"max_tokens\":30,\"temperature\":0}", prompt2);
    r = th_post(&s, "/v1/completions", req);
    json_t *b = th_json(&r);
    json_t *usage = json_object_get(b, "usage");
    const long long cached =
        json_integer_value(json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
    const long long prompt_tokens = json_integer_value(json_object_get(usage, "prompt_tokens"));
    cr_expect_geq(cached, 5 + 20, "only %lld of %lld prompt tokens came from the cache", cached,
                  prompt_tokens);
    cr_expect_lt(cached, prompt_tokens);
    char *want = th_woolly_run(model_path, prompt2, 30, "-c 512");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(b, "choices"), 0), "text")), want);
    /* "The cat sat" took the empty slot: sharing only BOS is no reason to evict the story. */
    cr_expect_eq(th_metric(&s, "woolly_prompt_tokens_cached_total"), (double)(cat_cached + cached),
                 "the metric disagrees with the usage");
    json_decref(b);
    th_resp_free(&r);
    free(want);
    free(req);
    free(prompt2);
    free(t1);
    cr_expect_eq(th_stop(&s, NULL), 0);

    /* A chat that goes on, on the chat template of a synthetic model. */
    char *chat = strdup(tu_tmp_path("chatml.gguf"));
    char *args = th_fmt("synth --preset tiny --chat-template chatml -o %s", chat);
    cr_assert_eq(tu_run_cli(args, NULL, NULL), 0);
    th_start(&s, NULL, "-m %s --parallel 2", chat);
    r = th_post(&s, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                "\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true}");
    char *reply = text_of(&r, false);
    th_resp_free(&r);
    json_t *turn2 =
        json_pack("{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s}], s:i, s:f, s:b}", "messages", "role", "user", "content",
                  "Hello", "role", "assistant", "content", reply, "role", "user", "content", "And then?",
                  "max_tokens", 8, "temperature", 0.0, "ignore_eos", 1);
    char *body = json_dumps(turn2, JSON_COMPACT);
    r = th_post(&s, "/v1/chat/completions", body);
    b = th_json(&r);
    usage = json_object_get(b, "usage");
    const long long cached2 =
        json_integer_value(json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
    cr_expect_geq(cached2, 8, "the second turn reused %lld tokens", cached2);
    json_decref(b);
    th_resp_free(&r);
    free(body);
    json_decref(turn2);
    free(reply);
    cr_expect_eq(th_stop(&s, NULL), 0);
    remove(chat);
    free(chat);
    free(args);
    free(model_path);
}

/* A request whose prompt begins as another slot's did (a shared system prompt) copies that beginning's
 * keys and values from it, while that slot is still busy, and answers as a cold evaluation does. The
 * busy request must outlast the second at any kernel speed: 4000 tokens of the F16 test model. */
Test(server_concurrency, a_shared_beginning_is_copied_from_a_busy_slot)
{
    const char *model = tu_data("models/tiny-llama-f16.gguf");
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 2 -c 4096", model);
    /* 16 tokens in common (BOS included) with this model's tokenizer, then 4 and 3 of their own */
    const char *shared = "Once upon a time, in a small village by the sea, there lived";
    char *long_body =
        th_fmt("{\"prompt\":\"%s an old fisherman\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}",
               shared);
    th_bg *running = th_bg_stream(&s, "/v1/completions", long_body);
    cr_assert(th_bg_wait_events(running, 1, 60000)); /* its prompt is in its slot's cache */
    char *prompt = th_fmt("%s a young girl", shared);
    char *body = th_fmt("{\"prompt\":\"%s\",\"max_tokens\":16,\"temperature\":0}", prompt);
    th_resp r = th_post(&s, "/v1/completions", body);
    json_t *b = th_json(&r);
    json_t *usage = json_object_get(b, "usage");
    const long long cached =
        json_integer_value(json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
    cr_expect_eq(cached, 16, "%lld prompt tokens came from the other slot, not the 16 in common", cached);
    cr_expect_eq(json_integer_value(json_object_get(usage, "prompt_tokens")), 19);
    cr_expect_eq(th_metric(&s, "woolly_slots_busy"), 1, "the first request was no longer running");
    char *want = th_woolly_run(model, prompt, 16, "-c 4096");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(b, "choices"), 0), "text")), want);
    json_decref(b);
    th_resp_free(&r);
    th_bg_close(running);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(want);
    free(body);
    free(prompt);
    free(long_body);
}

/* A stream waiting in the queue longer than the idle timeout is kept open by comments, and completes. The
 * stream ahead of it must outlast the wait whatever the kernels' speed: 4000 tokens of the F16 test model
 * (about 8 s here), cut after the wait. */
Test(server_concurrency, a_waiting_stream_outlives_the_idle_timeout)
{
    th_server s;
    th_start(&s, NULL, "-m %s --parallel 1 --timeout 1 -c 4096", tu_data("models/tiny-llama-f16.gguf"));
    th_bg *running = th_bg_stream(
        &s, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":4000,\"ignore_eos\":true,\"stream\":true}");
    cr_assert(th_bg_wait_events(running, 1, 60000));
    call waiting = {.s = &s,
                    .path = "/v1/completions",
                    /* greedy: a sampled token may end inside a UTF-8 sequence, whose bytes then come as a
                     * chunk of their own at the end, and the count below would vary from run to run */
                    .body = "{\"prompt\":\"b\",\"max_tokens\":4,\"ignore_eos\":true,\"stream\":true,"
                            "\"temperature\":0}"};
    cr_assert(pthread_create(&waiting.thread, NULL, run_call, &waiting) == 0);
    usleep(2500000); /* two and a half idle timeouts in the queue */
    th_bg_close(running);
    pthread_join(waiting.thread, NULL);
    cr_expect_eq(waiting.resp.status, 200);
    cr_expect(strstr(waiting.resp.body, ": keep-alive\n\n") != NULL, "no keep-alive comment in %s",
              waiting.resp.body);
    bool done;
    json_t *ev = th_events(&waiting.resp, &done);
    cr_expect(done, "the waiting stream was cut: %s", waiting.resp.body);
    cr_expect_eq(json_array_size(ev), 4 + 1, "%s", waiting.resp.body);
    json_decref(ev);
    th_resp_free(&waiting.resp);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}
