/* Tools for the built-in chat formats: the conversation lowered to plain turns (chat_tools.h). The
 * wording of the tool descriptions is Woolly's own; the call syntax is the one the family's models are
 * trained to write (chat.h), so that a model answering in it is understood by the server's parser. */
#include "chat_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum woolly_chat_tool_syntax woolly_chat_tool_syntax_of(enum woolly_chat_family f)
{
    switch (f) {
    case WOOLLY_CHAT_LLAMA3:
        return WOOLLY_TOOLS_LLAMA3;
    case WOOLLY_CHAT_GRANITE:
        return WOOLLY_TOOLS_GRANITE;
    case WOOLLY_CHAT_MISTRAL_V1:
    case WOOLLY_CHAT_MISTRAL_V3:
    case WOOLLY_CHAT_MISTRAL_V3_TEKKEN:
    case WOOLLY_CHAT_MISTRAL_V7:
        return WOOLLY_TOOLS_MISTRAL;
    default: /* Qwen and ChatML write Hermes' tags; the families without a syntax of their own get it too */
        return WOOLLY_TOOLS_HERMES;
    }
}

const char *woolly_chat_tool_syntax_name(enum woolly_chat_tool_syntax s)
{
    static const char *const NAMES[] = {"hermes", "llama3", "mistral", "granite"};
    return (unsigned)s < sizeof NAMES / sizeof NAMES[0] ? NAMES[s] : "?";
}

bool woolly_chat_has_tool_parts(const woolly_chat_msg *m, const woolly_chat_msg_tools *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((parts && parts[i].n_tool_calls) || !strcmp(m[i].role, "tool"))
            return true;
    return false;
}

/* A growing heap string; NULL p after an allocation failed. */
typedef struct str {
    char *p;
    size_t len, cap;
    bool oom;
} str;

static void add(str *s, const char *t, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
    s->p[s->len] = 0;
}

static void adds(str *s, const char *t)
{
    add(s, t, strlen(t));
}

static void add_json_string(str *s, const char *t)
{
    adds(s, "\"");
    for (; *t; t++) {
        char esc[8];
        const unsigned char c = (unsigned char)*t;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            add(s, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            add(s, esc, 6);
        } else {
            add(s, (const char *)t, 1);
        }
    }
    adds(s, "\"");
}

/* {"name": N, "<key>": A}: A is the arguments object, or the string the client sent. */
static void add_call_object(str *s, const woolly_chat_tool_call *c, const char *key)
{
    adds(s, "{\"name\": ");
    add_json_string(s, c->name ? c->name : "");
    adds(s, ", \"");
    adds(s, key);
    adds(s, "\": ");
    if (c->arguments_json)
        adds(s, c->arguments);
    else
        add_json_string(s, c->arguments ? c->arguments : "");
    adds(s, "}");
}

/* The system prompt's description of the tools and of how to call them. */
static void add_tools_text(str *s, enum woolly_chat_tool_syntax syn, const char *const *tools, size_t n_tools)
{
    adds(s, "# Tools\n\nYou may call the functions described below (one JSON object a line)");
    if (syn == WOOLLY_TOOLS_HERMES)
        adds(s, ", listed within <tools></tools>:\n<tools>");
    else
        adds(s, ":");
    for (size_t i = 0; i < n_tools; i++) {
        adds(s, "\n");
        adds(s, tools[i]);
    }
    switch (syn) {
    case WOOLLY_TOOLS_HERMES:
        adds(s,
             "\n</tools>\n\nTo call a function, answer with its name and its arguments as a JSON object "
             "within <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
             "<arguments object>}\n</tool_call>");
        break;
    case WOOLLY_TOOLS_LLAMA3:
        adds(s, "\n\nTo call a function, answer with nothing but the JSON object {\"name\": <function name>, "
                "\"parameters\": <arguments object>}.");
        break;
    case WOOLLY_TOOLS_MISTRAL:
        adds(s, "\n\nTo call functions, answer with [TOOL_CALLS] followed by a JSON array of objects "
                "{\"name\": <function name>, \"arguments\": <arguments object>}.");
        break;
    case WOOLLY_TOOLS_GRANITE:
        adds(s, "\n\nTo call functions, answer with <|tool_call|> followed by a JSON array of objects "
                "{\"name\": <function name>, \"arguments\": <arguments object>}.");
        break;
    }
}

