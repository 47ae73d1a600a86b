#include "metrics.h"

#include <stdio.h>

static const char *const ENDPOINT_NAMES[SRV_EP_COUNT] = {
    "chat_completions", "completions", "models", "health", "tokenize", "detokenize", "metrics", "other",
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

void srv_metrics_step(srv_metrics *m, int32_t n_gen)
{
    pthread_mutex_lock(&m->lock);
    m->steps++;
    m->generation_steps += n_gen > 0;
    pthread_mutex_unlock(&m->lock);
}

int srv_metrics_render(srv_metrics *m, int slots_total, int slots_busy, int queued, srv_buf *o)
{
    pthread_mutex_lock(&m->lock);
    const srv_metrics c = *m; /* a consistent copy; the lock member is not used */
    pthread_mutex_unlock(&m->lock);
    int rc = srv_buf_printf(o, "# HELP woolly_requests_total HTTP requests by endpoint and response status.\n"
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
        {"woolly_queue_depth", "gauge", "Requests waiting for a free slot.", (double)queued},
        {"woolly_slots_busy", "gauge", "Slots running a request.", (double)slots_busy},
        {"woolly_slots_total", "gauge", "Slots (parallel requests).", (double)slots_total},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        rc |= srv_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", rows[i].name, rows[i].help,
                             rows[i].name, rows[i].type, rows[i].name, rows[i].value);
    return rc ? -1 : 0;
}
