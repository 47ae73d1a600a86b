/* The limits a request cannot get around: --max-tokens for every request (without max_tokens, or with
 * null), the integer check at 2^63 (no out-of-range conversion), the cost of parsing a body of many
 * small JSON values (bounded; 32 worst bodies at once stay under 256 MB), requests of ambiguous length
 * (400 and closed: no smuggled second request), an empty body, an empty API key refused at start, and
 * a FIFO given as the model refused at once instead of blocking, and a model whose logits break down (a NaN
 * in its weights) answering with an error rather than text. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raw_http.h"
#include "server_harness.h"
#include "testutil.h"

static const char *stories(void)
{
    return tu_data("models/stories260K.gguf");
}

static long long completion_tokens(const th_resp *r)
{
    json_t *b = th_json(r);
    const long long n = json_integer_value(json_object_get(json_object_get(b, "usage"), "completion_tokens"));
    json_decref(b);
    return n;
}

Test(server_limits, max_tokens_caps_every_request)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 --max-tokens 16", stories());
    static const char *const BODIES[] = {
        "{\"prompt\": \"Once\", \"ignore_eos\": true}",
        "{\"prompt\": \"Once\", \"ignore_eos\": true, \"max_tokens\": null}",
        "{\"prompt\": \"Once\", \"ignore_eos\": true, \"max_completion_tokens\": null}",
        "{\"prompt\": \"Once\", \"ignore_eos\": true, \"max_tokens\": 16}",
    };
    for (size_t i = 0; i < sizeof BODIES / sizeof BODIES[0]; i++) {
        th_resp r = th_post(&s, "/v1/completions", BODIES[i]);
        cr_expect_eq(r.status, 200, "%s: %s", BODIES[i], r.body);
        cr_expect_eq(completion_tokens(&r), 16, "%s", BODIES[i]);
        th_resp_free(&r);
    }
    th_resp r = th_post(&s, "/v1/chat/completions",
                        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"ignore_eos\": true}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    cr_expect_eq(completion_tokens(&r), 16);
    th_resp_free(&r);
    r = th_post(&s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 17}");
    json_t *b = th_json(&r);
    cr_expect(strstr(th_expect_error(b, &r, 400), "limit of 16") != NULL);
    json_decref(b);
    th_resp_free(&r);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_limits, integers_from_2_pow_63_on_are_out_of_range)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1", stories());
    static const struct {
        const char *field, *value;
        long status;
    } CASES[] = {
        {"max_tokens", "9223372036854775808.0", 400},  {"max_tokens", "1e300", 400},
        {"max_tokens", "18446744073709551616.0", 400}, {"seed", "9223372036854775808.0", 400},
        {"seed", "-9223372036854777856.0", 400},       {"seed", "-9.3e18", 400},
        {"seed", "-9223372036854775808.0", 200},       {"seed", "9223372036854774784.0", 200},
        {"top_k", "9223372036854775808.0", 400},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *body = th_fmt("{\"prompt\": \"Once\", \"max_tokens\": 2, \"%s\": %s}", CASES[i].field,
                            CASES[i].value);
        if (!strcmp(CASES[i].field, "max_tokens")) {
            free(body);
            body = th_fmt("{\"prompt\": \"Once\", \"max_tokens\": %s}", CASES[i].value);
        }
        th_resp r = th_post(&s, "/v1/completions", body);
        json_t *b = th_json(&r);
        if (CASES[i].status == 200) {
            cr_expect_eq(r.status, 200, "%s: %s", body, r.body);
        } else {
            th_expect_error(b, &r, 400);
            cr_expect_str_eq(json_string_value(json_object_get(json_object_get(b, "error"), "param")),
                             CASES[i].field, "%s", body);
        }
        json_decref(b);
        th_resp_free(&r);
        free(body);
    }
    char *err = NULL;
    cr_expect_eq(th_stop(&s, &err), 0);
    cr_expect(strstr(err, "runtime error") == NULL, "undefined behaviour: %s", err);
    free(err);
}

Test(server_limits, an_empty_body_says_so)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1", stories());
    static const char *const PATHS[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"};
    for (size_t i = 0; i < 4; i++) {
        th_resp r = th_request(&s, "POST", PATHS[i], "", 0, NULL, 0);
        json_t *b = th_json(&r);
        const char *msg = th_expect_error(b, &r, 400);
        cr_expect(strstr(msg, "body is empty") != NULL, "%s: %s", PATHS[i], msg);
        cr_expect(strstr(msg, "line -1") == NULL, "%s", msg);
        json_decref(b);
        th_resp_free(&r);
    }
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* A second request hidden behind an ambiguous length: answered with 400, the connection closed, and
 * the hidden request never answered. */
