#include "server.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "context.h"
#include "kv_cache.h"
#include "model.h"
#include "routes.h"

/* How long closing waits for the connection threads to send the error that ends their requests. */
enum { MAX_DEFAULT_PARALLEL = 4, FLUSH_MS = 3000 };

struct woolly_server {
    woolly_server_config cfg;
    srv_metrics metrics;
    srv_scheduler *sched;
    srv_app app;
    srv_http *http;
    int parallel;
    woolly_chat_format chat; /* how chat requests are rendered */
};

woolly_server_config woolly_server_default_config(void)
{
    return (woolly_server_config){
        .host = "127.0.0.1",
        .port = 8080,
        .parallel = 0,
        .queue = 32,
        .ctx = woolly_context_default_params(),
        .max_body = 1 << 20,
        .max_header = 64 << 10,
        .max_tokens = 0,
        .timeout_s = 60,
        .head_timeout_s = 10,
        .max_connections = 128,
        .max_per_address = 32,
        .affinity_header = "X-Session-Id",
        .defaults = woolly_sampler_default_params(),
        .chat_family = -1,
        .draft_max = 8,
    };
}

int woolly_server_default_parallel(const woolly_model *m, const woolly_context_params *cp)
{
    const woolly_config *c = &m->cfg;
    const int64_t n_ctx = cp->n_ctx ? cp->n_ctx : woolly_default_n_ctx(m, cp->kv_type, 1);
    const int64_t nb = cp->n_batch ? (cp->n_batch < n_ctx ? cp->n_batch : n_ctx) : 512;
    const int64_t q = (int64_t)c->n_head * c->head_dim, kv = (int64_t)c->n_head_kv * c->head_dim;
    /* The slots share one context: one run state for a batch, a KV cache and a logits row per slot. */
    const double shared = 4.0 * (double)nb * (double)(3 * c->n_embd + 2 * q + 2 * kv + 2 * c->n_ff);
    const double per_slot = (double)woolly_kv_cache_bytes(woolly_kv_wtype(cp->kv_type), n_ctx, c->n_layer,
                                                          c->n_head_kv, c->head_dim) +
                            4.0 * c->n_vocab;
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int n = MAX_DEFAULT_PARALLEL;
    if (pages > 0 && page > 0) {
        const double fit = ((double)pages * (double)page / 2.0 - shared) / per_slot;
        n = fit < n ? (int)fit : n;
    }
    return n > 0 ? n : 1;
}

woolly_server *woolly_server_listen(const woolly_server_config *c, woolly_error *err)
{
    woolly_server *s = calloc(1, sizeof *s);
    if (!s) {
        woolly_fail(err, "out of memory");
        return NULL;
    }
    s->cfg = *c;
    srv_metrics_init(&s->metrics);
    s->app = (srv_app){
        .model_id = c->model_id,
        .api_key = c->api_key && *c->api_key ? c->api_key : NULL,
        .affinity_header = c->affinity_header && *c->affinity_header ? c->affinity_header : NULL,
        .metrics = &s->metrics,
    };
    atomic_init(&s->app.state, SRV_LOADING);
    const srv_http_config hc = {.host = c->host,
                                .port = c->port,
                                .max_body = c->max_body,
                                .max_header = c->max_header,
                                .timeout_s = c->timeout_s,
                                .head_timeout_s = c->head_timeout_s,
                                .max_connections = c->max_connections,
                                .max_per_address = c->max_per_address,
                                .replica = c->replica && *c->replica ? c->replica : NULL};
    if (!(s->http = srv_http_start(&hc, srv_app_handle, &s->app, err))) {
        woolly_server_close(s);
        return NULL;
    }
    s->app.http = s->http;
    char replica[192];
    if (c->replica && *c->replica) {
        snprintf(replica, sizeof replica, "%s", c->replica);
    } else {
        char host[128] = "localhost";
        gethostname(host, sizeof host - 1);
        snprintf(replica, sizeof replica, "%s:%d", host, srv_http_port(s->http));
    }
    srv_metrics_identity(&s->metrics, c->model_id, replica);
    return s;
}

