/* Structured output end to end. tests/server/structured_output.mjs drives `woolly serve` (stories260K, a
 * tiny model that never writes JSON by itself) through the official OpenAI client with JSON schemas,
 * json_object, n > 1 choices with logprobs, GBNF grammars and bad ones, and validates every output with
 * ajv; its cases run concurrently, one per slot. Needs node and tests/server's packages (npm ci).
 * And a context shift (--context-shift) in the middle of a constrained output leaves the grammar's state
 * alone: the grammar is over the generated text, not the context. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "testutil.h"

#define SLOTS 4

Test(server_structured, every_output_validates_against_its_schema)
{
    th_node_checks("structured_output.mjs", "ajv", "structured-key", SLOTS, "");
}

/* choices[0] of a 200 completion: its text (heap), finish_reason "stop"; its completion tokens. */
static char *stopped_text(const th_resp *r, long long *n_tokens)
{
    cr_assert_eq(r->status, 200, "status %ld: %.*s", r->status, (int)r->len, r->body);
    json_t *body = th_json(r);
    json_t *c = json_array_get(json_object_get(body, "choices"), 0);
    cr_assert(json_is_object(c), "no choices[0]");
    cr_expect_str_eq(json_string_value(json_object_get(c, "finish_reason")), "stop");
    *n_tokens = json_integer_value(json_object_get(json_object_get(body, "usage"), "completion_tokens"));
    char *text = strdup(json_string_value(json_object_get(c, "text")));
    json_decref(body);
    return text;
}

/* A context of 32 positions and outputs of more than 100 tokens: several shifts in each. */
Test(server_structured, a_context_shift_keeps_the_grammar_state)
{
    th_server s;
    th_start(&s, NULL, "-m %s -c 32 -t 1 --parallel 1 --context-shift --max-tokens 1000",
             tu_data("models/stories260K.gguf"));

    /* One text only: whatever the model prefers, the grammar spells it out to the end. */
    static const char gbnf[] = "root ::= (\\\"a b c d e f g h \\\"){12} \\\"end.\\\"";
    char want[256] = "";
    for (int i = 0; i < 12; i++)
        strcat(want, "a b c d e f g h ");
    strcat(want, "end.");
    char *body =
        th_fmt("{\"prompt\": \"Once upon a time\", \"max_tokens\": 1000, \"temperature\": 1, \"seed\": 3, "
               "\"grammar\": \"%s\"}",
               gbnf);
    th_resp r = th_post(&s, "/v1/completions", body);
    long long n = 0;
    char *text = stopped_text(&r, &n);
    cr_expect_gt(n, 32, "only %lld tokens: no shift happened", n);
    cr_expect_str_eq(text, want);
    free(text);
    free(body);
    th_resp_free(&r);

    /* A schema: exactly 30 items, each the string "ab". */
    body = th_fmt(
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 1000, \"temperature\": 1, \"seed\": 4, "
        "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"a\", \"schema\": "
        "{\"type\": \"array\", \"items\": {\"const\": \"ab\"}, \"minItems\": 30, \"maxItems\": 30}}}}");
    r = th_post(&s, "/v1/completions", body);
    text = stopped_text(&r, &n);
    cr_expect_gt(n, 32, "only %lld tokens: no shift happened", n);
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    cr_assert(json_is_array(v), "not a JSON array (%s): %s", e.text, text);
    cr_expect_eq(json_array_size(v), 30, "%s", text);
    for (size_t i = 0; i < json_array_size(v); i++)
        cr_expect_str_eq(json_string_value(json_array_get(v, i)), "ab", "%s", text);
    json_decref(v);
    free(text);
    free(body);
    th_resp_free(&r);

    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* What a client's grammar may cost (runtime/grammar): groups nested 100,000 deep (once a stack overflow
 * that killed the server) are a 400 naming the bound, and a grammar too ambiguous to follow (the ways
 * to parse a run of letters grow exponentially) ends its request with an error that says so, not a hang
 * nor a "stop" with the text cut where it gave up. The server answers a plain request afterwards. */
Test(server_structured, a_grammar_past_its_bounds_is_an_error)
{
    th_server s;
    th_start(&s, NULL, "-m %s -t 1 --parallel 1", tu_data("models/stories260K.gguf"));
    enum { DEEP = 100000 };
    char *gbnf = malloc(DEEP + 64);
    cr_assert(gbnf);
    strcpy(gbnf, "root ::= ");
    memset(gbnf + strlen(gbnf), '(', DEEP);
    strcpy(gbnf + strlen("root ::= ") + DEEP, "\\\"a\\\"");
    char *body = th_fmt("{\"prompt\": \"Once\", \"max_tokens\": 4, \"grammar\": \"%s\"}", gbnf);
    th_resp r = th_post(&s, "/v1/completions", body);
    json_t *j = th_json(&r);
    const char *msg = th_expect_error(j, &r, 400);
    cr_expect(strstr(msg, "groups nested more than 256 deep"), "%s", msg);
    json_decref(j);
    th_resp_free(&r);
    free(body);
    free(gbnf);

    /* the end of text (id 2) made unlikely, so that the letters go on until the matcher gives up */
    body = th_fmt("{\"prompt\": \"Once\", \"max_tokens\": 50, \"seed\": 1, \"logit_bias\": {\"2\": -100}, "
                  "\"grammar\": \"root ::= [a-z] root{,24}\"}");
    r = th_post(&s, "/v1/completions", body);
    j = th_json(&r);
    msg = th_expect_error(j, &r, 500);
    cr_expect(strstr(msg, "ways to go on"), "%s", msg);
    json_decref(j);
    th_resp_free(&r);
    free(body);

    r = th_post(&s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 4}");
    cr_expect_eq(r.status, 200, "%.*s", (int)r.len, r.body);
    th_resp_free(&r);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}
