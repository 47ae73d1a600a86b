#include "metrics.h"

#include <stdio.h>
#include <string.h>

static const char *const ENDPOINT_NAMES[SRV_EP_COUNT] = {
    "chat_completions", "completions", "models",     "health", "tokenize",
    "detokenize",       "metrics",     "embeddings", "other",
};

static const int STATUS_CODES[SRV_STATUS_COUNT] = {
#define SRV_STATUS_CODE(code) code,
    SRV_STATUSES(SRV_STATUS_CODE)
#undef SRV_STATUS_CODE
        0,
};

void srv_metrics_init(srv_metrics *m)
{
    *m = (srv_metrics){0};
    pthread_mutex_init(&m->lock, NULL);
}

/* A label value as the text format wants it: backslash, double quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *v)
{
    size_t n = 0;
    for (; v && *v && n + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n')
            out[n++] = '\\';
        out[n++] = *v == '\n' ? 'n' : *v;
    }
    out[n] = 0;
}

void srv_metrics_identity(srv_metrics *m, const char *model, const char *replica)
{
    label_value(m->model, sizeof m->model, model);
    label_value(m->replica, sizeof m->replica, replica);
}

void srv_metrics_session(srv_metrics *m, int cached)
{
    pthread_mutex_lock(&m->lock);
    m->session_requests++;
    m->session_cached += cached ? 1 : 0;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_destroy(srv_metrics *m)
{
    pthread_mutex_destroy(&m->lock);
}

void srv_metrics_request(srv_metrics *m, enum srv_endpoint ep, int status)
{
    int k = SRV_STATUS_OTHER;
    for (int i = 0; i < SRV_STATUS_OTHER; i++)
        if (STATUS_CODES[i] == status)
            k = i;
    pthread_mutex_lock(&m->lock);
    m->requests[ep][k]++;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_job(srv_metrics *m, int32_t prompt, int32_t cached, int32_t completion, int cancelled)
{
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += (uint64_t)prompt;
    m->cached_tokens += (uint64_t)cached;
    m->completion_tokens += (uint64_t)completion;
    m->cancelled += cancelled ? 1 : 0;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_engine(srv_metrics *m, int32_t n_tokens, double seconds, int prompt)
{
    pthread_mutex_lock(&m->lock);
    if (prompt) {
        m->prompt_evaluated += (uint64_t)n_tokens;
        m->prompt_seconds += seconds;
    } else {
        m->generation_evaluated += (uint64_t)n_tokens;
        m->generation_seconds += seconds;
    }
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_draft(srv_metrics *m, int32_t drafted, int32_t accepted)
{
    pthread_mutex_lock(&m->lock);
    m->speculative = true;
    m->drafted += (uint64_t)drafted;
    m->accepted += (uint64_t)accepted;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_draft_passes(srv_metrics *m, int32_t passes)
{
    pthread_mutex_lock(&m->lock);
    m->draft_passes += (uint64_t)passes;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_step(srv_metrics *m, int32_t n_gen)
{
    pthread_mutex_lock(&m->lock);
    m->steps++;
    m->generation_steps += n_gen > 0;
    pthread_mutex_unlock(&m->lock);
}

int srv_metrics_render(srv_metrics *m, const srv_metrics_gauges *g, srv_buf *o)
{
    pthread_mutex_lock(&m->lock);
    const srv_metrics c = *m; /* a consistent copy; the lock member is not used */
    pthread_mutex_unlock(&m->lock);
    static const char *const STATES[] = {"loading", "ready", "draining"};
    int rc = srv_buf_printf(o,
                            "# HELP woolly_server_info The replica: its model and name (host:port by default); "
                            "join on it by instance.\n"
                            "# TYPE woolly_server_info gauge\n"
                            "woolly_server_info{model=\"%s\",replica=\"%s\"} 1\n"
                            "# HELP woolly_server_state The replica's state (as /health says it): 1 for the "
                            "current one.\n"
                            "# TYPE woolly_server_state gauge\n",
                            c.model, c.replica);
    for (int i = 0; i < 3; i++)
        rc |= srv_buf_printf(o, "woolly_server_state{state=\"%s\"} %d\n", STATES[i], g->state == i);
    rc |= srv_buf_printf(o, "# HELP woolly_requests_total HTTP requests by endpoint and response status.\n"
                               "# TYPE woolly_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int s = 0; s < SRV_STATUS_COUNT; s++)
            if (c.requests[e][s]) {
                char status[8] = "other";
                if (STATUS_CODES[s])
                    snprintf(status, sizeof status, "%d", STATUS_CODES[s]);
                rc |= srv_buf_printf(o, "woolly_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n",
                                     ENDPOINT_NAMES[e], status, (unsigned long long)c.requests[e][s]);
            }
    const struct {
        const char *name, *type, *help;
        double value;
    } rows[] = {
        {"woolly_prompt_tokens_total", "counter", "Prompt tokens of the generation requests run (tokens in).",
         (double)c.prompt_tokens},
        {"woolly_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
         (double)c.cached_tokens},
        {"woolly_prompt_tokens_evaluated_total", "counter",
         "Prompt tokens the engine evaluated (those not reused or copied from a slot's cache).",
         (double)c.prompt_evaluated},
        {"woolly_completion_tokens_total", "counter", "Tokens generated (tokens out).",
         (double)c.completion_tokens},
        {"woolly_requests_cancelled_total", "counter", "Generations cancelled because the client went away.",
         (double)c.cancelled},
        {"woolly_prompt_seconds_total", "counter", "Engine time spent evaluating prompts.", c.prompt_seconds},
        {"woolly_generation_seconds_total", "counter", "Engine time spent evaluating generated tokens.",
         c.generation_seconds},
        {"woolly_prompt_tokens_per_second", "gauge", "Prompt evaluation rate over the engine's busy time.",
         c.prompt_seconds > 0 ? (double)c.prompt_evaluated / c.prompt_seconds : 0.0},
        {"woolly_generation_tokens_per_second", "gauge", "Generation rate over the engine's busy time.",
         c.generation_seconds > 0 ? (double)c.generation_evaluated / c.generation_seconds : 0.0},
        {"woolly_engine_steps_total", "counter",
         "Forward passes of the engine: each evaluates the tokens of every busy slot as one batch.",
         (double)c.steps},
        {"woolly_generation_steps_total", "counter",
         "Forward passes with generated tokens: woolly_completion_tokens_total over this is the mean number "
         "of requests decoding together.",
         (double)c.generation_steps},
        {"woolly_session_requests_total", "counter",
         "Generation requests that named their session in the affinity header.", (double)c.session_requests},
        {"woolly_session_cache_hits_total", "counter",
         "Of those, the ones whose prompt began with tokens found in a slot's cache (the balancer sent the "
         "session back to this replica).",
         (double)c.session_cached},
        {"woolly_connections_cut_total", "counter",
         "Connections closed because their request head was not complete in time.", (double)g->heads_cut},
        {"woolly_queue_depth", "gauge", "Requests waiting for a free slot.", (double)g->queued},
        {"woolly_slots_busy", "gauge", "Slots running a request.", (double)g->slots_busy},
        {"woolly_slots_total", "gauge", "Slots (parallel requests).", (double)g->slots_total},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        rc |= srv_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", rows[i].name, rows[i].help,
                             rows[i].name, rows[i].type, rows[i].name, rows[i].value);
    if (c.speculative)
        rc |= srv_buf_printf(o,
                             "# HELP woolly_draft_tokens_total Speculative decoding: guessed tokens the model "
                             "checked (from --draft or --lookup).\n"
                             "# TYPE woolly_draft_tokens_total counter\nwoolly_draft_tokens_total %llu\n"
                             "# HELP woolly_draft_tokens_accepted_total Of those, the ones kept (the model "
                             "sampled them itself).\n"
                             "# TYPE woolly_draft_tokens_accepted_total counter\n"
                             "woolly_draft_tokens_accepted_total %llu\n",
                             (unsigned long long)c.drafted, (unsigned long long)c.accepted);
    if (c.speculative)
        rc |= srv_buf_printf(o,
                             "# HELP woolly_draft_passes_total Speculative decoding: forward passes of the "
                             "--draft model (each one batch of every drafting slot's tokens).\n"
                             "# TYPE woolly_draft_passes_total counter\nwoolly_draft_passes_total %llu\n",
                             (unsigned long long)c.draft_passes);
    return rc ? -1 : 0;
}
