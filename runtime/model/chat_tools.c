/* Tools for the built-in chat formats: the conversation lowered to plain turns (chat_tools.h). The
 * wording of the tool descriptions is Woolly's own; the call syntax is the one the family's models are
 * trained to write (chat.h), so that a model answering in it is understood by the server's parser. */
#include "chat_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_text.h"

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

/* {"name": N, "<key>": A}: A is the arguments object, or the string the client sent. */
static void add_call_object(chat_text *s, const woolly_chat_tool_call *c, const char *key)
{
    chat_text_puts(s, "{\"name\": ");
    chat_text_json(s, c->name ? c->name : "");
    chat_text_puts(s, ", \"");
    chat_text_puts(s, key);
    chat_text_puts(s, "\": ");
    if (c->arguments_json)
        chat_text_puts(s, c->arguments);
    else
        chat_text_json(s, c->arguments ? c->arguments : "");
    chat_text_puts(s, "}");
}

/* The system prompt's description of the tools and of how to call them. */
static void add_tools_text(chat_text *s, enum woolly_chat_tool_syntax syn, const char *const *tools,
                           size_t n_tools)
{
    chat_text_puts(s, "# Tools\n\nYou may call the functions described below (one JSON object a line)");
    if (syn == WOOLLY_TOOLS_HERMES)
        chat_text_puts(s, ", listed within <tools></tools>:\n<tools>");
    else
        chat_text_puts(s, ":");
    for (size_t i = 0; i < n_tools; i++) {
        chat_text_puts(s, "\n");
        chat_text_puts(s, tools[i]);
    }
    switch (syn) {
    case WOOLLY_TOOLS_HERMES:
        chat_text_puts(
            s,
            "\n</tools>\n\nTo call a function, answer with its name and its arguments as a JSON object "
            "within <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
            "<arguments object>}\n</tool_call>");
        break;
    case WOOLLY_TOOLS_LLAMA3:
        chat_text_puts(
            s, "\n\nTo call a function, answer with nothing but the JSON object {\"name\": <function name>, "
               "\"parameters\": <arguments object>}.");
        break;
    case WOOLLY_TOOLS_MISTRAL:
        chat_text_puts(s,
                       "\n\nTo call functions, answer with [TOOL_CALLS] followed by a JSON array of objects "
                       "{\"name\": <function name>, \"arguments\": <arguments object>}.");
        break;
    case WOOLLY_TOOLS_GRANITE:
        chat_text_puts(s,
                       "\n\nTo call functions, answer with <|tool_call|> followed by a JSON array of objects "
                       "{\"name\": <function name>, \"arguments\": <arguments object>}.");
        break;
    }
}

/* An assistant turn's text: its content, then its calls in the family's syntax. */
static void add_calls_text(chat_text *s, enum woolly_chat_tool_syntax syn, const woolly_chat_msg *msg,
                           const woolly_chat_msg_tools *m)
{
    chat_text_puts(s, msg->content ? msg->content : "");
    const bool list = syn == WOOLLY_TOOLS_MISTRAL || syn == WOOLLY_TOOLS_GRANITE;
    if (s->len && syn != WOOLLY_TOOLS_MISTRAL)
        chat_text_puts(s, "\n");
    if (list)
        chat_text_puts(s, syn == WOOLLY_TOOLS_MISTRAL ? "[TOOL_CALLS][" : "<|tool_call|>[");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        if (k)
            chat_text_puts(s, list ? ", " : "\n");
        if (syn == WOOLLY_TOOLS_HERMES)
            chat_text_puts(s, "<tool_call>\n");
        add_call_object(s, &m->tool_calls[k], syn == WOOLLY_TOOLS_LLAMA3 ? "parameters" : "arguments");
        if (syn == WOOLLY_TOOLS_HERMES)
            chat_text_puts(s, "\n</tool_call>");
    }
    if (list)
        chat_text_puts(s, "]");
}

/* A tool result's text and the role it is given. */
static const char *add_result_text(chat_text *s, enum woolly_chat_tool_syntax syn, const woolly_chat_msg *m)
{
    const char *c = m->content ? m->content : "";
    switch (syn) {
    case WOOLLY_TOOLS_LLAMA3:
        chat_text_puts(s, c);
        return "ipython";
    case WOOLLY_TOOLS_GRANITE:
        chat_text_puts(s, c);
        return "tool_response";
    case WOOLLY_TOOLS_MISTRAL:
        chat_text_puts(s, "[TOOL_RESULTS]{\"content\": ");
        chat_text_json(s, c);
        chat_text_puts(s, "}[/TOOL_RESULTS]");
        return "user";
    case WOOLLY_TOOLS_HERMES:
    default:
        chat_text_puts(s, "<tool_response>\n");
        chat_text_puts(s, c);
        chat_text_puts(s, "\n</tool_response>");
        return "user";
    }
}

/* Keeps s's text as one of the lowered conversation's strings; NULL when out of memory. */
static const char *keep(woolly_chat_lowered *l, chat_text *s)
{
    if (s->oom) {
        free(s->p);
        *s = (chat_text){0};
        return NULL;
    }
    if (!s->p && !(s->p = calloc(1, 1)))
        return NULL;
    l->owned[l->n_owned++] = s->p;
    const char *p = s->p;
    *s = (chat_text){0};
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
        chat_text s = {0};
        if (n > 0 && !strcmp(m[0].role, "system")) {
            chat_text_puts(&s, m[0].content);
            chat_text_puts(&s, "\n\n");
            i = 1;
        }
        add_tools_text(&s, syn, tools, n_tools);
        const char *text = keep(out, &s);
        if (!text)
            goto oom;
        out->msgs[out->n++] = (woolly_chat_msg){.role = "system", .content = text};
    }
    for (; i < n; i++) {
        chat_text s = {0};
        const char *role = m[i].role;
        if (!strcmp(role, "tool")) {
            role = add_result_text(&s, syn, &m[i]);
            /* Hermes' results of one round share a user turn, one tag each */
            while (syn == WOOLLY_TOOLS_HERMES && i + 1 < n && !strcmp(m[i + 1].role, "tool")) {
                chat_text_puts(&s, "\n");
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
