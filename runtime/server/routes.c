#include "routes.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "embeddings.h"
#include "json_fields.h"
#include "oai.h"
#include "text.h"

bool srv_key_matches(const char *authorization, const char *key)
{
    const char *given = "";
    if (authorization && !strncasecmp(authorization, "Bearer ", 7))
        given = authorization + 7;
    const size_t n_given = strlen(given), n_key = strlen(key);
    unsigned char diff = n_given != n_key;
    for (size_t i = 0; i < n_key; i++) /* every byte of the key, whatever was given */
        diff |= (unsigned char)(key[i] ^ (i < n_given ? given[i] : 0));
    return diff == 0;
}

static enum srv_state state_of(srv_app *app)
{
    return (enum srv_state)atomic_load_explicit(&app->state, memory_order_acquire);
}

/* Open to all (no key): load balancers and orchestrators probe it. 200 only when requests are taken. */
static void health(srv_app *app, srv_req *r)
{
    const enum srv_state state = state_of(app);
    if (state == SRV_LOADING) {
        srv_respond_json(r, 503, json_pack("{s:s}", "status", "loading"), NULL, NULL);
        return;
    }
    const srv_scheduler_status st = srv_scheduler_state(app->sched);
    const bool ready = state == SRV_READY;
    srv_respond_json(r, ready ? 200 : 503,
                     json_pack("{s:s, s:i, s:i, s:i, s:i}", "status", ready ? "ok" : "draining", "slots_total",
                               st.slots, "slots_busy", st.busy, "slots_idle", st.slots - st.busy, "queue",
                               st.queued),
                     NULL, NULL);
}

static void metrics(srv_app *app, srv_req *r)
{
    const enum srv_state state = state_of(app);
    srv_metrics_gauges g = {.state = state, .heads_cut = srv_http_heads_cut(app->http)};
    if (state != SRV_LOADING) {
        const srv_scheduler_status st = srv_scheduler_state(app->sched);
        g.slots_total = st.slots;
        g.slots_busy = st.busy;
        g.queued = st.queued;
    }
    srv_buf text = {0};
    if (srv_metrics_render(app->metrics, &g, &text)) {
        srv_buf_free(&text);
        return;
    }
    srv_respond_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", &text);
}

static void models(srv_app *app, srv_req *r, const char *id)
{
    if (!id) {
        srv_respond_json(r, 200, srv_oai_model_list(app->model_id, app->created), NULL, NULL);
        return;
    }
    if (strcmp(id, app->model_id)) {
        srv_error e;
        srv_fail(&e, 404, "model_not_found", "model",
                 "the model '%s' does not exist: this server serves '%s'", id, app->model_id);
        srv_respond_error(r, &e);
        return;
    }
    srv_respond_json(r, 200, srv_oai_model(app->model_id, app->created), NULL, NULL);
}

/* POST /tokenize {"content": TEXT, "add_special": false, "parse_special": true} -> {"tokens": [...]}. */
static void tokenize(srv_app *app, srv_req *r)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_error e;
    json_t *o = srv_json_parse_object(body, len, app->rules.json_room, &e);
    const char *text = NULL;
    size_t n_text = 0;
    bool add_special = false, parse_special = true;
    woolly_token *ids = NULL;
    if (!o || srv_json_string(o, "content", &text, &n_text, &e) < 0 ||
        srv_json_bool(o, "add_special", &add_special, &e) < 0 ||
        srv_json_bool(o, "parse_special", &parse_special, &e) < 0)
        goto fail;
    if (!text) {
        srv_fail(&e, 400, "missing_field", "content", "'content' is required");
        goto fail;
    }
    const int32_t cap = (int32_t)n_text + 8; /* bodies are far below 2 GiB */
    if (!(ids = malloc(sizeof *ids * (size_t)cap))) {
        srv_fail(&e, 500, NULL, NULL, "out of memory");
        goto fail;
    }
    const bool bos = add_special && woolly_model_adds_bos(app->model);
    int32_t n = woolly_model_tokenize(app->model, text, n_text, bos, parse_special, ids, cap);
    if (n > cap) {
        woolly_token *more = realloc(ids, sizeof *ids * (size_t)n);
        if (!more) {
            srv_fail(&e, 500, NULL, NULL, "out of memory");
            goto fail;
        }
        ids = more;
        n = woolly_model_tokenize(app->model, text, n_text, bos, parse_special, ids, n);
    }
    if (n < 0) {
        srv_fail(&e, 500, NULL, NULL, "cannot tokenize: %s", woolly_last_error());
        goto fail;
    }
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    srv_respond_json(r, 200, json_pack("{s:o}", "tokens", arr), NULL, NULL);
    free(ids);
    json_decref(o);
    return;
fail:
    free(ids);
    json_decref(o);
    srv_respond_error(r, &e);
}