Test(server_limits, ambiguous_lengths_get_400_and_close)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1", stories());
    static const char *const HEADS[] = {
        "Content-Length: 16\r\nContent-Length: 60\r\n",
        "Content-Length: 16\r\nContent-Length: 16\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 16\r\n",
        "Content-Length: 16\r\nTransfer-Encoding: chunked\r\n",
    };
    for (size_t i = 0; i < sizeof HEADS / sizeof HEADS[0]; i++) {
        const int fd = rh_connect(s.port, NULL);
        cr_assert(fd >= 0);
        char *req = th_fmt("POST /tokenize HTTP/1.1\r\nHost: x\r\n%s\r\n{\"content\":\"a\"}"
                           "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                           HEADS[i]);
        cr_assert(rh_send(fd, req, strlen(req)));
        bool closed;
        char *got = rh_read_all(fd, 5000, &closed);
        cr_expect_eq(rh_status(got), 400, "%s: %s", HEADS[i], got);
        cr_expect(strstr(got, "ambiguous") != NULL, "%s", got);
        cr_expect(strstr(got, "slots_total") == NULL, "the hidden request was answered: %s", got);
        cr_expect(strstr(got + 1, "HTTP/1.1") == NULL, "two responses: %s", got);
        cr_expect(closed, "the connection stayed open after %s", HEADS[i]);
        free(got);
        free(req);
        close(fd);
    }
    th_resp r = th_get(&s, "/health");
    cr_expect_eq(r.status, 200, "the server is still up");
    th_resp_free(&r);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_limits, an_empty_api_key_is_refused)
{
    char *args = th_fmt("serve -m %s --port 0 --api-key ''", stories());
    char *err = NULL;
    cr_expect_eq(tu_run_cli(args, NULL, &err), 2);
    cr_expect(strstr(err, "--api-key is empty") != NULL, "%s", err);
    free(err);
    free(args);
    char *cmd = th_fmt("WOOLLY_API_KEY= %s serve -m %s --port 0", WOOLLY_CLI, stories());
    cr_expect_eq(tu_run_shell(cmd, NULL, &err), 2);
    cr_expect(strstr(err, "WOOLLY_API_KEY is empty") != NULL, "%s", err);
    free(err);
    free(cmd);
}

/* A default logit bias the model's vocabulary cannot take stops the server before it serves, with the
 * token named (not a 500 in every request); a malformed one is a usage error. */
Test(server_limits, a_default_logit_bias_outside_the_vocabulary_is_refused_at_start)
{
    char *args = th_fmt("serve -m %s --port 0 --logit-bias 999+1", stories());
    char *err = NULL;
    cr_expect_eq(tu_run_cli(args, NULL, &err), 1);
    cr_expect(strstr(err,
                     "woolly serve: the default sampling parameters: logit bias: token id 999 is outside "
                     "[0, 512)") != NULL,
              "%s", err);
    free(err);
    free(args);
    args = th_fmt("serve -m %s --port 0 --logit-bias 7=1", stories());
    cr_expect_eq(tu_run_cli(args, NULL, &err), 2);
    cr_expect(strstr(err, "--logit-bias '7=1'") != NULL, "%s", err);
    free(err);
    free(args);
}

Test(server_limits, a_fifo_as_the_model_is_refused_at_once)
{
    const char *fifo = tu_tmp_path("model.fifo");
    remove(fifo);
    cr_assert(mkfifo(fifo, 0600) == 0);
    /* `timeout` ends it if it blocks (status 124): the regression */
    char *cmd = th_fmt("timeout 20 %s run -m %s -p hi -n 1", WOOLLY_CLI, fifo);
    char *err = NULL;
    const int st = tu_run_shell(cmd, NULL, &err);
    cr_expect(st != 0 && st != 124, "status %d", st);
    cr_expect(strstr(err, "not a regular file") != NULL, "%s", err);
    free(err);
    free(cmd);
    remove(fifo);
}

/* ---- the cost of parsing ---- */

enum { MIB = 1 << 20, CONCURRENT = 32 };

/* Bodies of one MiB whose JSON trees would be many times larger than their text. */
static char *worst_body(int shape)
{
    static const char *const UNIT[] = {"[],", "{},", "0,", "\"\",", "[[]],"};
    char *b = malloc(MIB + 1);
    cr_assert(b != NULL);
    size_t n = 0;
    if (shape == 5) { /* a prompt of token ids, as long as the body allows */
        n = (size_t)snprintf(b, MIB, "{\"prompt\": [");
        while (n + 8 < MIB)
            n += (size_t)snprintf(b + n, MIB - n, "1,");
    } else {
        n = (size_t)snprintf(b, MIB, "{\"prompt\": [");
        const size_t u = strlen(UNIT[shape]);
        while (n + u + 4 < MIB) {
            memcpy(b + n, UNIT[shape], u);
            n += u;
        }
    }
    memcpy(b + n, "1]}", 3);
    n += 3;
    b[n] = 0;
    return b;
}

typedef struct bomb {
    const th_server *s;
    const char *body;
    long status;
    pthread_t thread;
} bomb;

static void *bomb_main(void *arg)
{
    bomb *x = arg;
    th_resp r = th_request(x->s, "POST", "/v1/completions", x->body, strlen(x->body), NULL, 120000);
    x->status = r.status;
    th_resp_free(&r);
    return NULL;
}

static long vm_hwm_kib(const th_server *s)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

