/* SIGTERM drains `woolly serve`: it stops accepting connections, /health says "draining" (503), and
 * every request in flight, streams included, finishes with its whole answer; a second signal or the
 * drain timeout ends the rest, each with a clean error (an error event closing its stream, or a 503),
 * never a cut connection; the exit status is 0 either way. (The regression: the daemon stopped before
 * the connection threads wrote their error, and 14 of 20 streams ended mid-chunk.) */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "raw_http.h"
#include "server_harness.h"
#include "testutil.h"

static char *stories(void)
{
    return strdup(tu_data("models/stories260K.gguf"));
}

typedef struct call {
    const th_server *s;
    bool stream;
    int max_tokens;
    th_resp resp;
    pthread_t thread;
} call;

static void *call_main(void *arg)
{
    call *c = arg;
    char *body = th_fmt("{\"prompt\": \"Once upon a time\", \"max_tokens\": %d, \"ignore_eos\": true, "
                        "\"temperature\": 0, \"stream\": %s, \"stream_options\": {\"include_usage\": %s}}",
                        c->max_tokens, c->stream ? "true" : "false", c->stream ? "true" : "false");
    if (!c->stream) { /* stream_options needs stream */
        free(body);
        body = th_fmt("{\"prompt\": \"Once upon a time\", \"max_tokens\": %d, \"ignore_eos\": true, "
                      "\"temperature\": 0}",
                      c->max_tokens);
    }
    c->resp = th_request(c->s, "POST", "/v1/completions", body, strlen(body), NULL, 120000);
    free(body);
    return NULL;
}

static void start_calls(call *calls, int n, const th_server *s, int n_whole, int max_tokens)
{
    for (int i = 0; i < n; i++) {
        calls[i] = (call){.s = s, .stream = i >= n_whole, .max_tokens = max_tokens};
        cr_assert(pthread_create(&calls[i].thread, NULL, call_main, &calls[i]) == 0);
    }
}

/* Waits until the server holds all n requests (running in a slot or queued for one) and they are
 * generating (a few forward passes with generated tokens: the counts of tokens only grow when a request
 * ends). A client still connecting when the signal closes the listening socket would be refused, which
 * is what draining means, not what these tests look at. */
static void wait_generating(const th_server *s, int n)
{
    for (int i = 0; i < 5000 && (th_metric(s, "woolly_generation_steps_total") < 3 ||
                                 th_metric(s, "woolly_slots_busy") + th_metric(s, "woolly_queue_depth") < n);
         i++)
        usleep(2000);
    cr_assert_geq(th_metric(s, "woolly_slots_busy"), 1, "no request is running");
    cr_assert_eq(th_metric(s, "woolly_slots_busy") + th_metric(s, "woolly_queue_depth"), n,
                 "the server does not hold every request");
}

/* The server's exit status, waiting at most 60 s. */
static int wait_exit(th_server *s)
{
    int st = 0;
    for (int i = 0; i < 6000; i++) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    cr_assert_fail("the server did not exit within 60 s of the signal");
    return -1;
}

/* How one request ended: its whole answer, or a clean error. Asserts it was never cut. */
typedef enum { DONE_WHOLE, DONE_ERROR } outcome;

static outcome check_call(const call *c, int i)
{
    cr_assert(c->resp.status != 0, "request %d (%s) got no complete response: its connection was cut", i,
              c->stream ? "stream" : "whole");
    json_t *body = NULL;
    outcome o;
    if (c->resp.status != 200) { /* a request still waiting for a slot, stream or not: a 503 */
        body = th_json(&c->resp);
        const char *msg = th_expect_error(body, &c->resp, 503);
        cr_expect(strstr(msg, "shutting down") != NULL, "request %d: %s", i, msg);
        o = DONE_ERROR;
    } else if (!c->stream) {
        body = th_json(&c->resp);
        cr_expect_eq(json_integer_value(json_object_get(json_object_get(body, "usage"), "completion_tokens")),
                     c->max_tokens, "request %d: a short answer", i);
        o = DONE_WHOLE;
    } else {
        bool done;
        body = th_events(&c->resp, &done); /* asserts every event is whole */
        const json_t *last = json_array_get(body, json_array_size(body) - 1);
        if (done) {
            cr_expect_eq(json_integer_value(json_object_get(json_object_get(last, "usage"), "completion_tokens")),
                         c->max_tokens, "stream %d: a short answer", i);
            o = DONE_WHOLE;
        } else {
            const json_t *e = json_object_get(last, "error");
            cr_assert(json_is_object(e), "stream %d ended with neither [DONE] nor an error event", i);
            cr_expect_str_eq(json_string_value(json_object_get(e, "code")), "server_shutting_down");
            o = DONE_ERROR;
        }
    }
    json_decref(body);
    return o;
}

