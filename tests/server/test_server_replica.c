/* `woolly serve` as one replica behind a load balancer: /health says "loading" (503) until the model is
 * loaded, "ok" while requests are taken (without the API key), and "draining" after SIGTERM (the drain
 * test); the affinity header is echoed and counted, and a session sent back to the same replica finds
 * its prompt cached; /metrics names the replica and its model. And the connection guard: 64
 * connections trickling their headers do not lock /health out, and are cut at their deadline. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raw_http.h"
#include "server_harness.h"
#include "testutil.h"

static const char *stories(void)
{
    return tu_data("models/stories260K.gguf");
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* Starts `woolly serve` with the model's loading held back by delay_ms, and returns once its port is
 * known (from its stderr) but, with the delay, before it is ready. */
static void start_loading(th_server *s, int *stdout_fd, int delay_ms)
{
    *s = (th_server){0};
    snprintf(s->err_path, sizeof s->err_path, "%s", tu_tmp_path("loading.err"));
    int out[2];
    cr_assert(pipe(out) == 0);
    char *cmd = th_fmt("WOOLLY_TEST_SERVE_LOAD_DELAY_MS=%d exec %s serve --port 0 -m %s -np 1 --api-key k "
                       "2>%s",
                       delay_ms, WOOLLY_CLI, stories(), s->err_path);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    close(out[1]);
    s->pid = pid;
    *stdout_fd = out[0];
    const double deadline = now_ms() + 20000;
    while (!s->port && now_ms() < deadline) {
        if (access(s->err_path, R_OK)) { /* the shell has not opened it yet */
            usleep(5000);
            continue;
        }
        char *err = tu_read_file(s->err_path, NULL);
        const char *at = strstr(err, "http://127.0.0.1:");
        if (at && strstr(at, "loading"))
            s->port = atoi(at + strlen("http://127.0.0.1:"));
        free(err);
        usleep(5000);
    }
    cr_assert(s->port > 0, "the server did not say where it listens while loading");
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
}