Test(server_limits, a_body_of_small_values_costs_a_few_times_its_size)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 --max-connections 64 --max-connections-per-address 64", stories());
    char *bodies[6];
    for (int i = 0; i < 6; i++)
        bodies[i] = worst_body(i);
    const long base = vm_hwm_kib(&s);
    /* One at a time: each is refused (its tree would not fit the bound), and the peak grows by a few
     * times the body at most. */
    for (int i = 0; i < 6; i++) {
        th_resp r = th_request(&s, "POST", "/v1/completions", bodies[i], strlen(bodies[i]), NULL, 60000);
        json_t *b = th_json(&r);
        const char *msg = th_expect_error(b, &r, 413);
        cr_expect(strstr(msg, "too many JSON values") != NULL, "shape %d: %s", i, msg);
        json_decref(b);
        th_resp_free(&r);
    }
    const long one = vm_hwm_kib(&s) - base;
    bomb bombs[CONCURRENT];
    for (int i = 0; i < CONCURRENT; i++) {
        bombs[i] = (bomb){.s = &s, .body = bodies[i % 6]};
        cr_assert(pthread_create(&bombs[i].thread, NULL, bomb_main, &bombs[i]) == 0);
    }
    for (int i = 0; i < CONCURRENT; i++) {
        pthread_join(bombs[i].thread, NULL);
        cr_expect_eq(bombs[i].status, 413, "body %d", i);
    }
    const long peak = vm_hwm_kib(&s);
    cr_log_info("peak RSS: %ld KiB at start, +%ld KiB after one worst body at a time, %ld KiB with %d at once",
                base, one, peak, CONCURRENT);
    fprintf(stderr, "parse cost: peak RSS %ld KiB at start, +%ld KiB after the bodies one at a time, %ld KiB "
                    "with %d at once\n",
            base, one, peak, CONCURRENT);
    /* The body's buffer (1 MiB, up to 2 while it grows), the parse's bound (4 MiB and some room), the
     * connection thread's stack and allocator arena: about 9 MiB measured, against ~78 MB before. */
#if !defined(__SANITIZE_ADDRESS__) /* AddressSanitizer keeps freed memory in quarantine: release build */
    cr_expect_lt(one, 12 * 1024, "one 1 MiB body at a time raised the peak by %ld KiB", one);
    cr_expect_lt(peak, 256 * 1024, "%d bodies at once took the peak to %ld KiB", CONCURRENT, peak);
#endif
    th_resp r = th_get(&s, "/health");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    for (int i = 0; i < 6; i++)
        free(bodies[i]);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_limits, a_full_context_of_token_ids_still_parses)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 -c 8192", stories());
    /* 8193 ids of three digits: 32 KiB of text, about 330 KiB of tree, more than four times the text:
     * the room for a context's worth of token ids lets it through, to the context's own check. */
    const size_t cap = 64 << 10;
    char *b = malloc(cap);
    size_t n = (size_t)snprintf(b, cap, "{\"max_tokens\": 1, \"prompt\": [");
    for (int i = 0; i < 8192; i++)
        n += (size_t)snprintf(b + n, cap - n, "%d,", 300 + i % 200);
    snprintf(b + n, cap - n, "300]}");
    th_resp r = th_post(&s, "/v1/completions", b);
    json_t *body = th_json(&r);
    const char *msg = th_expect_error(body, &r, 400);
    cr_expect(strstr(msg, "maximum context length") != NULL, "%s", msg);
    json_decref(body);
    th_resp_free(&r);
    free(b);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* Every logit NaN: each request is an error saying so, streamed or not, embeddings too, and the server
 * goes on serving. */
Test(server_limits, logits_that_break_down_are_an_error_not_text)
{
    const char *model = tu_stories_with_a_nan("server-nan.gguf");
    th_server s;
    th_start(&s, NULL, "-m %s -t 1 --parallel 2", model);
    const char *const paths[] = {"/v1/completions", "/v1/chat/completions"};
    const char *const bodies[] = {
        "{\"prompt\": \"Once\", \"max_tokens\": 4}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4, "
        "\"temperature\": 0}"};
    for (int i = 0; i < 2; i++) {
        th_resp r = th_post(&s, paths[i], bodies[i]);
        json_t *j = th_json(&r);
        const char *msg = th_expect_error(j, &r, 500);
        cr_expect(strstr(msg, "logits hold NaN"), "%s: %s", paths[i], msg);
        json_decref(j);
        th_resp_free(&r);
    }
    th_resp r = th_post(&s, "/v1/completions", "{\"prompt\": \"Once\", \"max_tokens\": 4, \"stream\": true}");
    cr_expect(r.len > 0 && memmem(r.body, r.len, "logits hold NaN", 15), "%.*s", (int)r.len, r.body);
    th_resp_free(&r);
    r = th_post(&s, "/v1/embeddings", "{\"input\": \"Once upon a time\"}");
    json_t *j = th_json(&r);
    const char *msg = th_expect_error(j, &r, 500);
    cr_expect(strstr(msg, "hidden states hold a NaN"), "embeddings: %s", msg);
    json_decref(j);
    th_resp_free(&r);
    r = th_get(&s, "/health");
    cr_expect_eq(r.status, 200);
    th_resp_free(&r);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    remove(model);
}