/* POST /detokenize {"tokens": [...]} -> {"content": TEXT}. */
static void detokenize(srv_app *app, srv_req *r)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_error e;
    json_t *o = srv_json_parse_object(body, len, app->rules.json_room, &e);
    woolly_token *ids = NULL;
    int32_t n = 0;
    char *text = NULL;
    if (!o)
        goto fail;
    const json_t *arr = json_object_get(o, "tokens");
    if (!json_is_array(arr)) {
        srv_fail(&e, 400, arr ? "invalid_type" : "missing_field", "tokens",
                 "'tokens' must be an array of token ids%s", arr ? "" : " (it is required)");
        goto fail;
    }
    if (srv_json_token_ids(arr, "tokens", woolly_model_n_vocab(app->model), &ids, &n, &e))
        goto fail;
    const int64_t need = n ? woolly_model_detokenize(app->model, ids, n, NULL, 0) : 0;
    if (need < 0 || !(text = malloc((size_t)need + 1))) {
        srv_fail(&e, 500, NULL, NULL, "cannot detokenize");
        goto fail;
    }
    if (n)
        woolly_model_detokenize(app->model, ids, n, text, (size_t)need + 1);
    srv_buf clean = {0};
    if (srv_buf_append_utf8(&clean, text, (size_t)need)) {
        srv_fail(&e, 500, NULL, NULL, "out of memory");
        goto fail;
    }
    srv_respond_json(r, 200, json_pack("{s:s%}", "content", clean.p ? clean.p : "", clean.len), NULL, NULL);
    srv_buf_free(&clean);
    free(text);
    free(ids);
    json_decref(o);
    return;
fail:
    free(text);
    free(ids);
    json_decref(o);
    srv_respond_error(r, &e);
}

typedef struct route {
    const char *path; /* a trailing '*' matches any rest */
    const char *method;
    enum srv_endpoint ep;
} route;

static const route ROUTES[] = {
    {"/v1/chat/completions", "POST", SRV_EP_CHAT}, {"/v1/completions", "POST", SRV_EP_COMPLETIONS},
    {"/v1/embeddings", "POST", SRV_EP_EMBEDDINGS}, {"/v1/models", "GET", SRV_EP_MODELS},
    {"/v1/models/*", "GET", SRV_EP_MODELS},        {"/health", "GET", SRV_EP_HEALTH},
    {"/tokenize", "POST", SRV_EP_TOKENIZE},        {"/detokenize", "POST", SRV_EP_DETOKENIZE},
    {"/metrics", "GET", SRV_EP_METRICS},
};

static const route *find_route(const char *path)
{
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        const char *p = ROUTES[i].path;
        const size_t n = strlen(p);
        if (p[n - 1] == '*' ? !strncmp(path, p, n - 1) && path[n - 1] : !strcmp(path, p))
            return &ROUTES[i];
    }
    return NULL;
}

static void dispatch(srv_app *app, srv_req *r, const route *rt)
{
    srv_error e;
    const char *path = srv_req_path(r), *method = srv_req_method(r);
    if (rt && rt->ep == SRV_EP_HEALTH && !strcmp(method, "GET")) {
        health(app, r);
        return;
    }
    if (app->api_key && !srv_key_matches(srv_req_header(r, "Authorization"), app->api_key)) {
        srv_fail(&e, 401, "invalid_api_key", NULL,
                 "a valid API key is required: send the header 'Authorization: Bearer KEY'");
        srv_respond_json(r, 401, srv_oai_error(&e), "WWW-Authenticate", "Bearer");
        return;
    }
    if (!rt) {
        srv_fail(&e, 404, "not_found", NULL, "there is no endpoint %s %s", method, path);
        srv_respond_error(r, &e);
        return;
    }
    if (strcmp(method, rt->method)) {
        srv_fail(&e, 405, "method_not_allowed", NULL, "%s takes %s, not %s", rt->path, rt->method, method);
        srv_respond_json(r, 405, srv_oai_error(&e), "Allow", rt->method);
        return;
    }
    if (srv_req_body_too_large(r)) {
        srv_fail(&e, 413, "request_too_large", NULL,
                 "the request body is larger than this server's limit of "
                 "%zu bytes",
                 srv_req_max_body(r));
        srv_respond_error(r, &e);
        return;
    }
    const enum srv_state state = state_of(app);
    if (state == SRV_LOADING && rt->ep != SRV_EP_METRICS) {
        srv_fail(&e, 503, "model_loading", NULL, "the model is loading: retry in a moment");
        srv_respond_error(r, &e);
        return;
    }
    const bool generation =
        rt->ep == SRV_EP_CHAT || rt->ep == SRV_EP_COMPLETIONS || rt->ep == SRV_EP_EMBEDDINGS;
    if (state == SRV_DRAINING && generation) { /* the balancer sends it to another replica */
        srv_fail(&e, 503, "server_draining", NULL,
                 "this server is shutting down and takes no new requests: retry on another");
        srv_respond_error(r, &e);
        return;
    }
    switch (rt->ep) {
    case SRV_EP_CHAT:
        srv_generate(app, r, SRV_GEN_CHAT);
        break;
    case SRV_EP_COMPLETIONS:
        srv_generate(app, r, SRV_GEN_COMPLETION);
        break;
    case SRV_EP_EMBEDDINGS:
        srv_embeddings(app, r);
        break;
    case SRV_EP_MODELS:
        models(app, r, rt->path[strlen(rt->path) - 1] == '*' ? path + strlen(rt->path) - 1 : NULL);
        break;
    case SRV_EP_TOKENIZE:
        tokenize(app, r);
        break;
    case SRV_EP_DETOKENIZE:
        detokenize(app, r);
        break;
    case SRV_EP_METRICS:
        metrics(app, r);
        break;
    default:
        break;
    }
}

void srv_app_handle(void *ud, srv_req *r)
{
    srv_app *app = ud;
    const route *rt = find_route(srv_req_path(r));
    dispatch(app, r, rt);
    srv_metrics_request(app->metrics, rt ? rt->ep : SRV_EP_OTHER, srv_req_status(r));
}
