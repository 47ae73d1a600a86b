#include "json_fields.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* What a parse may still allocate: jansson allocates through these functions (installed once for the
 * process); the budget is on only while this thread parses a request body. Each allocation is
 * counted with the allocator's own overhead, and what is freed during the parse is not given back:
 * the sum bounds the parse's peak memory from above. */
enum { MALLOC_OVERHEAD = 16 };
static _Thread_local struct {
    bool on, exceeded;
    size_t left;
} budget;

static void *budget_malloc(size_t n)
{
    if (budget.on) {
        if (n > budget.left || n + MALLOC_OVERHEAD > budget.left) {
            budget.exceeded = true;
            return NULL;
        }
        budget.left -= n + MALLOC_OVERHEAD;
    }
    return malloc(n);
}

static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static void budget_install(void)
{
    json_set_alloc_funcs(budget_malloc, free);
}

json_t *srv_json_parse_object(const char *body, size_t len, size_t room, srv_error *err)
{
    if (len == 0) {
        srv_fail(err, 400, "invalid_json", NULL, "the request body is empty: a JSON object is required");
        return NULL;
    }
    pthread_once(&budget_once, budget_install);
    const size_t limit = SRV_JSON_COST_FACTOR * len + room + SRV_JSON_COST_SLACK;
    budget.left = limit;
    budget.exceeded = false;
    budget.on = true;
    json_error_t je;
    json_t *v = json_loadb(body, len, 0, &je);
    budget.on = false;
    if (budget.exceeded) {
        json_decref(v);
        srv_fail(err, 413, "request_too_complex", NULL,
                 "the request body holds too many JSON values: parsing its %zu bytes would take more than "
                 "this server's limit of %zu bytes",
                 len, limit);
        return NULL;
    }
    if (!v) {
        srv_fail(err, 400, "invalid_json", NULL,
                 "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(v)) {
        srv_fail(err, 400, "invalid_json", NULL, "the request body must be a JSON object, not %s",
                 srv_json_type_name(v));
        json_decref(v);
        return NULL;
    }
    return v;
}

const char *srv_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

static const json_t *field(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int wrong_type(const char *key, const char *want, const json_t *v, srv_error *err)
{
    return srv_fail(err, 400, "invalid_type", key, "invalid type for '%s': expected %s, got %s", key, want,
                    srv_json_type_name(v));
}

int srv_json_number(const json_t *obj, const char *key, double lo, double hi, double *out, srv_error *err)
{
    const json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return wrong_type(key, "a number", v, err);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return srv_fail(err, 400, "invalid_value", key, "invalid '%s': %g is outside [%g, %g]", key, x, lo,
                        hi);
    *out = x;
    return 1;
}

int srv_json_integer(const json_t *obj, const char *key, long long lo, long long hi, long long *out,
                     srv_error *err)
{
    const json_t *v = field(obj, key);
    if (!v)
        return 0;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        const double d = json_real_value(v);
        if (d != floor(d))
            return wrong_type(key, "an integer", v, err);
        /* (double)hi rounds INT64_MAX up to 2^63, which no long long holds: converting it would be
         * undefined. Only [-2^63, 2^63) converts; the range is checked on the integer after. */
        if (!(d >= -0x1p63 && d < 0x1p63))
            return srv_fail(err, 400, "invalid_value", key, "invalid '%s': %g is outside [%lld, %lld]", key,
                            d, lo, hi);
        x = (long long)d;
    } else {
        return wrong_type(key, "an integer", v, err);
    }
    if (x < lo || x > hi)
        return srv_fail(err, 400, "invalid_value", key, "invalid '%s': %lld is outside [%lld, %lld]", key, x,
                        lo, hi);
    *out = x;
    return 1;
}

int srv_json_bool(const json_t *obj, const char *key, bool *out, srv_error *err)
{
    const json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return wrong_type(key, "a boolean", v, err);
    *out = json_is_true(v);
    return 1;
}

int srv_json_string(const json_t *obj, const char *key, const char **out, size_t *len, srv_error *err)
{
    const json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return wrong_type(key, "a string", v, err);
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return 1;
}

int srv_json_token_ids(const json_t *arr, const char *param, int32_t n_vocab, woolly_token **ids, int32_t *n,
                       srv_error *err)
{
    *ids = NULL;
    *n = 0;
    const size_t count = json_array_size(arr);
    if (count == 0)
        return 0;
    if (count > INT32_MAX)
        return srv_fail(err, 400, "invalid_value", param, "'%s' has too many tokens", param);
    woolly_token *t = malloc(sizeof *t * count);
    if (!t)
        return srv_fail(err, 500, NULL, NULL, "out of memory for %zu tokens", count);
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v)) {
            free(t);
            return srv_fail(err, 400, "invalid_type", param,
                            "'%s[%zu]' must be a token id (an integer), not %s", param, i,
                            srv_json_type_name(v));
        }
        const json_int_t id = json_integer_value(v);
        if (id < 0 || id >= n_vocab) {
            free(t);
            return srv_fail(err, 400, "invalid_value", param, "'%s[%zu]': token id %lld is outside [0, %d)",
                            param, i, (long long)id, (int)n_vocab);
        }
        t[i] = (woolly_token)id;
    }
    *ids = t;
    *n = (int32_t)count;
    return 0;
}
