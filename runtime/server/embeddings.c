#include "embeddings.h"

#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "oai.h"
#include "text.h"

enum { POLL_MS = 50 };

void srv_embed_request_free(srv_embed_request *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->len);
    *r = (srv_embed_request){0};
}

static int tokenize_text(const srv_app *app, const json_t *v, size_t at, woolly_token **ids, int32_t *n,
                         srv_error *err)
{
    const char *text = json_string_value(v);
    const size_t len = json_string_length(v);
    if (len == 0)
        return srv_fail(err, 400, "invalid_value", "input", "'input[%zu]' is an empty string", at);
    if (len > INT32_MAX - 8)
        return srv_fail(err, 400, "invalid_value", "input", "'input[%zu]' is too long", at);
    const bool bos = woolly_model_adds_bos(app->model);
    int32_t cap = (int32_t)len + 8;
    woolly_token *t = malloc(sizeof *t * (size_t)cap);
    if (!t)
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    int32_t got = woolly_model_tokenize(app->model, text, len, bos, false, t, cap);
    if (got > cap) {
        woolly_token *more = realloc(t, sizeof *t * (size_t)got);
        if (!more) {
            free(t);
            return srv_fail(err, 500, NULL, NULL, "out of memory");
        }
        t = more;
        got = woolly_model_tokenize(app->model, text, len, bos, false, t, got);
    }
    if (got < 0) {
        free(t);
        return srv_fail(err, 500, NULL, NULL, "cannot tokenize 'input[%zu]': %s", at, woolly_last_error());
    }
    *ids = t;
    *n = got;
    return 0;
}

/* Input i (a string or an array of token ids) into r->ids[i]. */
static int add_input(const srv_app *app, const json_t *v, size_t i, bool text, int32_t n_ctx,
                     srv_embed_request *r, srv_error *err)
{
    if (text ? !json_is_string(v) : !json_is_array(v))
        return srv_fail(err, 400, "invalid_type", "input",
                        "'input[%zu]' must be %s like the first item, not %s", i,
                        text ? "a string" : "a list of token ids", srv_json_type_name(v));
    woolly_token *ids = NULL;
    int32_t n = 0;
    if (text ? tokenize_text(app, v, i, &ids, &n, err)
             : srv_json_token_ids(v, "input", woolly_model_n_vocab(app->model), &ids, &n, err))
        return -1;
    r->ids[r->n] = ids;
    r->len[r->n++] = n;
    if (n == 0)
        return srv_fail(err, 400, "invalid_value", "input", "'input[%zu]' has no tokens", i);
    if (n > n_ctx)
        return srv_fail(err, 400, "context_length_exceeded", "input",
                        "this model's maximum context length is %d tokens, but 'input[%zu]' has %d tokens",
                        n_ctx, i, n);
    return 0;
}

static int parse_input(const srv_app *app, const json_t *body, int32_t n_ctx, srv_embed_request *r,
                       srv_error *err)
{
    const json_t *in = json_object_get(body, "input");
    if (!in || json_is_null(in))
        return srv_fail(err, 400, "missing_field", "input", "'input' is required");
    /* One input (a string, or a list of token ids), else a list of them. */
    const bool one = json_is_string(in) || (json_is_array(in) && json_is_integer(json_array_get(in, 0)));
    if (!json_is_string(in) && !json_is_array(in))
        return srv_fail(err, 400, "invalid_type", "input",
                        "invalid type for 'input': expected a string, a list of strings, a list of token ids "
                        "or a list of lists of token ids, got %s",
                        srv_json_type_name(in));
    const size_t count = one ? 1 : json_array_size(in);
    if (count == 0)
        return srv_fail(err, 400, "invalid_value", "input", "'input' is an empty list");
    if (count > SRV_MAX_EMBED_INPUTS)
        return srv_fail(err, 400, "invalid_value", "input", "'input' has %zu items; at most %d are allowed",
                        count, SRV_MAX_EMBED_INPUTS);
    const json_t *first = one ? in : json_array_get(in, 0);
    const bool text = json_is_string(first);
    if (!text && !json_is_array(first))
        return srv_fail(err, 400, "invalid_type", "input",
                        "'input[0]' must be a string or a list of token ids, not %s",
                        srv_json_type_name(first));
    r->ids = calloc(count, sizeof *r->ids);
    r->len = calloc(count, sizeof *r->len);
    if (!r->ids || !r->len)
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < count; i++)
        if (add_input(app, one ? in : json_array_get(in, i), i, text, n_ctx, r, err))
            return -1;
    return 0;
}

