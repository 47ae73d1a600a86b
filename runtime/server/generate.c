/* POST /v1/chat/completions and /v1/completions: parse the request, tokenize its prompt, queue a job,
 * then either wait for the whole text or stream it as server-sent events, one event per piece. While
 * waiting, the connection thread watches its socket: a client that goes away cancels its job. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job.h"
#include "logprobs.h"
#include "model.h"
#include "oai.h"
#include "routes.h"
#include "tool_calls.h"

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

/* The jobs of a request: one per choice, the first leading. */
typedef struct gen_jobs {
    srv_job *j[SRV_MAX_CHOICES];
    int n;
    enum srv_gen_kind kind;
    bool logprobs;
    bool tools; /* the outputs may call tools: parsed in `syntax` */
    enum woolly_chat_tool_syntax syntax;
    bool parallel; /* several calls a turn (parallel_tool_calls) */
} gen_jobs;

static void jobs_release(gen_jobs *g)
{
    for (int i = g->n - 1; i >= 0; i--) /* followers first: each holds a reference to the leader */
        srv_job_release(g->j[i]);
    g->n = 0;
}

static void jobs_cancel(srv_app *app, gen_jobs *g)
{
    for (int i = 0; i < g->n; i++)
        srv_scheduler_cancel(app->sched, g->j[i]);
}

