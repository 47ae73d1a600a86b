#include "request.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "request_chat.h"

/* OpenAI's ranges; the extensions (top_k, min_p, repeat_penalty) take the sampler's. */
#define TEMP_MAX 2.0
#define PENALTY_MAX 2.0
#define REPEAT_PENALTY_MAX 100.0

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int add_stop(srv_gen_request *r, const json_t *s, size_t i, srv_error *err)
{
    if (!json_is_string(s))
        return srv_fail(err, 400, "invalid_type", "stop", "'stop[%zu]' must be a string, not %s", i,
                        srv_json_type_name(s));
    const size_t len = json_string_length(s);
    if (len > SRV_MAX_STOP_BYTES)
        return srv_fail(err, 400, "invalid_value", "stop",
                        "'stop[%zu]' is %zu bytes long; at most %d are allowed", i, len, SRV_MAX_STOP_BYTES);
    if (memchr(json_string_value(s), 0, len))
        return srv_fail(err, 400, "invalid_value", "stop", "'stop[%zu]' holds a NUL character", i);
    if (len == 0)
        return 0; /* an empty stop string would end every generation at once: it means nothing */
    if (!(r->stop[r->n_stop] = dup_n(json_string_value(s), len)))
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    r->n_stop++;
    return 0;
}

static int parse_stop(const json_t *body, srv_gen_request *r, srv_error *err)
{
    const json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        return add_stop(r, v, 0, err);
    if (!json_is_array(v))
        return srv_fail(err, 400, "invalid_type", "stop",
                        "invalid type for 'stop': expected a string or an array of strings, got %s",
                        srv_json_type_name(v));
    const size_t n = json_array_size(v);
    if (n > SRV_MAX_STOP)
        return srv_fail(err, 400, "invalid_value", "stop", "'stop' has %zu strings; at most %d are allowed",
                        n, SRV_MAX_STOP);
    for (size_t i = 0; i < n; i++)
        if (add_stop(r, json_array_get(v, i), i, err))
            return -1;
    return 0;
}

static int parse_sampling(const json_t *body, const srv_gen_rules *rules, srv_gen_request *r, srv_error *err)
{
    woolly_sampler_params *p = &r->sp;
    *p = rules->defaults;
    double x;
    long long i;
    int rc;
    if ((rc = srv_json_number(body, "temperature", 0.0, TEMP_MAX, &x, err)) < 0)
        return -1;
    if (rc)
        p->temp = (float)x;
    if ((rc = srv_json_number(body, "top_p", 0.0, 1.0, &x, err)) < 0)
        return -1;
    if (rc) /* 0 keeps only the most likely token; the sampler expresses that as the smallest mass */
        p->top_p = x > 0.0 ? (float)x : FLT_MIN;
    if ((rc = srv_json_integer(body, "top_k", 0, INT32_MAX, &i, err)) < 0)
        return -1;
    if (rc)
        p->top_k = (int32_t)i;
    if ((rc = srv_json_number(body, "min_p", 0.0, 1.0, &x, err)) < 0)
        return -1;
    if (rc)
        p->min_p = (float)x;
    if ((rc = srv_json_number(body, "presence_penalty", -PENALTY_MAX, PENALTY_MAX, &x, err)) < 0)
        return -1;
    if (rc)
        p->presence_penalty = (float)x;
    if ((rc = srv_json_number(body, "frequency_penalty", -PENALTY_MAX, PENALTY_MAX, &x, err)) < 0)
        return -1;
    if (rc)
        p->frequency_penalty = (float)x;
    if ((rc = srv_json_number(body, "repeat_penalty", 1e-6, REPEAT_PENALTY_MAX, &x, err)) < 0)
        return -1;
    if (rc)
        p->repeat_penalty = (float)x;
    if ((rc = srv_json_integer(body, "seed", INT64_MIN, INT64_MAX, &i, err)) < 0)
        return -1;
    if (rc) {
        p->seed = (uint64_t)i;
        r->seed_given = true;
    }
    return 0;
}

static int parse_max_tokens(const json_t *body, const srv_gen_rules *rules, srv_gen_request *r,
                            srv_error *err)
{
    /* max_completion_tokens is the API's newer name; it wins when both are given. Without either (or
     * with null) the server's limit is the request's: --max-tokens caps every request. */
    static const char *const KEYS[] = {"max_tokens", "max_completion_tokens"};
    r->max_tokens = rules->max_tokens_limit;
    for (int k = 0; k < 2; k++) {
        long long n;
        const int rc = srv_json_integer(body, KEYS[k], 1, INT64_MAX, &n, err);
        if (rc < 0)
            return -1;
        if (!rc)
            continue;
        if (n > rules->max_tokens_limit)
            return srv_fail(err, 400, "invalid_value", KEYS[k],
                            "'%s' is %lld, more than this server's limit of %d tokens per request", KEYS[k],
                            n, (int)rules->max_tokens_limit);
        r->max_tokens = (int32_t)n;
    }
    return 0;
}

