#include "server_harness.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

char *th_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    cr_assert(s != NULL);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

void th_start(th_server *s, const char *env, const char *fmt, ...)
{
    pthread_once(&curl_once, curl_init);
    va_list ap;
    va_start(ap, fmt);
    char args[4096];
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    *s = (th_server){0};
    static int n_started;
    char name[64];
    snprintf(name, sizeof name, "serve%d.err", n_started++);
    snprintf(s->err_path, sizeof s->err_path, "%s", tu_tmp_path(name));
    int out[2];
    cr_assert(pipe(out) == 0);
    char *cmd = th_fmt("exec %s serve --port 0 %s 2>%s", WOOLLY_CLI, args, s->err_path);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails half-way leaves no server behind */
        if (env)
            putenv((char *)env);
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    close(out[1]);
    s->pid = pid;
    /* "listening on http://127.0.0.1:PORT\n" */
    char line[256];
    size_t n = 0;
    const double deadline = now_ms() + 60000;
    while (n < sizeof line - 1 && (n == 0 || line[n - 1] != '\n')) {
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        const int left = (int)(deadline - now_ms());
        cr_assert(left > 0 && poll(&p, 1, left) == 1, "woolly serve %s did not start within 60 s", args);
        const ssize_t k = read(out[0], line + n, 1);
        if (k <= 0) {
            char *err = tu_read_file(s->err_path, NULL);
            cr_log_error("%s", err);
            free(err);
            cr_assert_fail("woolly serve %s exited before listening", args);
        }
        n += (size_t)k;
    }
    line[n] = 0;
    close(out[0]);
    const char *colon = strrchr(line, ':');
    cr_assert(strstr(line, "listening on http://") == line && colon, "unexpected first line '%s'", line);
    s->port = atoi(colon + 1);
    cr_assert(s->port > 0, "no port in '%s'", line);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
}

int th_stop(th_server *s, char **err)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    const double deadline = now_ms() + 60000;
    pid_t r;
    while ((r = waitpid(s->pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
        usleep(10000);
    if (r == 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &st, 0);
        cr_expect_fail("woolly serve did not stop within 60 s of SIGTERM");
    }
    if (err)
        *err = tu_read_file(s->err_path, NULL);
    remove(s->err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long th_rss_kib(const th_server *s)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

typedef struct sink {
    char *p;
    size_t len, cap;
} sink;

static void sink_add(sink *k, const void *data, size_t n)
{
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 1024;
        while (cap < k->len + n + 1)
            cap *= 2;
        k->p = realloc(k->p, cap);
        cr_assert(k->p != NULL);
        k->cap = cap;
    }
    memcpy(k->p + k->len, data, n);
    k->len += n;
    k->p[k->len] = 0;
}

static size_t on_data(char *data, size_t size, size_t n, void *ud)
{
    sink_add(ud, data, size * n);
    return size * n;
}

static CURL *easy(const th_server *s, const char *method, const char *path, const void *body, size_t len,
                  struct curl_slist **hdrs, const char *header, long timeout_ms)
{
    CURL *c = curl_easy_init();
    cr_assert(c != NULL);
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 60000L);
    *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    *hdrs = curl_slist_append(*hdrs, "Expect:"); /* send bodies at once, as most clients do */
    if (header)
        *hdrs = curl_slist_append(*hdrs, header);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    return c;
}

th_resp th_request(const th_server *s, const char *method, const char *path, const void *body, size_t len,
                   const char *header, long timeout_ms)
{
    struct curl_slist *hdrs;
    CURL *c = easy(s, method, path, body, len, &hdrs, header, timeout_ms);
    sink b = {0}, h = {0};
    sink_add(&b, "", 0);
    sink_add(&h, "", 0);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    th_resp r = {0};
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    r.body = b.p;
    r.len = b.len;
    r.headers = h.p;
    return r;
}

th_resp th_post(const th_server *s, const char *path, const char *json)
{
    return th_request(s, "POST", path, json, strlen(json), NULL, 0);
}

th_resp th_get(const th_server *s, const char *path)
{
    return th_request(s, "GET", path, NULL, 0, NULL, 0);
}

void th_resp_free(th_resp *r)
{
    free(r->body);
    free(r->headers);
    *r = (th_resp){0};
}

json_t *th_json(const th_resp *r)
{
    json_error_t e;
    json_t *v = json_loadb(r->body, r->len, 0, &e);
    cr_assert(v != NULL, "the response (status %ld) is not JSON: %s\n%.500s", r->status, e.text, r->body);
    return v;
}

json_t *th_events(const th_resp *r, bool *done)
{
    json_t *events = json_array();
    *done = false;
    const char *p = r->body;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        cr_assert(end != NULL, "an event does not end with a blank line: '%.200s'", p);
        cr_assert(!*done, "an event after [DONE]");
        if (*p == ':') { /* a comment (keep-alive) */
            p = end + 2;
            continue;
        }
        cr_assert(!strncmp(p, "data: ", 6), "an event is not a data line: '%.200s'", p);
        p += 6;
        if (end - p == 6 && !strncmp(p, "[DONE]", 6)) {
            *done = true;
        } else {
            json_error_t e;
            json_t *v = json_loadb(p, (size_t)(end - p), 0, &e);
            cr_assert(v != NULL, "an event is not JSON: %s: '%.*s'", e.text, (int)(end - p), p);
            json_array_append_new(events, v);
        }
        p = end + 2;
    }
    return events;
}