int woolly_server_start(woolly_server *s, const woolly_server_config *c, woolly_error *err)
{
    woolly_model *m = c->model;
    if (!m || !m->tok)
        return woolly_fail(err, "the server needs a model with a usable tokenizer%s%s", m ? ": " : "",
                           m ? m->tok_err.msg : "");
    const int unknown = woolly_chat_format_open_model(&s->chat, m, c->chat_template, c->chat_family,
                                                      "woolly serve");
    if (c->chat_template && !s->chat.jinja) /* a template given on purpose is not replaced by a built-in */
        return woolly_fail(err, "the chat template given cannot be rendered: %s", s->chat.jinja_error);
    if (unknown)
        fprintf(stderr,
                "woolly serve: warning: the model's chat template is not one Woolly recognizes; chat requests "
                "get a 400 naming --chat-template (%s); completions work\n",
                woolly_chat_family_choices());
    if (c->n_bias < 0 || c->n_bias > SRV_MAX_LOGIT_BIAS)
        return woolly_fail(err, "the default logit biases: %d tokens, at most %d", (int)c->n_bias,
                           SRV_MAX_LOGIT_BIAS);
    for (int32_t i = 0; i < c->n_bias; i++) /* the request's range; the sampler below checks the rest */
        if (!(c->bias[i] >= -100.0f && c->bias[i] <= 100.0f))
            return woolly_fail(err, "the default logit bias of token %d is %g, outside [-100, 100]",
                               (int)c->bias_ids[i], (double)c->bias[i]);
    woolly_sampler *probe = woolly_sampler_open(m, &c->defaults);
    const int refused = !probe || woolly_sampler_set_logit_bias(probe, c->bias_ids, c->bias, c->n_bias);
    woolly_sampler_close(probe);
    if (refused) /* a token the vocabulary lacks, or given twice: refused now rather than in every request */
        return woolly_fail(err, "the default sampling parameters: %s", woolly_last_error());
    s->parallel = c->parallel > 0 ? c->parallel : woolly_server_default_parallel(m, &c->ctx);
    const srv_scheduler_config sc = {.n_slots = s->parallel,
                                     .queue_cap = c->queue,
                                     .ctx = c->ctx,
                                     .draft = c->draft,
                                     .lookup = c->lookup,
                                     .draft_max = c->draft_max,
                                     .draft_fixed = c->draft_fixed};
    if (!(s->sched = srv_scheduler_open(m, &sc, &s->metrics, err)))
        return -1;
    const int32_t n_ctx = srv_scheduler_n_ctx(s->sched);
    srv_app *a = &s->app;
    a->model = m;
    a->created = (long long)time(NULL);
    /* A prompt of token ids costs about 48 bytes a token in the JSON tree: a full context's worth is
     * allowed beside the cost bound of the body's size. */
    a->default_bias.n = c->n_bias;
    if (c->n_bias > 0) {
        memcpy(a->default_bias.id, c->bias_ids, sizeof *c->bias_ids * (size_t)c->n_bias);
        memcpy(a->default_bias.bias, c->bias, sizeof *c->bias * (size_t)c->n_bias);
    }
    a->rules = (srv_gen_rules){.model_id = s->cfg.model_id,
                               .defaults = c->defaults,
                               .default_bias = c->n_bias > 0 ? &a->default_bias : NULL,
                               .n_vocab = woolly_model_n_vocab(m),
                               .max_tokens_limit = c->max_tokens > 0 ? c->max_tokens : n_ctx,
                               .json_room = (size_t)64 * (size_t)n_ctx,
                               .chat = &s->chat};
    a->chat_bos = !s->chat.bos_in_text && woolly_model_adds_bos(m);
    a->fixed_seed = c->fixed_seed;
    a->context_shift = c->context_shift;
    a->speculative = c->draft || c->lookup > 0;
    a->sched = s->sched;
    atomic_store_explicit(&a->state, SRV_READY, memory_order_release);
    return 0;
}

woolly_server *woolly_server_open(const woolly_server_config *c, woolly_error *err)
{
    woolly_server *s = woolly_server_listen(c, err);
    if (s && woolly_server_start(s, c, err)) {
        woolly_server_close(s);
        return NULL;
    }
    return s;
}

void woolly_server_drain(woolly_server *s)
{
    int loading = SRV_LOADING, ready = SRV_READY;
    if (!atomic_compare_exchange_strong(&s->app.state, &ready, SRV_DRAINING))
        atomic_compare_exchange_strong(&s->app.state, &loading, SRV_DRAINING);
    srv_http_drain(s->http);
}

int woolly_server_in_flight(const woolly_server *s)
{
    return srv_http_in_flight(s->http);
}

int woolly_server_port(const woolly_server *s)
{
    return srv_http_port(s->http);
}

int woolly_server_parallel(const woolly_server *s)
{
    return s->parallel;
}

int32_t woolly_server_n_ctx(const woolly_server *s)
{
    return srv_scheduler_n_ctx(s->sched);
}

void woolly_server_close(woolly_server *s)
{
    if (!s)
        return;
    /* No new connections; the running requests end (their waiting threads wake with an error); then the
     * connections close and their threads are joined; only then can the jobs' memory go. */
    if (s->http)
        srv_http_drain(s->http);
    if (s->sched)
        srv_scheduler_shutdown(s->sched);
    /* The waiting connection threads now write their error (a 503, or an error event ending a stream):
     * stopping the daemon at once would cut them mid-write, and their clients would see a broken
     * response instead of an error. A client that does not read is not waited for long. */
    for (int waited = 0; s->http && srv_http_in_flight(s->http) > 0 && waited < FLUSH_MS; waited += 10)
        usleep(10000);
    srv_http_stop(s->http);
    srv_scheduler_close(s->sched);
    srv_metrics_destroy(&s->metrics);
    woolly_chat_format_close(&s->chat);
    free(s);
}