/* logit_bias: an object of token ids (as the keys' decimal text) to biases in [-100, 100]. */
static int parse_logit_bias(const json_t *body, const srv_gen_rules *rules, srv_gen_request *r,
                            srv_error *err)
{
    const json_t *lb = json_object_get(body, "logit_bias");
    if (!lb || json_is_null(lb)) {
        if (rules->default_bias)
            r->bias = *rules->default_bias;
        return 0;
    }
    if (!json_is_object(lb))
        return srv_fail(err, 400, "invalid_type", "logit_bias",
                        "invalid type for 'logit_bias': expected an object of token ids to biases, got %s",
                        srv_json_type_name(lb));
    if (json_object_size(lb) > SRV_MAX_LOGIT_BIAS)
        return srv_fail(err, 400, "invalid_value", "logit_bias",
                        "'logit_bias' holds %zu tokens; at most %d are allowed", json_object_size(lb),
                        SRV_MAX_LOGIT_BIAS);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)lb, key, v)
    {
        char *end;
        errno = 0;
        const long long id = strtoll(key, &end, 10);
        if (end == key || *end || errno || id < 0 || id >= rules->n_vocab || !isdigit((unsigned char)key[0]))
            return srv_fail(err, 400, "invalid_value", "logit_bias",
                            "'logit_bias' key '%s' is not a token id in [0, %d)", key, (int)rules->n_vocab);
        if (!json_is_number(v))
            return srv_fail(err, 400, "invalid_type", "logit_bias",
                            "'logit_bias[\"%s\"]' must be a number, not %s", key, srv_json_type_name(v));
        const double b = json_number_value(v);
        if (!(b >= -100.0 && b <= 100.0))
            return srv_fail(err, 400, "invalid_value", "logit_bias",
                            "'logit_bias[\"%s\"]' is %g, outside [-100, 100]", key, b);
        for (int32_t i = 0; i < r->bias.n; i++) /* "07" and "7" */
            if (r->bias.id[i] == (woolly_token)id)
                return srv_fail(err, 400, "invalid_value", "logit_bias",
                                "'logit_bias' gives token %lld twice", id);
        r->bias.id[r->bias.n] = (woolly_token)id;
        r->bias.bias[r->bias.n++] = (float)b;
    }
    return 0;
}

/* Fields whose other values this server does not implement. */
static int unsupported(const json_t *body, enum srv_gen_kind kind, srv_error *err)
{
    long long n = 1;
    if (srv_json_integer(body, "best_of", 1, INT32_MAX, &n, err) < 0)
        return -1;
    if (n != 1)
        return srv_fail(err, 400, "unsupported_value", "best_of", "'best_of' must be 1");
    bool b = false;
    if (srv_json_bool(body, "echo", &b, err) < 0)
        return -1;
    if (b)
        return srv_fail(err, 400, "unsupported_value", "echo", "'echo' is not supported");
    static const char *const NOT_NULL[] = {"suffix", "tools", "functions"};
    for (size_t i = 0; i < sizeof NOT_NULL / sizeof NOT_NULL[0]; i++) {
        if (kind == SRV_GEN_CHAT && !strcmp(NOT_NULL[i], "tools"))
            continue; /* tool_calls.c */
        const json_t *v = json_object_get(body, NOT_NULL[i]);
        if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0) &&
            !(json_is_string(v) && json_string_length(v) == 0))
            return srv_fail(err, 400, "unsupported_value", NOT_NULL[i], "'%s' is not supported", NOT_NULL[i]);
    }
    return 0;
}

/* n: how many choices. */
static int parse_n(const json_t *body, srv_gen_request *r, srv_error *err)
{
    long long n = 1;
    if (srv_json_integer(body, "n", 1, INT32_MAX, &n, err) < 0)
        return -1;
    if (n > SRV_MAX_CHOICES)
        return srv_fail(err, 400, "invalid_value", "n", "'n' is %lld; at most %d choices are allowed", n,
                        SRV_MAX_CHOICES);
    r->n = (int)n;
    return 0;
}

/* Chat: logprobs (a boolean) and top_logprobs (0 .. 20, only with logprobs). Completions: the legacy
 * logprobs, a number 0 .. 20 (the chosen tokens' log-probabilities and that many of the most likely), or
 * a boolean (false: none, true: as 0). */
