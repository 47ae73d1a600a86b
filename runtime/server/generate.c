/* POST /v1/chat/completions and /v1/completions: parse the request, tokenize its prompt, queue a job,
 * then either wait for the whole text or stream it as server-sent events, one event per piece. While
 * waiting, the connection thread watches its socket: a client that goes away cancels its job. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job.h"
#include "oai.h"
#include "routes.h"

/* How often a waiting connection thread checks that its client is still there. A session id longer
 * than SESSION_MAX is not echoed (it is still passed on by the balancer). */
enum { POLL_MS = 50, SESSION_MAX = 256 };

/* A seed for a request that gives none: different for every request. */
static uint64_t fresh_seed(void)
{
    static atomic_ullong counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t x = ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) ^
                 (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The prompt's tokens: the request's ids, or its text tokenized (control tokens written in it parsed,
 * as `woolly run` does; BOS as the vocabulary and, for a chat, the template ask). */
static woolly_token *prompt_tokens(srv_app *app, srv_gen_request *g, int32_t *n, srv_error *e)
{
    woolly_token *ids;
    if (g->ids) {
        ids = g->ids;
        *n = g->n_ids;
        g->ids = NULL;
    } else {
        const size_t len = strlen(g->prompt);
        const bool bos = g->kind == SRV_GEN_CHAT ? app->chat_bos : woolly_model_adds_bos(app->model);
        if (len > INT32_MAX - 8) {
            srv_fail(e, 400, "invalid_value", "prompt", "the prompt is too long");
            return NULL;
        }
        int32_t cap = (int32_t)len + 8;
        if (!(ids = malloc(sizeof *ids * (size_t)cap))) {
            srv_fail(e, 500, NULL, NULL, "out of memory");
            return NULL;
        }
        *n = woolly_model_tokenize(app->model, g->prompt, len, bos, true, ids, cap);
        if (*n > cap) {
            woolly_token *more = realloc(ids, sizeof *ids * (size_t)*n);
            if (!more) {
                free(ids);
                srv_fail(e, 500, NULL, NULL, "out of memory");
                return NULL;
            }
            ids = more;
            *n = woolly_model_tokenize(app->model, g->prompt, len, bos, true, ids, *n);
        }
        if (*n < 0) {
            free(ids);
            srv_fail(e, 500, NULL, NULL, "cannot tokenize the prompt: %s", woolly_last_error());
            return NULL;
        }
    }
    const int32_t n_ctx = srv_scheduler_n_ctx(app->sched);
    if (*n == 0 || *n > n_ctx) {
        if (*n == 0)
            srv_fail(e, 400, "invalid_value", g->kind == SRV_GEN_CHAT ? "messages" : "prompt",
                     "the prompt has no tokens");
        else
            srv_fail(e, 400, "context_length_exceeded", g->kind == SRV_GEN_CHAT ? "messages" : "prompt",
                     "this model's maximum context length is %d tokens, but the prompt has %d tokens", n_ctx,
                     *n);
        free(ids);
        return NULL;
    }
    return ids;
}

/* The job of a parsed request (takes its prompt tokens and stop strings). */
static srv_job *make_job(const srv_app *app, woolly_token *ids, int32_t n, srv_gen_request *g)
{
    srv_job *j = srv_job_new(ids, n);
    if (!j)
        return NULL;
    j->sp = g->sp;
    if (!g->seed_given && !app->fixed_seed)
        j->sp.seed = fresh_seed();
    j->max_tokens = g->max_tokens;
    j->ignore_eos = g->ignore_eos;
    for (int i = 0; i < g->n_stop; i++) {
        j->stop[i] = g->stop[i];
        g->stop[i] = NULL;
    }
    j->n_stop = g->n_stop;
    g->n_stop = 0;
    j->grammar = g->grammar;
    g->grammar = NULL;
    return j;
}

/* A finished request that named its session: was its beginning found in this replica's cache? */
static void count_session(srv_app *app, srv_job *j)
{
    pthread_mutex_lock(&j->lock);
    const bool done = j->finish == SRV_FINISH_STOP || j->finish == SRV_FINISH_LENGTH;
    const int32_t cached = j->n_cached;
    pthread_mutex_unlock(&j->lock);
    if (done)
        srv_metrics_session(app->metrics, cached > 0);
}

static void send_error(srv_req *r, int status, const char *code, const char *msg)
{
    srv_error e;
    srv_fail(&e, status, code, NULL, "%s", msg);
    srv_respond_error(r, &e);
}

/* Waits for the whole text; the client's leaving cancels the job. */
static void respond_whole(srv_app *app, srv_req *r, srv_job *j, enum srv_gen_kind kind)
{
    pthread_mutex_lock(&j->lock);
    while (j->finish == SRV_FINISH_NONE) {
        srv_job_wait_locked(j, INT32_MAX, POLL_MS);
        if (j->finish == SRV_FINISH_NONE && srv_req_client_gone(r)) {
            pthread_mutex_unlock(&j->lock);
            srv_scheduler_cancel(app->sched, j);
            srv_req_abort(r);
            return;
        }
    }
    pthread_mutex_unlock(&j->lock);
    /* Done: the engine no longer writes to the job. */
    if (j->shutdown) { /* nothing was sent yet: a balancer may retry it on another replica */
        send_error(r, 503, "server_shutting_down", j->error);
        return;
    }
    if (j->finish == SRV_FINISH_ERROR || j->finish == SRV_FINISH_CANCELLED) {
        send_error(r, 500, NULL, j->finish == SRV_FINISH_ERROR ? j->error : "the generation was cancelled");
        return;
    }
    srv_oai_head head;
    srv_oai_head_init(&head, kind, app->model_id);
    json_t *usage = srv_oai_usage(j->n_prompt, j->n_generated, j->n_cached);
    srv_respond_json(r, 200, srv_oai_result(&head, j->text.p, j->text.len, srv_finish_name(j->finish), usage),
                     NULL, NULL);
}

typedef struct gen_stream {
    srv_app *app;
    srv_job *job;
    srv_oai_head head;
    bool include_usage;
    bool session; /* the request named its session: counted when done */
    bool opened;  /* the opening chunk (a chat's role) is sent */
    int32_t sent; /* pieces sent */
} gen_stream;

static int add_event(srv_buf *out, json_t *chunk)
{
    char *text = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    json_decref(chunk);
    const int rc = !text || srv_buf_printf(out, "data: %s\n\n", text) ? -1 : 0;
    free(text);
    return rc;
}

static int stream_next(void *ud, srv_stream *s, srv_buf *out)
{
    gen_stream *g = ud;
    srv_job *j = g->job;
    const bool usage_null = g->include_usage;
    if (!g->opened) {
        g->opened = true;
        if (g->head.kind == SRV_GEN_CHAT)
            return add_event(out, srv_oai_chunk(&g->head, true, "", 0, NULL, usage_null));
    }
    pthread_mutex_lock(&j->lock);
    for (int waited = 0; !srv_job_wait_locked(j, g->sent, POLL_MS); waited += POLL_MS) {
        pthread_mutex_unlock(&j->lock);
        if (srv_stream_client_gone(s))
            return -1;                            /* stream_done cancels the job */
        if (waited >= srv_stream_keepalive_ms(s)) /* queued, or a slow step: a comment keeps it open */
            return srv_buf_printf(out, ": keep-alive\n\n") ? -1 : 0;
        pthread_mutex_lock(&j->lock);
    }
    int rc = 0;
    for (; g->sent < j->n_pieces && !rc; g->sent++) {
        const size_t from = g->sent ? j->piece_end[g->sent - 1] : 0, to = j->piece_end[g->sent];
        rc = add_event(out, srv_oai_chunk(&g->head, false, j->text.p + from, to - from, NULL, usage_null));
    }
    const srv_finish finish = g->sent == j->n_pieces ? j->finish : SRV_FINISH_NONE;
    pthread_mutex_unlock(&j->lock);
    if (rc || finish == SRV_FINISH_NONE)
        return rc;
    if (finish == SRV_FINISH_CANCELLED)
        return -1;
    if (finish == SRV_FINISH_ERROR) { /* the status line is long gone: the error is an event */
        srv_error e;
        srv_fail(&e, j->shutdown ? 503 : 500, j->shutdown ? "server_shutting_down" : NULL, NULL, "%s", j->error);
        return add_event(out, srv_oai_error(&e)) ? -1 : 1;
    }
    const char *empty = g->head.kind == SRV_GEN_CHAT ? NULL : "";
    if (add_event(out, srv_oai_chunk(&g->head, false, empty, 0, srv_finish_name(finish), usage_null)))
        return -1;
    if (g->include_usage &&
        add_event(out,
                  srv_oai_usage_chunk(&g->head, srv_oai_usage(j->n_prompt, j->n_generated, j->n_cached))))
        return -1;
    return srv_buf_printf(out, "data: [DONE]\n\n") ? -1 : 1;
}

static void stream_done(void *ud)
{
    gen_stream *g = ud;
    pthread_mutex_lock(&g->job->lock);
    const bool running = g->job->finish == SRV_FINISH_NONE;
    pthread_mutex_unlock(&g->job->lock);
    if (running) /* the connection closed before the end: nobody will read the rest */
        srv_scheduler_cancel(g->app->sched, g->job);
    else if (g->session)
        count_session(g->app, g->job);
    srv_job_release(g->job);
    free(g);
}

void srv_generate(srv_app *app, srv_req *r, enum srv_gen_kind kind)
{
    /* The session a balancer hashed on: echoed, so that a client (or a test) sees it came through. */
    const char *sid = app->affinity_header ? srv_req_header(r, app->affinity_header) : NULL;
    const bool session = sid && *sid;
    if (session && strlen(sid) <= SESSION_MAX)
        srv_req_reply_header(r, app->affinity_header, sid);
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_gen_request g;
    srv_error e;
    if (srv_gen_request_parse(body, len, kind, &app->rules, &g, &e)) {
        srv_gen_request_free(&g);
        srv_respond_error(r, &e);
        return;
    }
    int32_t n;
    woolly_token *ids = prompt_tokens(app, &g, &n, &e);
    if (!ids) {
        srv_gen_request_free(&g);
        srv_respond_error(r, &e);
        return;
    }
    srv_job *j = make_job(app, ids, n, &g);
    const bool stream = g.stream, include_usage = g.include_usage;
    srv_gen_request_free(&g);
    if (!j) {
        send_error(r, 500, NULL, "out of memory");
        return;
    }
    if (srv_scheduler_submit(app->sched, j)) {
        srv_job_release(j);
        send_error(r, 503, "server_busy", "every slot is busy and the queue is full: retry later");
        return;
    }
    if (!stream) {
        respond_whole(app, r, j, kind);
        if (session)
            count_session(app, j);
        srv_job_release(j);
        return;
    }
    gen_stream *gs = calloc(1, sizeof *gs);
    if (!gs) {
        srv_scheduler_cancel(app->sched, j);
        srv_job_release(j);
        send_error(r, 500, NULL, "out of memory");
        return;
    }
    *gs = (gen_stream){.app = app, .job = j, .include_usage = include_usage, .session = session};
    srv_oai_head_init(&gs->head, kind, app->model_id);
    srv_respond_stream(r, stream_next, stream_done, gs); /* stream_done releases the job */
}