static char *dup_str(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* The prompt tokens a context shift keeps: what the request asks for (after BOS), or the system message
 * (its rendering's tokens the prompt begins with), or BOS alone. */
static int32_t keep_of(const srv_app *app, const srv_gen_request *g, const woolly_token *ids, int32_t n)
{
    const int32_t bos = n > 0 && woolly_token_bos(app->model) >= 0 && ids[0] == woolly_token_bos(app->model);
    if (g->n_keep == -1)
        return n;
    if (g->n_keep >= 0)
        return g->n_keep < n - bos ? bos + g->n_keep : n;
    if (!g->system)
        return bos;
    const size_t len = strlen(g->system);
    woolly_token *sys = malloc(sizeof *sys * (len + 8));
    int32_t k = 0;
    if (sys) {
        const int32_t m = woolly_model_tokenize(app->model, g->system, len, app->chat_bos, true, sys,
                                                (int32_t)len + 8);
        while (k < m && k < n && sys[k] == ids[k])
            k++;
        free(sys);
    }
    return k > bos ? k : bos;
}

/* One job per choice of a parsed request (the first takes its prompt tokens and stop strings, the
 * others copies). Choice i samples with seed + i: its own sequence of draws, reproducible with a
 * seed. 0, or -1 when out of memory (ids freed). */
static int make_jobs(const srv_app *app, woolly_token *ids, int32_t n, srv_gen_request *g, gen_jobs *out)
{
    *out = (gen_jobs){.kind = g->kind,
                      .logprobs = g->logprobs,
                      .tools = g->kind == SRV_GEN_CHAT && g->tools.choice != SRV_TOOL_CHOICE_NONE,
                      .syntax = g->tools.syntax,
                      .parallel = g->tools.parallel};
    const int32_t n_keep = keep_of(app, g, ids, n);
    const uint64_t seed = !g->seed_given && !app->fixed_seed ? fresh_seed() : g->sp.seed;
    for (int c = 0; c < g->n; c++) {
        woolly_token *own = ids;
        if (c > 0 && (own = malloc(sizeof *own * (size_t)n)))
            memcpy(own, ids, sizeof *own * (size_t)n);
        srv_job *j = own ? srv_job_new(own, n) : NULL;
        if (!j) { /* srv_job_new freed own: ids itself for the first */
            jobs_release(out);
            return -1;
        }
        out->j[out->n++] = j;
        if (c == 0) { /* the leader owns the grammar */
            j->grammar = g->grammar;
            g->grammar = NULL;
        }
        j->sp = g->sp;
        j->sp.seed = seed + (uint64_t)c;
        j->bias = g->bias;
        j->max_tokens = g->max_tokens;
        j->ignore_eos = g->ignore_eos;
        j->context_shift = app->context_shift;
        j->n_keep = n_keep;
        j->logprobs = g->logprobs;
        j->top_logprobs = g->top_logprobs;
        j->choice = c;
        if (out->tools)
            j->n_spelled = srv_tool_marker_tokens(out->syntax, app->model->tok, j->spelled, SRV_MAX_SPELLED);
        for (int i = 0; i < g->n_stop; i++)
            if ((j->stop[j->n_stop] = dup_str(g->stop[i])))
                j->n_stop++;
        if (j->n_stop < g->n_stop) {
            jobs_release(out);
            return -1;
        }
        if (c > 0) { /* a follower borrows it only now that it holds its leader */
            j->leader = srv_job_ref(out->j[0]);
            j->grammar = out->j[0]->grammar;
        }
    }
    out->j[0]->n_choices = g->n;
    return 0;
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

/* Usage of a finished request: its prompt once, the completions of all its choices. */
static json_t *jobs_usage(const gen_jobs *g)
{
    int32_t completion = 0;
    for (int i = 0; i < g->n; i++)
        completion += g->j[i]->n_generated;
    return srv_oai_usage(g->j[0]->n_prompt, completion, g->j[0]->n_cached);
}

/* With speculative decoding, the response's "timings" (llama.cpp's server's names): the guesses checked
 * and kept over all its choices. */
static void add_timings(const srv_app *app, const gen_jobs *g, json_t *o)
{
    if (!app->speculative || !o)
        return;
    long long drafted = 0, accepted = 0;
    for (int i = 0; i < g->n; i++) {
        drafted += g->j[i]->n_drafted;
        accepted += g->j[i]->n_accepted;
    }
    json_object_set_new(o, "timings", json_pack("{s:I,s:I}", "draft_n", (json_int_t)drafted, "draft_n_accepted",
                                                 (json_int_t)accepted));
}

/* The logprobs of tokens [from, to) of a job, in the request's form; NULL without logprobs. */
static json_t *logprobs_json(const srv_app *app, const gen_jobs *g, const srv_job *j, int32_t from,
                             int32_t to, size_t *offset)
{
    if (!g->logprobs)
        return NULL;
    const woolly_tokenizer *t = app->model->tok;
    if (from > to)
        from = to;
    return g->kind == SRV_GEN_CHAT ? srv_logprobs_chat(t, j->lp + from, to - from)
                                   : srv_logprobs_legacy(t, j->lp + from, to - from, offset);
}

/* Waits for every choice's whole text; the client's leaving cancels the jobs. */
static void respond_whole(srv_app *app, srv_req *r, gen_jobs *g)
{
    for (int i = 0; i < g->n; i++) {
        srv_job *j = g->j[i];
        pthread_mutex_lock(&j->lock);
        while (j->finish == SRV_FINISH_NONE) {
            srv_job_wait_locked(j, INT32_MAX, POLL_MS);
            if (j->finish == SRV_FINISH_NONE && srv_req_client_gone(r)) {
                pthread_mutex_unlock(&j->lock);
                jobs_cancel(app, g);
                srv_req_abort(r);
                return;
            }
        }
        pthread_mutex_unlock(&j->lock);
    }
    /* Done: the engine no longer writes to the jobs. */
    for (int i = 0; i < g->n; i++) {
        srv_job *j = g->j[i];
        if (j->shutdown) { /* nothing was sent yet: a balancer may retry it on another replica */
            send_error(r, 503, "server_shutting_down", j->error);
            return;
        }
        if (j->finish == SRV_FINISH_ERROR || j->finish == SRV_FINISH_CANCELLED) {
            send_error(r, 500, NULL,
                       j->finish == SRV_FINISH_ERROR ? j->error : "the generation was cancelled");
            return;
        }
    }
    srv_oai_head head;
    srv_oai_head_init(&head, g->kind, app->model_id);
    json_t *choices = json_array();
    for (int i = 0; i < g->n; i++) {
        srv_job *j = g->j[i];
        size_t offset = 0, content_end = 0;
        json_t *lp = logprobs_json(app, g, j, 0, j->n_lp, &offset);
        json_t *calls =
            g->tools ? srv_tool_calls_parse(g->syntax, j->text.p, j->text.len, g->parallel, &content_end)
                     : NULL;
        json_array_append_new(
            choices,
            calls ? srv_oai_choice_calls(i, j->text.p, content_end, calls, "tool_calls", lp)
                  : srv_oai_choice(g->kind, i, j->text.p, j->text.len, srv_finish_name(j->finish), lp));
    }
    json_t *resp = srv_oai_response(&head, choices, jobs_usage(g));
    add_timings(app, g, resp);
    srv_respond_json(r, 200, resp, NULL, NULL);
}

typedef struct gen_stream {
    srv_app *app;
    gen_jobs jobs;
    srv_oai_head head;
    bool include_usage;
    bool session;                   /* the request named its session: counted when done */
    bool opened;                    /* the opening chunks (a chat's role) are sent */
    int32_t sent[SRV_MAX_CHOICES];  /* pieces sent, per choice */
    bool closed[SRV_MAX_CHOICES];   /* its closing chunk is sent */
    size_t offset[SRV_MAX_CHOICES]; /* bytes of its tokens so far (the legacy text_offset) */
} gen_stream;

static int add_event(srv_buf *out, json_t *chunk)
{
    char *text = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    json_decref(chunk);
    const int rc = !text || srv_buf_printf(out, "data: %s\n\n", text) ? -1 : 0;
    free(text);
    return rc;
}

static int add_chunk(srv_buf *out, json_t *chunk, int index, json_t *logprobs)
{
    if (chunk)
        srv_oai_chunk_choice(chunk, index, logprobs);
    else
        json_decref(logprobs);
    return add_event(out, chunk);
}

/* With tools, text that may begin a call is held back until the choice is done; then it goes out as
 * the calls (one chunk with each call's id and name, one with its arguments) or as the content it was.
 * The held tokens' logprobs go with the first chunk after the hold. */
static int held_events(gen_stream *g, int c, srv_job *j, srv_buf *out)
{
    const size_t from = g->sent[c] ? j->piece_end[g->sent[c] - 1] : 0;
    json_t *lp = logprobs_json(g->app, &g->jobs, j, g->sent[c], j->n_lp, &g->offset[c]);
    g->sent[c] = j->n_pieces;
    size_t content_end = 0;
    json_t *calls =
        srv_tool_calls_parse(g->jobs.syntax, j->text.p, j->text.len, g->jobs.parallel, &content_end);
    const size_t to = calls ? content_end : j->text.len;
    int rc = 0;
    if (to > from || (!calls && lp)) {
        rc = add_chunk(
            out, srv_oai_chunk(&g->head, false, j->text.p + from, to - from, NULL, g->include_usage), c, lp);
        lp = NULL;
    }
    for (size_t k = 0; !rc && k < json_array_size(calls); k++) {
        const json_t *call = json_array_get(calls, k);
        const char *args = json_string_value(json_object_get(json_object_get(call, "function"), "arguments"));
        rc = add_chunk(out, srv_oai_chunk_call(&g->head, (int)k, call, true, NULL, 0, g->include_usage), c,
                       lp);
        lp = NULL;
        if (!rc)
            rc = add_chunk(
                out, srv_oai_chunk_call(&g->head, (int)k, call, false, args, strlen(args), g->include_usage),
                c, NULL);
    }
    json_decref(lp);
    const bool called = calls != NULL;
    json_decref(calls);
    return rc ? -1 : called;
}

/* Appends the events of choice c that are ready: its new pieces (each with its token's logprobs), and
 * its closing chunk when it is done. Returns 0, 1 when the stream must end now (an error event was
 * written), -1 to abort it. Sets *wrote when it appended anything. */
static int choice_events(gen_stream *g, int c, srv_buf *out, bool *wrote)
{
    srv_job *j = g->jobs.j[c];
    const bool usage_null = g->include_usage;
    int rc = 0;
    pthread_mutex_lock(&j->lock);
    const size_t content =
        g->jobs.tools ? srv_tool_calls_content_prefix(g->jobs.syntax, j->text.p, j->text.len) : j->text.len;
    for (; g->sent[c] < j->n_pieces && !rc && j->piece_end[g->sent[c]] <= content; g->sent[c]++) {
        const int32_t k = g->sent[c];
        const size_t from = k ? j->piece_end[k - 1] : 0, to = j->piece_end[k];
        /* Piece k is generated token k's; the piece of held text released at the end has no token. */
        json_t *lp = logprobs_json(g->app, &g->jobs, j, k, k < j->n_lp ? k + 1 : k, &g->offset[c]);
        rc = add_chunk(out, srv_oai_chunk(&g->head, false, j->text.p + from, to - from, NULL, usage_null), c,
                       lp);
        *wrote = true;
    }
    srv_finish finish = g->sent[c] == j->n_pieces || g->jobs.tools ? j->finish : SRV_FINISH_NONE;
    bool called = false;
    if (!rc && g->jobs.tools && (finish == SRV_FINISH_STOP || finish == SRV_FINISH_LENGTH)) {
        const int h = held_events(g, c, j, out);
        *wrote = true;
        rc = h < 0 ? -1 : 0;
        called = h == 1;
    }
    const bool shutdown = j->shutdown;
    char error[sizeof j->error];
    memcpy(error, j->error, sizeof error);
    pthread_mutex_unlock(&j->lock);
    if (rc || finish == SRV_FINISH_NONE)
        return rc;
    if (finish == SRV_FINISH_CANCELLED)
        return -1;
    *wrote = true;
    if (finish == SRV_FINISH_ERROR) { /* the status line is long gone: the error is an event */
        srv_error e;
        srv_fail(&e, shutdown ? 503 : 500, shutdown ? "server_shutting_down" : NULL, NULL, "%s", error);
        return add_event(out, srv_oai_error(&e)) ? -1 : 1;
    }
    g->closed[c] = true;
    const char *empty = g->head.kind == SRV_GEN_CHAT ? NULL : "";
    return add_chunk(
        out,
        srv_oai_chunk(&g->head, false, empty, 0, called ? "tool_calls" : srv_finish_name(finish), usage_null),
        c, NULL);
}

static int stream_next(void *ud, srv_stream *s, srv_buf *out)
{
    gen_stream *g = ud;
    const bool usage_null = g->include_usage;
    if (!g->opened) {
        g->opened = true;
        int rc = 0;
        if (g->head.kind == SRV_GEN_CHAT)
            for (int c = 0; c < g->jobs.n && !rc; c++)
                rc = add_chunk(out, srv_oai_chunk(&g->head, true, "", 0, NULL, usage_null), c, NULL);
        if (rc || g->head.kind == SRV_GEN_CHAT)
            return rc;
    }
    srv_job *lead = g->jobs.j[0];
    for (int waited = 0;;) {
        pthread_mutex_lock(&lead->lock);
        const uint64_t seen = lead->events;
        pthread_mutex_unlock(&lead->lock);
        bool wrote = false, open = false;
        for (int c = 0; c < g->jobs.n; c++) {
            if (g->closed[c])
                continue;
            const int rc = choice_events(g, c, out, &wrote);
            if (rc)
                return rc;
            open |= !g->closed[c];
        }
        if (!open)
            break;
        if (wrote)
            return 0;
        pthread_mutex_lock(&lead->lock);
        const bool moved = srv_job_group_wait_locked(lead, seen, POLL_MS);
        pthread_mutex_unlock(&lead->lock);
        if (moved)
            continue;
        if (srv_stream_client_gone(s))
            return -1;                                         /* stream_done cancels the jobs */
        if ((waited += POLL_MS) >= srv_stream_keepalive_ms(s)) /* queued, or a slow step */
            return srv_buf_printf(out, ": keep-alive\n\n") ? -1 : 0;
    }
    if (g->include_usage) {
        json_t *chunk = srv_oai_usage_chunk(&g->head, jobs_usage(&g->jobs));
        add_timings(g->app, &g->jobs, chunk);
        if (add_event(out, chunk))
            return -1;
    }
    return srv_buf_printf(out, "data: [DONE]\n\n") ? -1 : 1;
}

static void stream_done(void *ud)
{
    gen_stream *g = ud;
    bool running = false;
    for (int c = 0; c < g->jobs.n; c++) {
        pthread_mutex_lock(&g->jobs.j[c]->lock);
        running |= g->jobs.j[c]->finish == SRV_FINISH_NONE;
        pthread_mutex_unlock(&g->jobs.j[c]->lock);
    }
    if (running) /* the connection closed before the end: nobody will read the rest */
        jobs_cancel(g->app, &g->jobs);
    else if (g->session)
        count_session(g->app, g->jobs.j[0]);
    jobs_release(&g->jobs);
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
    const int slots = srv_scheduler_state(app->sched).slots;
    if (g.n > slots) { /* the choices decode side by side, each in a slot of its own */
        srv_fail(&e, 400, "invalid_value", "n", "'n' is %d, more than this server's %d slots (--parallel)",
                 g.n, slots);
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
    gen_jobs jobs;
    const int rc = make_jobs(app, ids, n, &g, &jobs);
    const bool stream = g.stream, include_usage = g.include_usage;
    srv_gen_request_free(&g);
    if (rc) {
        send_error(r, 500, NULL, "out of memory");
        return;
    }
    if (srv_scheduler_submit_group(app->sched, jobs.j, jobs.n)) {
        jobs_release(&jobs);
        send_error(r, 503, "server_busy", "every slot is busy and the queue is full: retry later");
        return;
    }
    if (!stream) {
        respond_whole(app, r, &jobs);
        if (session)
            count_session(app, jobs.j[0]);
        jobs_release(&jobs);
        return;
    }
    gen_stream *gs = calloc(1, sizeof *gs);
    if (!gs) {
        jobs_cancel(app, &jobs);
        jobs_release(&jobs);
        send_error(r, 500, NULL, "out of memory");
        return;
    }
    gs->app = app;
    gs->jobs = jobs;
    gs->include_usage = include_usage;
    gs->session = session;
    srv_oai_head_init(&gs->head, kind, app->model_id);
    srv_respond_stream(r, stream_next, stream_done, gs); /* stream_done releases the jobs */
}