static int parse_logprobs(const json_t *body, enum srv_gen_kind kind, srv_gen_request *r, srv_error *err)
{
    long long k = 0;
    int rc;
    if (kind == SRV_GEN_COMPLETION) {
        const json_t *v = json_object_get(body, "logprobs");
        if (json_is_boolean(v)) { /* as chat clients send it: true is the chosen tokens' only */
            r->logprobs = json_is_true(v);
            return 0;
        }
        if ((rc = srv_json_integer(body, "logprobs", 0, INT32_MAX, &k, err)) < 0)
            return -1;
        if (k > SRV_MAX_TOP_LOGPROBS)
            return srv_fail(err, 400, "invalid_value", "logprobs",
                            "'logprobs' is %lld; at most %d are allowed", k, SRV_MAX_TOP_LOGPROBS);
        r->logprobs = rc == 1;
        r->top_logprobs = (int)k;
        return 0;
    }
    if (srv_json_bool(body, "logprobs", &r->logprobs, err) < 0 ||
        (rc = srv_json_integer(body, "top_logprobs", 0, INT32_MAX, &k, err)) < 0)
        return -1;
    if (k > SRV_MAX_TOP_LOGPROBS)
        return srv_fail(err, 400, "invalid_value", "top_logprobs",
                        "'top_logprobs' is %lld; at most %d are allowed", k, SRV_MAX_TOP_LOGPROBS);
    if (k > 0 && !r->logprobs)
        return srv_fail(err, 400, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = (int)k;
    return 0;
}

/* A grammar compiled from text, or a 400 naming the field with the compiler's message. */
static int compile_grammar(bool gbnf, const char *text, size_t len, const char *param, srv_gen_request *r,
                           srv_error *err)
{
    r->grammar = gbnf ? woolly_grammar_open_gbnf(text, len) : woolly_grammar_open_json_schema(text, len);
    if (!r->grammar)
        return srv_fail(err, 400, "invalid_value", param, "'%s' cannot be used: %s", param, woolly_last_error());
    return 0;
}

/* Structured output: response_format {"type": "text" | "json_object" | "json_schema", "json_schema":
 * {"name", "schema", "strict"}}, or the extension `grammar` (GBNF text, as llama.cpp's server takes it). */
static int parse_constraint(const json_t *body, srv_gen_request *r, srv_error *err)
{
    const json_t *rf = json_object_get(body, "response_format");
    const char *gbnf = NULL;
    size_t gbnf_len = 0;
    if (srv_json_string(body, "grammar", &gbnf, &gbnf_len, err) < 0)
        return -1;
    if (gbnf && gbnf_len == 0)
        gbnf = NULL;
    const char *type = NULL;
    if (rf && !json_is_null(rf)) {
        if (!json_is_object(rf))
            return srv_fail(err, 400, "invalid_type", "response_format",
                            "invalid type for 'response_format': expected an object, got %s",
                            srv_json_type_name(rf));
        if (srv_json_string(rf, "type", &type, NULL, err) < 0)
            return -1;
        if (!type)
            return srv_fail(err, 400, "missing_field", "response_format.type", "'response_format.type' is required");
        if (strcmp(type, "text") && strcmp(type, "json_object") && strcmp(type, "json_schema"))
            return srv_fail(err, 400, "invalid_value", "response_format.type",
                            "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not "
                            "\"%s\"",
                            type);
        if (!strcmp(type, "text"))
            type = NULL;
    }
    if (type && gbnf)
        return srv_fail(err, 400, "invalid_value", "grammar",
                        "'grammar' and a JSON 'response_format' exclude each other");
    if (gbnf)
        return compile_grammar(true, gbnf, gbnf_len, "grammar", r, err);
    if (!type)
        return 0;
    if (!strcmp(type, "json_object"))
        return compile_grammar(false, "{\"type\":\"object\"}", 17, "response_format", r, err);
    const json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return srv_fail(err, 400, "missing_field", "response_format.json_schema",
                        "'response_format.json_schema' must be an object holding the schema");
    const json_t *schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema))
        return compile_grammar(false, "{\"type\":\"object\"}", 17, "response_format", r, err);
    if (!json_is_object(schema) && !json_is_true(schema))
        return srv_fail(err, 400, "invalid_type", "response_format.json_schema.schema",
                        "invalid type for 'response_format.json_schema.schema': expected an object, got %s",
                        srv_json_type_name(schema));
    char *text = json_dumps(schema, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text)
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    const int rc = compile_grammar(false, text, strlen(text), "response_format.json_schema.schema", r, err);
    free(text);
    return rc;
}