char *th_events_text(const json_t *events)
{
    sink t = {0};
    sink_add(&t, "", 0);
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_t *choice = json_array_get(json_object_get(ev, "choices"), 0);
        if (!choice)
            continue;
        json_t *delta = json_object_get(choice, "delta");
        json_t *text = delta ? json_object_get(delta, "content") : json_object_get(choice, "text");
        if (json_is_string(text))
            sink_add(&t, json_string_value(text), json_string_length(text));
    }
    return t.p;
}

const char *th_expect_error(json_t *body, const th_resp *r, long status)
{
    cr_expect_eq(r->status, status, "status %ld, expected %ld: %s", r->status, status, r->body);
    json_t *e = json_object_get(body, "error");
    cr_assert(json_is_object(e), "no error object in %s", r->body);
    cr_expect(json_is_string(json_object_get(e, "message")) &&
                  json_string_length(json_object_get(e, "message")),
              "error.message missing in %s", r->body);
    cr_expect(json_is_string(json_object_get(e, "type")), "error.type missing in %s", r->body);
    cr_expect(json_object_get(e, "param") != NULL, "error.param missing in %s", r->body);
    cr_expect(json_object_get(e, "code") != NULL, "error.code missing in %s", r->body);
    const char *msg = json_string_value(json_object_get(e, "message"));
    return msg ? msg : "";
}

typedef struct abort_state {
    int events, want;
    bool newline; /* the last byte seen was '\n' (an event's "\n\n" may straddle two chunks) */
} abort_state;

/* Counts events up to the wanted number: one chunk may carry several events when the server runs ahead
 * of the client, and the client stops at the one it wanted, as a real client would. */
static size_t on_stream(char *data, size_t size, size_t n, void *ud)
{
    abort_state *a = ud;
    const size_t len = size * n;
    for (size_t i = 0; i < len && a->events < a->want; i++) {
        if (data[i] == '\n' && a->newline) {
            a->events++;
            a->newline = false;
        } else {
            a->newline = data[i] == '\n';
        }
    }
    return a->events >= a->want ? 0 : len; /* 0: curl stops and closes the connection */
}

int th_stream_abort(const th_server *s, const char *path, const char *json, int n_events)
{
    struct curl_slist *hdrs;
    CURL *c = easy(s, "POST", path, json, strlen(json), &hdrs, NULL, 0);
    abort_state a = {0, n_events, false};
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    return a.events;
}

struct th_bg {
    CURL *curl;
    struct curl_slist *hdrs;
    pthread_t thread;
    atomic_int events;
    atomic_bool stop, ended;
};

static size_t on_bg_data(char *data, size_t size, size_t n, void *ud)
{
    th_bg *b = ud;
    const size_t len = size * n;
    for (size_t i = 0; i + 1 < len; i++)
        if (data[i] == '\n' && data[i + 1] == '\n')
            atomic_fetch_add(&b->events, 1);
    return atomic_load(&b->stop) ? 0 : len;
}

static int on_bg_progress(void *ud, curl_off_t a, curl_off_t b_, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b_, (void)c, (void)d;
    return atomic_load(&((th_bg *)ud)->stop) ? 1 : 0; /* non-zero: curl aborts, closing the connection */
}

static void *bg_main(void *arg)
{
    th_bg *b = arg;
    curl_easy_perform(b->curl);
    atomic_store(&b->ended, true);
    return NULL;
}

