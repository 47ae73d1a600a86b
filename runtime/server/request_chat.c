#include "request_chat.h"

#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "text.h"

/* The text of a message's content: a string, or the concatenation of an array's text parts. */
static int content_text(const json_t *msg, size_t i, const char *role, srv_buf *out, srv_error *err)
{
    const json_t *c = json_object_get(msg, "content");
    if (!c || json_is_null(c)) {
        if (!strcmp(role, "assistant")) /* one that only calls tools */
            return 0;
        return srv_fail(err, 400, "missing_field", "messages", "'messages[%zu].content' is required", i);
    }
    if (json_is_string(c))
        return srv_buf_append(out, json_string_value(c), json_string_length(c))
                   ? srv_fail(err, 500, NULL, NULL, "out of memory")
                   : 0;
    if (!json_is_array(c))
        return srv_fail(err, 400, "invalid_type", "messages",
                        "'messages[%zu].content' must be a string or an array of text parts, not %s", i,
                        srv_json_type_name(c));
    for (size_t k = 0; k < json_array_size(c); k++) {
        const json_t *part = json_array_get(c, k);
        const char *type = NULL, *text = NULL;
        size_t len = 0;
        if (!json_is_object(part) || srv_json_string(part, "type", &type, NULL, err) < 0 || !type)
            return srv_fail(err, 400, "invalid_type", "messages",
                            "'messages[%zu].content[%zu]' must be an object with a 'type'", i, k);
        if (strcmp(type, "text"))
            return srv_fail(err, 400, "unsupported_value", "messages",
                            "'messages[%zu].content[%zu]' is of type '%s': only text parts are supported", i,
                            k, type);
        if (srv_json_string(part, "text", &text, &len, err) <= 0)
            return srv_fail(err, 400, "invalid_type", "messages",
                            "'messages[%zu].content[%zu].text' must be a string", i, k);
        if (srv_buf_append(out, text, len))
            return srv_fail(err, 500, NULL, NULL, "out of memory");
    }
    return 0;
}

static const char *role_of(const json_t *msg, size_t i, srv_error *err)
{
    const char *role = NULL;
    if (srv_json_string(msg, "role", &role, NULL, err) < 0)
        return NULL;
    if (!role) {
        srv_fail(err, 400, "missing_field", "messages", "'messages[%zu].role' is required", i);
        return NULL;
    }
    if (!strcmp(role, "system") || !strcmp(role, "developer"))
        return "system";
    if (!strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "tool"))
        return role;
    srv_fail(err, 400, "invalid_value", "messages",
             "'messages[%zu].role' is '%s': only system, developer, user, assistant and tool are supported",
             i, role);
    return NULL;
}

/* The first message alone, without the assistant's opening (heap), or NULL when it cannot render alone
 * (some templates refuse a conversation without a user message). */
static char *render_first(const woolly_chat_format *fmt, const woolly_chat_msg *cm, const srv_tools *tools)
{
    char *text, err[256];
    return woolly_chat_format_render_tools(fmt, cm, NULL, 1, (const char *const *)tools->texts, tools->n,
                                           false, &text, err, sizeof err) < 0
               ? NULL
               : text;
}

/* What the messages' tool parts need beside the request's JSON: the calls of each message and the
 * arguments texts made for the template. */
typedef struct msg_store {
    woolly_chat_tool_call **calls; /* [n] */
    char **args;                   /* every arguments text made */
    size_t n_args, cap_args;
} msg_store;

static int keep_args(msg_store *st, char *text, srv_error *err)
{
    if (st->n_args == st->cap_args) {
        const size_t cap = st->cap_args ? 2 * st->cap_args : 16;
        char **a = realloc(st->args, cap * sizeof *a);
        if (!a) {
            free(text);
            return srv_fail(err, 500, NULL, NULL, "out of memory");
        }
        st->args = a;
        st->cap_args = cap;
    }
    st->args[st->n_args++] = text;
    return 0;
}

/* messages[i].tool_calls: each {id, type: "function", function: {name, arguments}}; arguments (a JSON
 * text, as the API has it) go to the template as the object they encode, as Hugging Face's templates
 * expect, or as the string when they are not a JSON object. */
static int parse_tool_calls(const json_t *m, size_t i, const char *role, woolly_chat_msg_tools *cm,
                            msg_store *st, srv_error *err)
{
    const json_t *tc = json_object_get(m, "tool_calls");
    if (!tc || json_is_null(tc) || (json_is_array(tc) && json_array_size(tc) == 0))
        return 0;
    if (strcmp(role, "assistant") || !json_is_array(tc))
        return srv_fail(err, 400, "invalid_value", "messages",
                        "'messages[%zu].tool_calls' must be an array, in an assistant message", i);
    const size_t n = json_array_size(tc);
    woolly_chat_tool_call *calls = calloc(n, sizeof *calls);
    if (!calls)
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    st->calls[i] = calls;
    for (size_t k = 0; k < n; k++) {
        const json_t *c = json_array_get(tc, k), *f = json_object_get(c, "function");
        const json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments"),
                     *id = json_object_get(c, "id");
        if (!json_is_object(c) || !json_is_string(name) ||
            (args && !json_is_string(args) && !json_is_object(args)) || (id && !json_is_string(id)))
            return srv_fail(
                err, 400, "invalid_value", "messages",
                "'messages[%zu].tool_calls[%zu]' must be {\"id\", \"type\": \"function\", \"function\": "
                "{\"name\", \"arguments\"}} with strings",
                i, k);
        if (json_is_string(args) && memchr(json_string_value(args), 0, json_string_length(args)))
            return srv_fail(err, 400, "invalid_value", "messages",
                            "'messages[%zu].tool_calls[%zu].function.arguments' holds a NUL character", i, k);
        calls[k].id = json_string_value(id);
        calls[k].name = json_string_value(name);
        json_t *obj = json_is_object(args) ? json_incref((json_t *)args)
                      : args ? json_loadb(json_string_value(args), json_string_length(args), 0, NULL)
                             : json_object();
        if (json_is_object(obj)) {
            char *text = json_dumps(obj, JSON_COMPACT);
            json_decref(obj);
            if (!text || keep_args(st, text, err))
                return text ? -1 : srv_fail(err, 500, NULL, NULL, "out of memory");
            calls[k].arguments = text;
            calls[k].arguments_json = true;
        } else {
            json_decref(obj);
            calls[k].arguments = json_string_value(args);
        }
    }
    cm->tool_calls = calls;
    cm->n_tool_calls = n;
    return 0;
}