/* A chat's tools; a call it requires is the output's constraint. */
static int parse_tools(const json_t *body, const srv_gen_rules *rules, srv_gen_request *r, srv_error *err)
{
    woolly_grammar *call = NULL;
    if (srv_tools_parse(body, woolly_chat_tool_syntax_of(rules->chat->family), rules->chat->named_calls,
                        &r->tools, &call, err))
        return -1;
    if (!call)
        return 0;
    if (r->grammar) {
        woolly_grammar_close(call);
        return srv_fail(
            err, 400, "invalid_value", "tool_choice",
            "a 'tool_choice' that requires a call and a 'response_format' or 'grammar' exclude each other");
    }
    r->grammar = call;
    return 0;
}

static int parse_prompt(const json_t *body, const srv_gen_rules *rules, srv_gen_request *r, srv_error *err)
{
    const json_t *v = json_object_get(body, "prompt");
    if (!v || json_is_null(v))
        return srv_fail(err, 400, "missing_field", "prompt", "'prompt' is required");
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
        v = json_array_get(v, 0); /* a list of one prompt */
    if (json_is_string(v)) {
        if (!(r->prompt = dup_n(json_string_value(v), json_string_length(v))))
            return srv_fail(err, 500, NULL, NULL, "out of memory");
        if (strlen(r->prompt) != json_string_length(v))
            return srv_fail(err, 400, "invalid_value", "prompt", "'prompt' holds a NUL character");
        return 0;
    }
    if (json_is_array(v) && json_array_size(v) > 0 && json_is_string(json_array_get(v, 0)))
        return srv_fail(err, 400, "unsupported_value", "prompt",
                        "'prompt' must be one prompt: a list of %zu "
                        "prompts is a batch, which this server does not support",
                        json_array_size(v));
    if (json_is_array(v) && json_array_size(v) > 0 && json_is_array(json_array_get(v, 0)))
        return srv_fail(err, 400, "unsupported_value", "prompt",
                        "'prompt' must be one prompt, not a list of token lists");
    if (!json_is_array(v))
        return srv_fail(err, 400, "invalid_type", "prompt",
                        "invalid type for 'prompt': expected a string or "
                        "a list of token ids, got %s",
                        srv_json_type_name(v));
    if (srv_json_token_ids(v, "prompt", rules->n_vocab, &r->ids, &r->n_ids, err))
        return -1;
    if (r->n_ids == 0)
        return srv_fail(err, 400, "invalid_value", "prompt", "'prompt' is an empty list of tokens");
    return 0;
}

int srv_gen_request_parse(const char *body, size_t len, enum srv_gen_kind kind, const srv_gen_rules *rules,
                          srv_gen_request *r, srv_error *err)
{
    *r = (srv_gen_request){.kind = kind};
    json_t *root = srv_json_parse_object(body, len, rules->json_room, err);
    if (!root)
        return -1;
    int rc = -1;
    const char *model = NULL;
    if (srv_json_string(root, "model", &model, NULL, err) < 0)
        goto done;
    if (model && strcmp(model, rules->model_id)) {
        srv_fail(err, 404, "model_not_found", "model",
                 "the model '%s' does not exist: this server serves '%s'", model, rules->model_id);
        goto done;
    }
    if (srv_json_bool(root, "stream", &r->stream, err) < 0 ||
        srv_json_bool(root, "ignore_eos", &r->ignore_eos, err) < 0)
        goto done;
    const json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            srv_fail(err, 400, "invalid_type", "stream_options",
                     "invalid type for 'stream_options': expected "
                     "an object, got %s",
                     srv_json_type_name(so));
            goto done;
        }
        if (srv_json_bool(so, "include_usage", &r->include_usage, err) < 0)
            goto done;
    }
    long long keep = SRV_KEEP_DEFAULT;
    if (unsupported(root, kind, err) || parse_n(root, r, err) || parse_logprobs(root, kind, r, err) ||
        parse_sampling(root, rules, r, err) || parse_logit_bias(root, rules, r, err) ||
        parse_max_tokens(root, rules, r, err) || parse_stop(root, r, err) || parse_constraint(root, r, err) ||
        srv_json_integer(root, "n_keep", -1, INT32_MAX, &keep, err) < 0)
        goto done;
    r->n_keep = (int32_t)keep;
    if (kind == SRV_GEN_CHAT)
        rc = parse_tools(root, rules, r, err)
                 ? -1
                 : srv_chat_prompt(root, rules->chat, &r->tools, &r->prompt, &r->system, err);
    else
        rc = parse_prompt(root, rules, r, err);
done:
    json_decref(root);
    return rc;
}

void srv_gen_request_free(srv_gen_request *r)
{
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->prompt);
    free(r->system);
    free(r->ids);
    woolly_grammar_close(r->grammar);
    srv_tools_free(&r->tools);
    *r = (srv_gen_request){0};
}
