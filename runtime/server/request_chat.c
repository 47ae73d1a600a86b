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
        if (!strcmp(role, "assistant"))
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
    if (!strcmp(role, "user") || !strcmp(role, "assistant"))
        return role;
    srv_fail(err, 400, "invalid_value", "messages",
             "'messages[%zu].role' is '%s': only system, developer, user and assistant are supported", i,
             role);
    return NULL;
}

/* The first message alone, without the assistant's opening (heap), or NULL when it cannot render alone
 * (some templates refuse a conversation without a user message). */
static char *render_first(const woolly_chat_format *fmt, const woolly_chat_msg *cm)
{
    char *text, err[256];
    return woolly_chat_format_render(fmt, cm, 1, false, &text, err, sizeof err) < 0 ? NULL : text;
}

int srv_chat_prompt(const json_t *body, const woolly_chat_format *fmt, char **prompt, char **system,
                    srv_error *err)
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
    srv_buf *texts = calloc(n, sizeof *texts);
    int rc = -1;
    if (!cm || !texts) {
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
    }
    char why[512];
    if (woolly_chat_format_render(fmt, cm, n, true, prompt, why, sizeof why) < 0) {
        srv_fail(err, 400, "invalid_value", "messages", "the model's chat template cannot render this conversation: %s",
                 why);
        goto done;
    }
    if (strcmp(cm[0].role, "system") == 0 || strcmp(cm[0].role, "developer") == 0)
        *system = render_first(fmt, cm); /* NULL: a shift keeps BOS only */
    rc = 0;
done:
    if (texts)
        for (size_t i = 0; i < n; i++)
            srv_buf_free(&texts[i]);
    free(texts);
    free(cm);
    return rc;
}
