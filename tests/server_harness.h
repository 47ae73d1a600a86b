/* End-to-end helpers for the server tests: start `woolly serve` on a free loopback port, talk to it over
 * HTTP (libcurl), read its JSON, server-sent events and metrics, and stop it, keeping its stderr (where
 * the sanitizers report). Every failure is a Criterion assertion. */
#ifndef WOOLLY_SERVER_HARNESS_H
#define WOOLLY_SERVER_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct th_server {
    pid_t pid;
    int port;
    char base[64];       /* "http://127.0.0.1:PORT" */
    char err_path[4096]; /* the server's stderr */
} th_server;

/* Starts `woolly serve --port 0 ARGS`, ARGS (shell words) formatted from fmt. env: "NAME=VALUE" set for
 * the server, or NULL. Returns once the server has printed the address it listens on. */
void th_start(th_server *s, const char *env, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* SIGTERM, then waits (at most 60 s). Returns the exit status, -1 if it did not exit normally; *err
 * (if not NULL) gets the server's stderr. */
int th_stop(th_server *s, char **err);
/* The server's resident memory (VmRSS), KiB. */
long th_rss_kib(const th_server *s);

typedef struct th_resp {
    long status; /* 0: no response (the connection failed or was cut) */
    char *body;  /* NUL-terminated */
    size_t len;
    char *headers;
} th_resp;

/* One request. header: one extra header line ("Authorization: Bearer x") or NULL; timeout_ms 0: 60 s. */
th_resp th_request(const th_server *s, const char *method, const char *path, const void *body, size_t len,
                   const char *header, long timeout_ms);
th_resp th_post(const th_server *s, const char *path, const char *json);
th_resp th_get(const th_server *s, const char *path);
void th_resp_free(th_resp *r);

/* The body as JSON (asserted to parse). */
json_t *th_json(const th_resp *r);
/* The JSON of each "data:" event of a streamed body, in order, [DONE] excluded; *done says whether the
 * stream ended with [DONE]. Asserts that every event is well-formed. */
json_t *th_events(const th_resp *r, bool *done);
/* The text a stream carried: choices[0].delta.content (chat) or choices[0].text, concatenated. */
char *th_events_text(const json_t *events);
/* Checks the OpenAI error shape of a response and its status; returns error.message. */
const char *th_expect_error(json_t *body, const th_resp *r, long status);

/* Starts a streamed request and closes the connection once n_events events have arrived. Returns the
 * number received (fewer if the stream ended first). */
int th_stream_abort(const th_server *s, const char *path, const char *json, int n_events);

/* A streamed request running in a thread of its own until it ends or th_bg_close cuts it. */
typedef struct th_bg th_bg;
th_bg *th_bg_stream(const th_server *s, const char *path, const char *json);
/* Events received so far. */
int th_bg_events(th_bg *b);
/* Waits until at least n events have arrived (false after timeout_ms or if the stream ended first). */
bool th_bg_wait_events(th_bg *b, int n, int timeout_ms);
/* Closes the connection (if the stream is still running) and frees b; returns the events received. */
int th_bg_close(th_bg *b);

/* The value of a line of /metrics that starts with `series` (a name, or a name with its labels)
 * followed by a space; -1 if there is none. */
double th_metric(const th_server *s, const char *series);
/* Waits until /health shows every slot idle and the queue empty; false after timeout_ms. */
bool th_wait_idle(const th_server *s, int timeout_ms);

/* What `woolly run -m MODEL -p PROMPT -n N --temp 0 EXTRA` prints after the prompt (PROMPT without
 * single quotes). */
char *th_woolly_run(const char *model, const char *prompt, int n, const char *extra);

/* Runs `node SCRIPT` in tests/server (after `npm ci` there if node_modules lacks `package`) against a
 * stories260K server with SLOTS slots, API key `key` and more serve flags `flags`; the script reads
 * WOOLLY_BASE_URL, WOOLLY_API_KEY, WOOLLY_MODEL and WOOLLY_SLOTS (and whatever else the caller set) and
 * must exit 0 with " 0 failed" in its output, which goes to stderr. The server must end idle. */
void th_node_checks(const char *script, const char *package, const char *key, int slots, const char *flags);

/* A string of the form "%s" formatted into a heap buffer. */
char *th_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