int srv_embed_request_parse(const srv_app *app, const char *body, size_t len, int32_t n_ctx,
                            srv_embed_request *r, srv_error *err)
{
    *r = (srv_embed_request){0};
    json_t *root = srv_json_parse_object(body, len, app->rules.json_room, err);
    if (!root)
        return -1;
    int rc = -1;
    const char *model = NULL, *format = NULL;
    long long dims = 0;
    int has_dims;
    if (srv_json_string(root, "model", &model, NULL, err) < 0 ||
        srv_json_string(root, "encoding_format", &format, NULL, err) < 0 ||
        (has_dims = srv_json_integer(root, "dimensions", 1, INT32_MAX, &dims, err)) < 0)
        goto done;
    if (model && strcmp(model, app->model_id)) {
        srv_fail(err, 404, "model_not_found", "model",
                 "the model '%s' does not exist: this server serves '%s'", model, app->model_id);
        goto done;
    }
    if (format && strcmp(format, "float") && strcmp(format, "base64")) {
        srv_fail(err, 400, "invalid_value", "encoding_format",
                 "'encoding_format' must be \"float\" or \"base64\", not \"%s\"", format);
        goto done;
    }
    r->base64 = format && !strcmp(format, "base64");
    const int32_t n_embd = woolly_model_n_embd(app->model);
    if (has_dims && dims != n_embd) { /* a shorter vector would need a model trained for it (Matryoshka) */
        srv_fail(err, 400, "unsupported_value", "dimensions",
                 "'dimensions' is %lld: this model's embeddings have %d dimensions", dims, (int)n_embd);
        goto done;
    }
    rc = parse_input(app, root, n_ctx, r, err);
done:
    json_decref(root);
    return rc;
}

int srv_base64(const unsigned char *b, size_t n, srv_buf *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
                           (i + 2 < n ? (unsigned)b[i + 2] : 0);
        const char q[4] = {A[v >> 18 & 63], A[v >> 12 & 63], i + 1 < n ? A[v >> 6 & 63] : '=',
                           i + 2 < n ? A[v & 63] : '='};
        if (srv_buf_append(out, q, 4))
            return -1;
    }
    return 0;
}