/* An assistant turn's text: its content, then its calls in the family's syntax. */
static void add_calls_text(str *s, enum woolly_chat_tool_syntax syn, const woolly_chat_msg *msg,
                           const woolly_chat_msg_tools *m)
{
    adds(s, msg->content ? msg->content : "");
    const bool list = syn == WOOLLY_TOOLS_MISTRAL || syn == WOOLLY_TOOLS_GRANITE;
    if (s->len && syn != WOOLLY_TOOLS_MISTRAL)
        adds(s, "\n");
    if (list)
        adds(s, syn == WOOLLY_TOOLS_MISTRAL ? "[TOOL_CALLS][" : "<|tool_call|>[");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        if (k)
            adds(s, list ? ", " : "\n");
        if (syn == WOOLLY_TOOLS_HERMES)
            adds(s, "<tool_call>\n");
        add_call_object(s, &m->tool_calls[k], syn == WOOLLY_TOOLS_LLAMA3 ? "parameters" : "arguments");
        if (syn == WOOLLY_TOOLS_HERMES)
            adds(s, "\n</tool_call>");
    }
    if (list)
        adds(s, "]");
}

/* A tool result's text and the role it is given. */
static const char *add_result_text(str *s, enum woolly_chat_tool_syntax syn, const woolly_chat_msg *m)
{
    const char *c = m->content ? m->content : "";
    switch (syn) {
    case WOOLLY_TOOLS_LLAMA3:
        adds(s, c);
        return "ipython";
    case WOOLLY_TOOLS_GRANITE:
        adds(s, c);
        return "tool_response";
    case WOOLLY_TOOLS_MISTRAL:
        adds(s, "[TOOL_RESULTS]{\"content\": ");
        add_json_string(s, c);
        adds(s, "}[/TOOL_RESULTS]");
        return "user";
    case WOOLLY_TOOLS_HERMES:
    default:
        adds(s, "<tool_response>\n");
        adds(s, c);
        adds(s, "\n</tool_response>");
        return "user";
    }
}

/* Keeps s's text as one of the lowered conversation's strings; NULL when out of memory. */
static const char *keep(woolly_chat_lowered *l, str *s)
{
    if (s->oom) {
        free(s->p);
        *s = (str){0};
        return NULL;
    }
    if (!s->p && !(s->p = calloc(1, 1)))
        return NULL;
    l->owned[l->n_owned++] = s->p;
    const char *p = s->p;
    *s = (str){0};
    return p;
}

int woolly_chat_lower_tools(enum woolly_chat_family f, const woolly_chat_msg *m,
                            const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                            size_t n_tools, woolly_chat_lowered *out)
{
    *out = (woolly_chat_lowered){0};
    const enum woolly_chat_tool_syntax syn = woolly_chat_tool_syntax_of(f);
    out->msgs = calloc(n + 1, sizeof *out->msgs);
    out->owned = calloc(n + 1, sizeof *out->owned);
    if (!out->msgs || !out->owned)
        goto oom;
    size_t i = 0;
    if (n_tools) { /* the tools join the system prompt, or make one */
        str s = {0};
        if (n > 0 && !strcmp(m[0].role, "system")) {
            adds(&s, m[0].content);
            adds(&s, "\n\n");
            i = 1;
        }
        add_tools_text(&s, syn, tools, n_tools);
        const char *text = keep(out, &s);
        if (!text)
            goto oom;
        out->msgs[out->n++] = (woolly_chat_msg){.role = "system", .content = text};
    }
    for (; i < n; i++) {
        str s = {0};
        const char *role = m[i].role;
        if (!strcmp(role, "tool")) {
            role = add_result_text(&s, syn, &m[i]);
            /* Hermes' results of one round share a user turn, one tag each */
            while (syn == WOOLLY_TOOLS_HERMES && i + 1 < n && !strcmp(m[i + 1].role, "tool")) {
                adds(&s, "\n");
                add_result_text(&s, syn, &m[++i]);
            }
        } else if (parts && parts[i].n_tool_calls) {
            add_calls_text(&s, syn, &m[i], &parts[i]);
        } else {
            out->msgs[out->n++] = (woolly_chat_msg){.role = role, .content = m[i].content};
            continue;
        }
        const char *text = keep(out, &s);
        if (!text)
            goto oom;
        out->msgs[out->n++] = (woolly_chat_msg){.role = role, .content = text};
    }
    return 0;
oom:
    woolly_chat_lowered_free(out);
    return -1;
}

void woolly_chat_lowered_free(woolly_chat_lowered *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        free(l->owned[i]);
    free(l->owned);
    free(l->msgs);
    *l = (woolly_chat_lowered){0};
}
