/* `woolly serve --context-shift`: a request whose context fills up goes on, forgetting the oldest half of
 * what follows its kept tokens, and its greedy text is the one `woolly run --context-shift --keep N`
 * prints, alone or beside another request in the same batches (the shift's re-evaluation joins the
 * scheduler's steps rather than running on its own). Without the flag a full context ends the request
 * with finish_reason "length"; a bad n_keep is a 400 naming it. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "testutil.h"

/* A context of 40 positions: the 100 tokens asked for overflow it three times. */
enum { N_CTX = 40, N_GEN = 100 };

static const char *PROMPT = "Once upon a time";

static char *stories(void)
{
    return strdup(tu_data("models/stories260K.gguf"));
}

static char *completion_body(int n_keep)
{
    return th_fmt("{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true, "
                  "\"n_keep\": %d}",
                  PROMPT, N_GEN, n_keep);
}

/* choices[0] of a 200 response: its text (heap), finish_reason checked, completion tokens returned. */
static char *answer(const th_resp *r, const char *finish, long long *n_tokens)
{
    cr_assert_eq(r->status, 200, "status %ld: %.*s", r->status, (int)r->len, r->body);
    json_t *body = th_json(r);
    json_t *c = json_array_get(json_object_get(body, "choices"), 0);
    cr_assert(json_is_object(c), "no choices[0]");
    cr_expect_str_eq(json_string_value(json_object_get(c, "finish_reason")), finish);
    *n_tokens = json_integer_value(json_object_get(json_object_get(body, "usage"), "completion_tokens"));
    char *text = strdup(json_string_value(json_object_get(c, "text")));
    json_decref(body);
    return text;
}

typedef struct call {
    const th_server *s;
    th_resp resp;
    pthread_t thread;
} call;

static void *call_main(void *arg)
{
    call *c = arg;
    char *body = completion_body(2);
    c->resp = th_post(c->s, "/v1/completions", body);
    free(body);
    return NULL;
}

Test(server_shift, greedy_text_is_the_clis_alone_and_beside_another_request)
{
    char *model = stories();
    char *extra = th_fmt("-c %d -t 1 --ignore-eos --context-shift --keep 2", N_CTX);
    char *want = th_woolly_run(model, PROMPT, N_GEN, extra);
    th_server s;
    th_start(&s, NULL, "-m %s -np 2 -t 1 --temp 0 -c %d --max-tokens 1000 --context-shift", model, N_CTX);

    char *body = completion_body(2);
    th_resp r = th_post(&s, "/v1/completions", body);
    long long n = 0;
    char *got = answer(&r, "length", &n);
    cr_expect_eq(n, N_GEN, "the request stopped at %lld tokens", n);
    cr_expect_str_eq(got, want, "alone");
    free(got);
    th_resp_free(&r);

    call calls[2];
    for (int i = 0; i < 2; i++) {
        calls[i] = (call){.s = &s};
        cr_assert(pthread_create(&calls[i].thread, NULL, call_main, &calls[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(calls[i].thread, NULL);
        got = answer(&calls[i].resp, "length", &n);
        cr_expect_eq(n, N_GEN);
        cr_expect_str_eq(got, want, "request %d of two at once", i);
        free(got);
        th_resp_free(&calls[i].resp);
    }
    free(body);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(want);
    free(extra);
    free(model);
}

Test(server_shift, a_chat_with_a_system_message_goes_on_past_the_context)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 -t 1 --temp 0 -c %d --max-tokens 1000 --context-shift", model, N_CTX);
    char *body = th_fmt("{\"messages\": [{\"role\": \"system\", \"content\": \"Tell a story.\"}, "
                        "{\"role\": \"user\", \"content\": \"Once upon a time\"}], \"max_tokens\": %d, "
                        "\"temperature\": 0, \"ignore_eos\": true}",
                        N_GEN);
    th_resp r = th_post(&s, "/v1/chat/completions", body);
    cr_assert_eq(r.status, 200, "%.*s", (int)r.len, r.body);
    json_t *j = th_json(&r);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), N_GEN);
    json_decref(j);
    th_resp_free(&r);
    free(body);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

Test(server_shift, without_the_flag_a_full_context_ends_the_request)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 -t 1 --temp 0 -c %d --max-tokens 1000", model, N_CTX);
    char *body = completion_body(2);
    th_resp r = th_post(&s, "/v1/completions", body);
    long long n = 0;
    char *got = answer(&r, "length", &n);
    cr_expect_lt(n, N_CTX, "%lld tokens from a context of %d", n, N_CTX);
    cr_expect_gt(n, 0);
    free(got);
    th_resp_free(&r);
    free(body);
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}

Test(server_shift, a_bad_n_keep_is_named)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 -t 1 --temp 0 -c %d --max-tokens 1000 --context-shift", model, N_CTX);
    static const char *const BAD[] = {"-2", "\"all\"", "1.5"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char *body = th_fmt("{\"prompt\": \"%s\", \"max_tokens\": 4, \"n_keep\": %s}", PROMPT, BAD[i]);
        th_resp r = th_post(&s, "/v1/completions", body);
        json_t *j = th_json(&r);
        th_expect_error(j, &r, 400);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "n_keep",
                         "n_keep %s", BAD[i]);
        json_decref(j);
        th_resp_free(&r);
        free(body);
    }
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}