/* A tool result cm[i]: its tool_call_id, and the function's name (given, or the name of the call it
 * answers). */
static int parse_tool_result(const json_t *m, size_t i, woolly_chat_msg_tools *cm, srv_error *err)
{
    const json_t *id = json_object_get(m, "tool_call_id"), *name = json_object_get(m, "name");
    if (!json_is_string(id))
        return srv_fail(err, 400, id ? "invalid_type" : "missing_field", "messages",
                        "'messages[%zu].tool_call_id' is required, a string", i);
    if (name && !json_is_null(name) && !json_is_string(name))
        return srv_fail(err, 400, "invalid_type", "messages", "'messages[%zu].name' must be a string", i);
    cm[i].tool_call_id = json_string_value(id);
    cm[i].name = json_string_value(name);
    for (size_t k = i; !cm[i].name && k-- > 0;)
        for (size_t c = 0; c < cm[k].n_tool_calls && !cm[i].name; c++)
            if (cm[k].tool_calls[c].id && !strcmp(cm[k].tool_calls[c].id, cm[i].tool_call_id))
                cm[i].name = cm[k].tool_calls[c].name;
    return 0;
}

int srv_chat_prompt(const json_t *body, const woolly_chat_format *fmt, const srv_tools *tools, char **prompt,
                    char **system, srv_error *err)
{
    *prompt = NULL;
    *system = NULL;
    const json_t *msgs = json_object_get(body, "messages");
    if (!msgs || json_is_null(msgs))
        return srv_fail(err, 400, "missing_field", "messages", "'messages' is required");
    if (!json_is_array(msgs))
        return srv_fail(err, 400, "invalid_type", "messages",
                        "invalid type for 'messages': expected an array, "
                        "got %s",
                        srv_json_type_name(msgs));
    const size_t n = json_array_size(msgs);
    if (n == 0)
        return srv_fail(err, 400, "invalid_value", "messages", "'messages' must hold at least one message");
    /* never guess a prompt format: a wrong one answers nonsense */
    if (!fmt->jinja && fmt->family == WOOLLY_CHAT_UNKNOWN)
        return srv_fail(err, 400, "unsupported_chat_template", "messages",
                        "the model's chat template (tokenizer.chat_template) is not one Woolly recognizes: "
                        "start the server with --chat-template %s, or use /v1/completions",
                        woolly_chat_family_choices());
    woolly_chat_msg *cm = calloc(n, sizeof *cm);
    woolly_chat_msg_tools *parts = calloc(n, sizeof *parts);
    srv_buf *texts = calloc(n, sizeof *texts);
    msg_store st = {.calls = calloc(n, sizeof *st.calls)};
    int rc = -1;
    if (!cm || !parts || !texts || !st.calls) {
        srv_fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) {
            srv_fail(err, 400, "invalid_type", "messages", "'messages[%zu]' must be an object, not %s", i,
                     srv_json_type_name(m));
            goto done;
        }
        const char *role = role_of(m, i, err);
        if (!role || content_text(m, i, role, &texts[i], err))
            goto done;
        if (texts[i].p && strlen(texts[i].p) != texts[i].len) {
            srv_fail(err, 400, "invalid_value", "messages", "'messages[%zu].content' holds a NUL character",
                     i);
            goto done;
        }
        cm[i] = (woolly_chat_msg){role, texts[i].p ? texts[i].p : ""};
        if (parse_tool_calls(m, i, role, &parts[i], &st, err) ||
            (!strcmp(role, "tool") && parse_tool_result(m, i, parts, err)))
            goto done;
    }
    char why[512];
    const char *const *defs = (const char *const *)tools->texts;
    if (woolly_chat_format_render_tools(fmt, cm, parts, n, defs, tools->n, true, prompt, why, sizeof why) <
        0) {
        srv_fail(err, 400, "invalid_value", "messages", "the model's chat template cannot render this conversation: %s",
                 why);
        goto done;
    }
    if (strcmp(cm[0].role, "system") == 0 || strcmp(cm[0].role, "developer") == 0)
        *system = render_first(fmt, cm, tools); /* NULL: a shift keeps BOS only */
    rc = 0;
done:
    if (texts)
        for (size_t i = 0; i < n; i++)
            srv_buf_free(&texts[i]);
    if (st.calls)
        for (size_t i = 0; i < n; i++)
            free(st.calls[i]);
    for (size_t i = 0; i < st.n_args; i++)
        free(st.args[i]);
    free(st.args);
    free(st.calls);
    free(texts);
    free(parts);
    free(cm);
    return rc;
}
