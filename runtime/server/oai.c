#include "oai.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "text.h"

#define FINGERPRINT "woolly"

void srv_oai_head_init(srv_oai_head *h, enum srv_gen_kind kind, const char *model)
{
    /* Unique: a counter, after the time so that ids differ across restarts too. */
    static atomic_ullong counter;
    const long long now = (long long)time(NULL);
    const unsigned long long n = atomic_fetch_add(&counter, 1) + 1;
    h->kind = kind;
    snprintf(h->id, sizeof h->id, "%s-%llx%08llx", kind == SRV_GEN_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)now, n);
    h->created = now;
    h->model = model;
}

json_t *srv_oai_error(const srv_error *e)
{
    /* A message may quote what the client sent (a path, a JSON parser's excerpt): made UTF-8 first. */
    srv_buf msg = {0}, param = {0};
    json_t *o = NULL;
    if (!srv_buf_append_utf8(&msg, e->message, strlen(e->message)) &&
        !srv_buf_append_utf8(&param, e->param, strlen(e->param)))
        o = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg.p, "type",
                      e->type ? e->type : "invalid_request_error", "param", param.len ? param.p : NULL,
                      "code", e->code);
    srv_buf_free(&msg);
    srv_buf_free(&param);
    return o;
}

json_t *srv_oai_usage(int32_t prompt, int32_t completion, int32_t cached)
{
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", (int)prompt, "completion_tokens",
                     (int)completion, "total_tokens", (int)(prompt + completion), "prompt_tokens_details",
                     "cached_tokens", (int)cached);
}

static json_t *object_head(const srv_oai_head *h, const char *object)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", h->id, "object", object, "created",
                     (json_int_t)h->created, "model", h->model, "system_fingerprint", FINGERPRINT);
}

/* A JSON string of len bytes of UTF-8 (NUL bytes included); json_null() if it is not UTF-8. */
static json_t *text_value(const char *text, size_t len)
{
    json_t *v = json_stringn(text ? text : "", len);
    return v ? v : json_null();
}

json_t *srv_oai_choice(enum srv_gen_kind kind, int index, const char *text, size_t len, const char *finish,
                       json_t *logprobs)
{
    if (!logprobs)
        logprobs = json_null();
    return kind == SRV_GEN_CHAT ? json_pack("{s:i, s:{s:s, s:o, s:n}, s:o, s:s?}", "index", index, "message",
                                            "role", "assistant", "content", text_value(text, len), "refusal",
                                            "logprobs", logprobs, "finish_reason", finish)
                                : json_pack("{s:o, s:i, s:o, s:s?}", "text", text_value(text, len), "index",
                                            index, "logprobs", logprobs, "finish_reason", finish);
}

json_t *srv_oai_choice_calls(int index, const char *content, size_t len, json_t *tool_calls,
                             const char *finish, json_t *logprobs)
{
    if (!logprobs)
        logprobs = json_null();
    return json_pack("{s:i, s:{s:s, s:o, s:n, s:o}, s:o, s:s?}", "index", index, "message", "role",
                     "assistant", "content", content && len ? text_value(content, len) : json_null(),
                     "refusal", "tool_calls", tool_calls, "logprobs", logprobs, "finish_reason", finish);
}

json_t *srv_oai_response(const srv_oai_head *h, json_t *choices, json_t *usage)
{
    json_t *o = object_head(h, h->kind == SRV_GEN_CHAT ? "chat.completion" : "text_completion");
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage);
    return o;
}

json_t *srv_oai_result(const srv_oai_head *h, const char *text, size_t len, const char *finish, json_t *usage)
{
    return srv_oai_response(h, json_pack("[o]", srv_oai_choice(h->kind, 0, text, len, finish, NULL)), usage);
}

json_t *srv_oai_chunk(const srv_oai_head *h, bool role, const char *text, size_t len, const char *finish,
                      bool usage_null)
{
    const bool chat = h->kind == SRV_GEN_CHAT;
    json_t *o = object_head(h, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice;
    if (chat) {
        json_t *delta = json_object();
        if (role)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (role || text)
            json_object_set_new(delta, "content", text_value(text, len));
        choice = json_pack("{s:i, s:o, s:n, s:s?}", "index", 0, "delta", delta, "logprobs", "finish_reason",
                           finish);
    } else {
        choice = json_pack("{s:o, s:i, s:n, s:s?}", "text", text_value(text, len), "index", 0, "logprobs",
                           "finish_reason", finish);
    }
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    if (usage_null)
        json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *srv_oai_chunk_call(const srv_oai_head *h, int k, const json_t *call, bool first, const char *args,
                           size_t len, bool usage_null)
{
    json_t *o = object_head(h, "chat.completion.chunk");
    const json_t *f = json_object_get(call, "function");
    json_t *part =
        first ? json_pack("{s:i, s:O, s:s, s:{s:O, s:s}}", "index", k, "id", json_object_get(call, "id"),
                          "type", "function", "function", "name", json_object_get(f, "name"), "arguments", "")
              : json_pack("{s:i, s:{s:o}}", "index", k, "function", "arguments", text_value(args, len));
    json_object_set_new(o, "choices",
                        json_pack("[{s:i, s:{s:[o]}, s:n, s:n}]", "index", 0, "delta", "tool_calls", part,
                                  "logprobs", "finish_reason"));
    if (usage_null)
        json_object_set_new(o, "usage", json_null());
    return o;
}

void srv_oai_chunk_choice(json_t *chunk, int index, json_t *logprobs)
{
    json_t *c = json_array_get(json_object_get(chunk, "choices"), 0);
    if (c) {
        json_object_set_new(c, "index", json_integer(index));
        if (logprobs)
            json_object_set_new(c, "logprobs", logprobs);
    } else {
        json_decref(logprobs);
    }
}

json_t *srv_oai_usage_chunk(const srv_oai_head *h, json_t *usage)
{
    json_t *o = object_head(h, h->kind == SRV_GEN_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage);
    return o;
}

json_t *srv_oai_model(const char *id, long long created)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object", "model", "created", (json_int_t)created,
                     "owned_by", "woolly");
}

json_t *srv_oai_model_list(const char *id, long long created)
{
    return json_pack("{s:s, s:[o]}", "object", "list", "data", srv_oai_model(id, created));
}