th_bg *th_bg_stream(const th_server *s, const char *path, const char *json)
{
    th_bg *b = calloc(1, sizeof *b);
    cr_assert(b != NULL);
    b->curl = easy(s, "POST", path, json, strlen(json), &b->hdrs, NULL, 600000);
    curl_easy_setopt(b->curl, CURLOPT_COPYPOSTFIELDS, json);
    curl_easy_setopt(b->curl, CURLOPT_WRITEFUNCTION, on_bg_data);
    curl_easy_setopt(b->curl, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(b->curl, CURLOPT_XFERINFOFUNCTION, on_bg_progress);
    curl_easy_setopt(b->curl, CURLOPT_XFERINFODATA, b);
    curl_easy_setopt(b->curl, CURLOPT_NOPROGRESS, 0L);
    cr_assert(pthread_create(&b->thread, NULL, bg_main, b) == 0);
    return b;
}

int th_bg_events(th_bg *b)
{
    return atomic_load(&b->events);
}

bool th_bg_wait_events(th_bg *b, int n, int timeout_ms)
{
    const double deadline = now_ms() + timeout_ms;
    while (atomic_load(&b->events) < n) {
        if (atomic_load(&b->ended) || now_ms() > deadline)
            return false;
        usleep(2000);
    }
    return true;
}

int th_bg_close(th_bg *b)
{
    atomic_store(&b->stop, true);
    pthread_join(b->thread, NULL);
    curl_easy_cleanup(b->curl);
    curl_slist_free_all(b->hdrs);
    const int n = atomic_load(&b->events);
    free(b);
    return n;
}

double th_metric(const th_server *s, const char *series)
{
    th_resp r = th_get(s, "/metrics");
    cr_assert_eq(r.status, 200);
    const size_t n = strlen(series);
    double v = -1;
    for (const char *line = r.body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, series, n) && line[n] == ' ') {
            v = strtod(line + n + 1, NULL);
            break;
        }
    th_resp_free(&r);
    return v;
}

bool th_wait_idle(const th_server *s, int timeout_ms)
{
    const double deadline = now_ms() + timeout_ms;
    for (;;) {
        th_resp r = th_get(s, "/health");
        json_t *h = th_json(&r);
        const bool idle = json_integer_value(json_object_get(h, "slots_busy")) == 0 &&
                          json_integer_value(json_object_get(h, "queue")) == 0;
        json_decref(h);
        th_resp_free(&r);
        if (idle)
            return true;
        if (now_ms() > deadline)
            return false;
        usleep(10000);
    }
}

char *th_woolly_run(const char *model, const char *prompt, int n, const char *extra)
{
    char *args = th_fmt("run -m %s -p '%s' -n %d --temp 0 %s", model, prompt, n, extra ? extra : "");
    char *out = NULL;
    const int st = tu_run_cli(args, &out, NULL);
    cr_assert(st == 0 || st == 1, "woolly %s failed (%d)", args, st);
    free(args);
    cr_assert(!strncmp(out, prompt, strlen(prompt)), "woolly run printed '%s', not the prompt first", out);
    char *rest = strdup(out + strlen(prompt));
    free(out);
    return rest;
}

void th_node_checks(const char *script, const char *package, const char *key, int slots, const char *flags)
{
    const char *dir = WOOLLY_SOURCE_DIR "/tests/server";
    char *installed = th_fmt("%s/node_modules/%s/package.json", dir, package);
    if (access(installed, R_OK) != 0) {
        char *npm = th_fmt("cd '%s' && npm ci --no-audit --no-fund >&2", dir);
        cr_assert_eq(system(npm), 0, "npm ci in %s failed", dir);
        free(npm);
    }
    free(installed);
    th_server s;
    th_start(&s, NULL, "-m %s -c 2048 -t 2 --parallel %d --api-key %s %s", tu_data("models/stories260K.gguf"),
             slots, key, flags);
    char *url = th_fmt("%s/v1", s.base), *n_slots = th_fmt("%d", slots);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", key, 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    setenv("WOOLLY_SLOTS", n_slots, 1);
    char *out_name = th_fmt("%s.out", script);
    const char *out_path = tu_tmp_path(out_name);
    char *cmd = th_fmt("cd '%s' && node %s >'%s' 2>&1", dir, script, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "%s %s failed:\n%s", script, flags, out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    fprintf(stderr, "[%s %s] %s", script, flags, out);
    free(out), free(cmd), free(out_name), free(url), free(n_slots);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}