Test(server_drain, sigterm_finishes_every_request_in_flight)
{
    char *model = stories();
    th_server s;
    /* a drain timeout far above what the requests need, even in the sanitizer build */
    th_start(&s, NULL, "-m %s -np 4 -t 1 --temp 0 --drain-timeout 300", model);
    /* Opened before the signal: the drain still answers on it. */
    const int keep = rh_connect(s.port, NULL);
    cr_assert(keep >= 0);
    enum { N = 6 };
    call calls[N];
    /* 2 whole answers, 4 streams: one of them waits for a slot. 1500 tokens, so that the requests are
     * still generating when the signal comes and for the 100 ms after it (300 took about 0.1 s each on an
     * Intel Xeon's avx512 level, and the first ones ended before the last was held). */
    start_calls(calls, N, &s, 2, 1500);
    wait_generating(&s, N);
    kill(s.pid, SIGTERM);
    usleep(100000);
    const char *get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    cr_assert(rh_send(keep, get, strlen(get)));
    char *health = rh_read_response(keep, 10000);
    cr_assert(health != NULL, "no answer to /health while draining");
    cr_expect_eq(rh_status(health), 503, "%s", health);
    cr_expect(strstr(health, "\"draining\"") != NULL, "%s", health);
    cr_expect(strcasestr(health, "Connection: close") != NULL, "%s", health);
    free(health);
    close(keep);
    cr_expect_eq(rh_connect(s.port, NULL), -1, "a new connection was accepted while draining");
    for (int i = 0; i < N; i++) {
        pthread_join(calls[i].thread, NULL);
        cr_expect_eq(check_call(&calls[i], i), DONE_WHOLE, "request %d did not finish whole", i);
        th_resp_free(&calls[i].resp);
    }
    cr_expect_eq(wait_exit(&s), 0);
    char *err = tu_read_file(s.err_path, NULL);
    cr_expect(strstr(err, "draining") != NULL, "%s", err);
    cr_expect(strstr(err, "ERROR") == NULL && strstr(err, "Sanitizer") == NULL, "%s", err);
    free(err);
    remove(s.err_path);
    free(model);
}

/* 20 streams and 5 whole answers, far more work than the slots finish soon; two signals in a row end
 * the drain at once. Every client gets a whole response: its answer, or an error that says why. */
static void cut_short(const char *extra, int signals)
{
    char *model = stories();
    th_server s;
    th_start(&s, NULL, "-m %s -np 4 -t 1 --temp 0 %s", model, extra);
    enum { N = 25 };
    call calls[N];
    start_calls(calls, N, &s, 5, 1500);
    wait_generating(&s, N);
    for (int k = 0; k < signals; k++) {
        kill(s.pid, k == 0 ? SIGINT : SIGTERM); /* SIGINT drains as SIGTERM does */
        usleep(200000);
    }
    int whole = 0, errors = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(calls[i].thread, NULL);
        if (check_call(&calls[i], i) == DONE_WHOLE)
            whole++;
        else
            errors++;
        th_resp_free(&calls[i].resp);
    }
    cr_log_info("%d whole answers, %d clean errors", whole, errors);
    cr_expect_gt(errors, 0, "every request finished: the drain was not ended early");
    cr_expect_eq(wait_exit(&s), 0);
    char *err = tu_read_file(s.err_path, NULL);
    cr_expect(strstr(err, "end with an error") != NULL, "%s", err);
    cr_expect(strstr(err, "Sanitizer") == NULL, "%s", err);
    free(err);
    remove(s.err_path);
    free(model);
}

Test(server_drain, a_second_signal_ends_the_rest_with_clean_errors)
{
    cut_short("", 2);
}

Test(server_drain, the_drain_timeout_ends_the_rest_with_clean_errors)
{
    cut_short("--drain-timeout 1", 1);
}