static json_t *vector_json(const float *v, int32_t n, bool base64)
{
    if (!base64) {
        json_t *a = json_array();
        for (int32_t i = 0; i < n; i++)
            json_array_append_new(a, json_real((double)v[i]));
        return a;
    }
    unsigned char *bytes = malloc((size_t)n * 4);
    srv_buf b = {0};
    json_t *s = NULL;
    if (bytes) {
        for (int32_t i = 0; i < n; i++) { /* little-endian, whatever this machine's order */
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++)
                bytes[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        if (!srv_base64(bytes, (size_t)n * 4, &b))
            s = json_stringn(b.p ? b.p : "", b.len);
    }
    free(bytes);
    srv_buf_free(&b);
    return s ? s : json_null();
}

static srv_job *embed_job(woolly_token *ids, int32_t n, int32_t n_embd)
{
    srv_job *j = srv_job_new(ids, n);
    if (!j)
        return NULL;
    j->embed = true;
    j->n_embd = n_embd;
    j->embd_sum = calloc((size_t)n_embd, sizeof *j->embd_sum);
    j->embd = calloc((size_t)n_embd, sizeof *j->embd);
    if (!j->embd_sum || !j->embd) {
        srv_job_release(j);
        return NULL;
    }
    return j;
}

/* Waits until j is done; false when the client went away (then the jobs are cancelled). */
static bool wait_done(srv_app *app, srv_req *r, srv_job *const *jobs, int n, int k)
{
    srv_job *j = jobs[k];
    pthread_mutex_lock(&j->lock);
    while (j->finish == SRV_FINISH_NONE) {
        srv_job_wait_locked(j, INT32_MAX, POLL_MS);
        if (j->finish == SRV_FINISH_NONE && srv_req_client_gone(r)) {
            pthread_mutex_unlock(&j->lock);
            for (int i = 0; i < n; i++)
                srv_scheduler_cancel(app->sched, jobs[i]);
            return false;
        }
    }
    pthread_mutex_unlock(&j->lock);
    return true;
}

void srv_embeddings(srv_app *app, srv_req *r)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_embed_request q;
    srv_error e;
    if (srv_embed_request_parse(app, body, len, srv_scheduler_n_ctx(app->sched), &q, &e)) {
        srv_embed_request_free(&q);
        srv_respond_error(r, &e);
        return;
    }
    const int32_t n_embd = woolly_model_n_embd(app->model);
    /* The inputs go to the slots in waves of at most one per slot: they evaluate side by side, and a
     * long list neither fills the queue nor keeps the other requests waiting behind all of it. */
    const int wave = srv_scheduler_state(app->sched).slots;
    json_t *data = json_array();
    long long tokens = 0;
    srv_job **jobs = calloc((size_t)wave, sizeof *jobs);
    if (!jobs) {
        srv_fail(&e, 500, NULL, NULL, "out of memory");
        goto fail;
    }
    for (int from = 0; from < q.n; from += wave) {
        const int n = q.n - from < wave ? q.n - from : wave;
        int made = 0;
        for (; made < n; made++) {
            jobs[made] = embed_job(q.ids[from + made], q.len[from + made], n_embd);
            q.ids[from + made] = NULL; /* the job owns it (and frees it on failure) */
            if (!jobs[made] || srv_scheduler_submit(app->sched, jobs[made]))
                break;
        }
        bool ok = made == n;
        if (!ok && jobs[made]) { /* made but not queued: the queue is full */
            srv_job_release(jobs[made]);
            srv_fail(&e, 503, "server_busy", NULL, "every slot is busy and the queue is full: retry later");
        } else if (!ok) {
            srv_fail(&e, 500, NULL, NULL, "out of memory");
        }
        bool gone = false;
        for (int k = 0; k < made && !gone; k++)
            gone = !wait_done(app, r, jobs, made, k);
        for (int k = 0; k < made && ok && !gone; k++) {
            srv_job *j = jobs[k];
            if (j->finish != SRV_FINISH_STOP) {
                ok = false;
                if (j->shutdown)
                    srv_fail(&e, 503, "server_shutting_down", NULL, "%s", j->error);
                else
                    srv_fail(&e, 500, NULL, NULL, "%s",
                             j->finish == SRV_FINISH_ERROR ? j->error : "the request was cancelled");
                break;
            }
            tokens += j->n_prompt;
            json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", from + k,
                                                  "embedding", vector_json(j->embd, n_embd, q.base64)));
        }
        if (!ok || gone)
            for (int k = 0; k < made; k++)
                srv_scheduler_cancel(app->sched, jobs[k]);
        for (int k = 0; k < made; k++)
            srv_job_release(jobs[k]);
        if (gone) {
            srv_req_abort(r);
            goto done;
        }
        if (!ok)
            goto fail;
    }
    srv_respond_json(r, 200,
                     json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model",
                               app->model_id, "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens",
                               (json_int_t)tokens),
                     NULL, NULL);
    data = NULL;
    goto done;
fail:
    srv_respond_error(r, &e);
done:
    json_decref(data);
    free(jobs);
    srv_embed_request_free(&q);
}