Test(server_replica, health_says_loading_then_ok_without_the_key)
{
    th_server s;
    int out;
    start_loading(&s, &out, 3000);
    th_resp r = th_get(&s, "/health");
    cr_expect_eq(r.status, 503, "%s", r.body);
    cr_expect(strstr(r.body, "\"loading\"") != NULL, "%s", r.body);
    th_resp_free(&r);
    r = th_request(&s, "POST", "/v1/completions", "{\"prompt\": \"a\"}", 15, "Authorization: Bearer k", 0);
    json_t *b = th_json(&r);
    cr_expect(strstr(th_expect_error(b, &r, 503), "loading") != NULL);
    json_decref(b);
    th_resp_free(&r);
    /* the address line on stdout comes once the model is loaded */
    struct pollfd p = {.fd = out, .events = POLLIN};
    cr_assert(poll(&p, 1, 30000) == 1, "not ready within 30 s");
    char line[128] = {0};
    cr_assert(read(out, line, sizeof line - 1) > 0);
    cr_expect(strstr(line, "listening on") != NULL, "%s", line);
    close(out);
    r = th_get(&s, "/health");
    cr_expect_eq(r.status, 200, "%s", r.body);
    cr_expect(strstr(r.body, "\"ok\"") != NULL, "%s", r.body);
    th_resp_free(&r);
    r = th_get(&s, "/v1/models");
    cr_expect_eq(r.status, 401, "the key is required everywhere else");
    th_resp_free(&r);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

static char *header_of(const th_resp *r, const char *name)
{
    const char *at = strcasestr(r->headers, name);
    if (!at)
        return NULL;
    at += strlen(name);
    while (*at == ':' || *at == ' ')
        at++;
    return strndup(at, strcspn(at, "\r\n"));
}

static long long cached_tokens(const th_resp *r)
{
    json_t *b = th_json(r);
    const long long n = json_integer_value(json_object_get(
        json_object_get(json_object_get(b, "usage"), "prompt_tokens_details"), "cached_tokens"));
    json_decref(b);
    return n;
}

Test(server_replica, the_session_header_is_echoed_counted_and_finds_its_cache)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 2 --temp 0", stories());
    const char *first = "{\"prompt\": \"Once upon a time there was a little girl\", \"max_tokens\": 8}";
    th_resp r = th_request(&s, "POST", "/v1/completions", first, strlen(first), "X-Session-Id: conv-7", 0);
    cr_assert_eq(r.status, 200, "%s", r.body);
    char *echo = header_of(&r, "\r\nX-Session-Id");
    cr_expect(echo && !strcmp(echo, "conv-7"), "echoed '%s'", echo ? echo : "(none)");
    free(echo);
    th_resp_free(&r);
    const char *second = "{\"prompt\": \"Once upon a time there was a little girl who liked\", \"max_tokens\": 8}";
    r = th_request(&s, "POST", "/v1/completions", second, strlen(second), "X-Session-Id: conv-7", 0);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_expect_gt(cached_tokens(&r), 0, "the session's second request found nothing cached");
    th_resp_free(&r);
    r = th_post(&s, "/v1/completions", "{\"prompt\": \"Lily\", \"max_tokens\": 2}"); /* no session */
    cr_expect(header_of(&r, "\r\nX-Session-Id") == NULL);
    cr_expect(header_of(&r, "\r\nX-Woolly-Replica") == NULL, "a replica without --replica names itself");
    th_resp_free(&r);
    cr_expect_eq(th_metric(&s, "woolly_session_requests_total"), 2);
    cr_expect_eq(th_metric(&s, "woolly_session_cache_hits_total"), 1);
    cr_expect_eq(th_stop(&s, NULL), 0);

    th_start(&s, NULL, "-m %s -np 1 --affinity-header X-Conversation --replica r2", stories());
    r = th_request(&s, "POST", "/v1/completions", first, strlen(first), "X-Conversation: c1", 0);
    echo = header_of(&r, "\r\nX-Conversation");
    cr_expect(echo && !strcmp(echo, "c1"), "echoed '%s'", echo ? echo : "(none)");
    free(echo);
    char *named = header_of(&r, "\r\nX-Woolly-Replica"); /* the replica that answered, by its name */
    cr_expect(named && !strcmp(named, "r2"), "X-Woolly-Replica: '%s'", named ? named : "(none)");
    free(named);
    th_resp_free(&r);
    cr_expect_eq(th_metric(&s, "woolly_session_requests_total"), 1);
    cr_expect_eq(th_metric(&s, "woolly_server_info{model=\"stories260K\",replica=\"r2\"}"), 1);
    cr_expect_eq(th_metric(&s, "woolly_server_state{state=\"ready\"}"), 1);
    cr_expect_eq(th_metric(&s, "woolly_server_state{state=\"draining\"}"), 0);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

Test(server_replica, metrics_name_the_replica_by_host_and_port)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 --alias 'my \"model\"'", stories());
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    char *series = th_fmt("woolly_server_info{model=\"my \\\"model\\\"\",replica=\"%s:%d\"}", host, s.port);
    cr_expect_eq(th_metric(&s, series), 1, "no %s", series);
    free(series);
    cr_expect_eq(th_stop(&s, NULL), 0);
}

/* 64 connections from another client address trickle a header byte every 100 ms: past the per-address
 * limit they are refused, the rest are cut at the head deadline, and /health from this address is
 * answered within a second all along. */
Test(server_replica, trickling_heads_do_not_lock_out_health)
{
    th_server s;
    th_start(&s, NULL, "-m %s -np 1 --max-connections 64 --max-connections-per-address 16 --head-timeout 2",
             stories());
    enum { N = 64 };
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = rh_connect(s.port, "127.0.0.2");
    const char *head = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    bool gone[N] = {false};
    int n_gone = 0, n_health = 0;
    const double t0 = now_ms();
    for (size_t k = 0; now_ms() - t0 < 5000 && k < strlen(head); k++) {
        for (int i = 0; i < N; i++)
            if (fds[i] >= 0 && !gone[i] && (!rh_send(fds[i], head + k, 1) || rh_closed(fds[i]))) {
                gone[i] = true;
                n_gone++;
            }
        th_resp r = th_request(&s, "GET", "/health", NULL, 0, NULL, 1000);
        cr_expect_eq(r.status, 200, "/health was not answered within 1 s under %d trickling connections",
                     N - n_gone);
        n_health += r.status == 200;
        th_resp_free(&r);
        usleep(100000);
    }
    int refused = 0;
    for (int i = 0; i < N; i++) {
        if (fds[i] < 0 || (!gone[i] && rh_closed(fds[i])))
            gone[i] = true;
        refused += fds[i] < 0;
        cr_expect(gone[i], "trickling connection %d is still open after 5 s", i);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    cr_log_info("%d of %d trickling connections closed (%d refused at once), /health answered %d times", N,
                N, refused, n_health);
    cr_expect_geq(th_metric(&s, "woolly_connections_cut_total"), 1);
    cr_expect_eq(th_stop(&s, NULL), 0);
}
