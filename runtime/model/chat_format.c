/* The format a command renders conversations with (chat.h): the model's own template through the Jinja
 * interpreter first, the built-in families as the fallback. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "chat_tools.h"
#include "jinja.h"
#include "model.h"
#include "tokenizer.h"

/* Appends to a heap string; false when out of memory. */
typedef struct text {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}

static void put_json_str(text *t, const char *s)
{
    put(t, "\"", 1);
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(t, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(t, esc, 6);
        } else {
            put(t, (const char *)&c, 1);
        }
    }
    put(t, "\"", 1);
}

static void put_str(text *t, const char *s)
{
    put(t, s, strlen(s));
}

static void put_tool_calls(text *t, const woolly_chat_msg_tools *m)
{
    put_str(t, ", \"tool_calls\": [");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const woolly_chat_tool_call *c = &m->tool_calls[k];
        put_str(t, k ? ", {\"id\": " : "{\"id\": ");
        put_json_str(t, c->id ? c->id : "");
        put_str(t, ", \"type\": \"function\", \"function\": {\"name\": ");
        put_json_str(t, c->name);
        put_str(t, ", \"arguments\": ");
        if (c->arguments_json) /* JSON text the caller checked: the object itself */
            put_str(t, c->arguments);
        else
            put_json_str(t, c->arguments ? c->arguments : "");
        put_str(t, "}}");
    }
    put_str(t, "]");
}

/* The variables Hugging Face gives a chat template: messages (with their tool_calls, tool_call_id and
 * name when given), tools (when given), add_generation_prompt, bos_token, eos_token. */
static char *context_json(const woolly_chat_format *f, const woolly_chat_msg *m,
                          const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                          size_t n_tools, bool add_assistant)
{
    text t = {0};
    put(&t, "{\"messages\": [", 14);
    for (size_t i = 0; i < n; i++) {
        put(&t, i ? ", {\"role\": " : "{\"role\": ", i ? 11 : 9);
        put_json_str(&t, m[i].role);
        put(&t, ", \"content\": ", 13);
        put_json_str(&t, m[i].content);
        if (parts && parts[i].n_tool_calls)
            put_tool_calls(&t, &parts[i]);
        if (parts && parts[i].tool_call_id) {
            put_str(&t, ", \"tool_call_id\": ");
            put_json_str(&t, parts[i].tool_call_id);
        }
        if (parts && parts[i].name) {
            put_str(&t, ", \"name\": ");
            put_json_str(&t, parts[i].name);
        }
        put(&t, "}", 1);
    }
    put_str(&t, "]");
    if (n_tools) { /* JSON texts the caller checked */
        put_str(&t, ", \"tools\": [");
        for (size_t i = 0; i < n_tools; i++) {
            if (i)
                put_str(&t, ", ");
            put_str(&t, tools[i]);
        }
        put_str(&t, "]");
    }
    put_str(&t, ", \"add_generation_prompt\": ");
    put(&t, add_assistant ? "true" : "false", add_assistant ? 4 : 5);
    put(&t, ", \"bos_token\": ", 15);
    put_json_str(&t, f->bos ? f->bos : "");
    put(&t, ", \"eos_token\": ", 15);
    put_json_str(&t, f->eos ? f->eos : "");
    put(&t, "}", 1);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

static long render_jinja(const woolly_chat_format *f, const woolly_chat_msg *m,
                         const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                         size_t n_tools, bool add_assistant, char **out, char *err, size_t err_cap)
{
    char *ctx = context_json(f, m, parts, n, tools, n_tools, add_assistant);
    if (!ctx) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    size_t len = 0;
    *out = jinja_render(f->jinja, ctx, &len, err, err_cap);
    free(ctx);
    return *out ? (long)len : -1;
}

static long render_plain_turns(enum woolly_chat_family fam, const woolly_chat_msg *m, size_t n,
                               bool add_assistant, char **out, char *err, size_t err_cap)
{
    const long len = woolly_chat_render(fam, m, n, add_assistant, NULL, 0);
    if (len < 0) {
        if (fam == WOOLLY_CHAT_UNKNOWN)
            snprintf(err, err_cap,
                     "the model's chat template (tokenizer.chat_template) is not one Woolly can render");
        else
            snprintf(err, err_cap,
                     "the %s chat template cannot express this conversation (a system message after the "
                     "first turn)",
                     woolly_chat_family_name(fam));
        return -1;
    }
    if (!(*out = malloc((size_t)len + 1))) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    woolly_chat_render(fam, m, n, add_assistant, *out, (size_t)len + 1);
    return len;
}

static long render_builtin(enum woolly_chat_family fam, const woolly_chat_msg *m,
                           const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                           size_t n_tools, bool add_assistant, char **out, char *err, size_t err_cap)
{
    *out = NULL;
    if (!n_tools && !woolly_chat_has_tool_parts(m, parts, n))
        return render_plain_turns(fam, m, n, add_assistant, out, err, err_cap);
    woolly_chat_lowered low;
    if (woolly_chat_lower_tools(fam, m, parts, n, tools, n_tools, &low)) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    const long len = render_plain_turns(fam, low.msgs, low.n, add_assistant, out, err, err_cap);
    woolly_chat_lowered_free(&low);
    return len;
}

/* A template that raise_exception()s refuses the conversation: that is the answer, not a failure of
 * the interpreter (jinja_methods.c words the message so). */
static bool refused(const char *err)
{
    return strstr(err, "the template raised an exception") != NULL;
}

static _Atomic bool warned_fallback;

long woolly_chat_format_render(const woolly_chat_format *f, const woolly_chat_msg *m, size_t n,
                               bool add_assistant, char **out, char *err, size_t err_cap)
{
    return woolly_chat_format_render_tools(f, m, NULL, n, NULL, 0, add_assistant, out, err, err_cap);
}

long woolly_chat_format_render_tools(const woolly_chat_format *f, const woolly_chat_msg *m,
                                     const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                                     size_t n_tools, bool add_assistant, char **out, char *err,
                                     size_t err_cap)
{
    *out = NULL;
    if (!f->jinja)
        return render_builtin(f->family, m, parts, n, tools, n_tools, add_assistant, out, err, err_cap);
    const long len = render_jinja(f, m, parts, n, tools, n_tools, add_assistant, out, err, err_cap);
    if (len >= 0 || refused(err) || f->family == WOOLLY_CHAT_UNKNOWN || f->family == WOOLLY_CHAT_PLAIN)
        return len;
    if (!atomic_exchange(&warned_fallback, true))
        fprintf(stderr,
                "%s: warning: the model's chat template failed (%s); rendering its %s format instead\n",
                f->who ? f->who : "woolly", err, woolly_chat_family_name(f->family));
    return render_builtin(f->family, m, parts, n, tools, n_tools, add_assistant, out, err, err_cap);
}

static bool starts_with(const char *s, const char *prefix)
{
    return prefix && *prefix && !strncmp(s, prefix, strlen(prefix));
}

int woolly_chat_format_open(woolly_chat_format *f, const char *tmpl, const char *bos, const char *eos,
                            int forced, const char *who)
{
    *f = (woolly_chat_format){.who = who};
    f->bos = bos ? strdup(bos) : NULL;
    f->eos = eos ? strdup(eos) : NULL;
    if (forced >= 0 && forced < WOOLLY_CHAT_UNKNOWN) {
        f->family = (enum woolly_chat_family)forced;
        f->bos_in_text = woolly_chat_bos_in_text(f->family);
        return 0;
    }
    f->family = woolly_chat_detect(tmpl, tmpl ? strlen(tmpl) : 0);
    if (!tmpl)
        return 0;
    char err[512];
    f->jinja = jinja_parse(tmpl, strlen(tmpl), err, sizeof err);
    if (f->jinja) { /* a probe: the template must render a plain exchange */
        static const woolly_chat_msg probe[] = {{"user", "Hi"}};
        char *text = NULL;
        if (render_jinja(f, probe, NULL, 1, NULL, 0, true, &text, err, sizeof err) >= 0) {
            f->bos_in_text = starts_with(text, f->bos);
            if (f->family == WOOLLY_CHAT_UNKNOWN)
                snprintf(f->name, sizeof f->name, "the model's own (Jinja)");
            else
                snprintf(f->name, sizeof f->name, "the model's own (Jinja, recognized as %s)",
                         woolly_chat_family_name(f->family));
            free(text);
            return 0;
        }
        jinja_free(f->jinja);
        f->jinja = NULL;
    }
    f->bos_in_text = woolly_chat_bos_in_text(f->family);
    if (f->family == WOOLLY_CHAT_UNKNOWN)
        return -1;
    fprintf(stderr,
            "%s: warning: cannot render the model's chat template (%s); using the built-in %s format\n",
            who ? who : "woolly", err, woolly_chat_family_name(f->family));
    return 0;
}

int woolly_chat_format_open_model(woolly_chat_format *f, const woolly_model *m, int forced, const char *who)
{
    const int32_t bos = m->tok ? woolly_tokenizer_bos(m->tok) : -1,
                  eos = m->tok ? woolly_tokenizer_eos(m->tok) : -1;
    return woolly_chat_format_open(f, m->chat_template, bos >= 0 ? woolly_tokenizer_piece(m->tok, bos) : NULL,
                                   eos >= 0 ? woolly_tokenizer_piece(m->tok, eos) : NULL, forced, who);
}

void woolly_chat_format_close(woolly_chat_format *f)
{
    jinja_free(f->jinja);
    free(f->bos);
    free(f->eos);
    *f = (woolly_chat_format){0};
}

#define BUILTIN(fam, bos) [fam] = {.family = fam, .bos_in_text = bos}
static const woolly_chat_format BUILTINS[] = {
    BUILTIN(WOOLLY_CHAT_PLAIN, false),
    BUILTIN(WOOLLY_CHAT_GRANITE, false),
    BUILTIN(WOOLLY_CHAT_LLAMA3, true),
    BUILTIN(WOOLLY_CHAT_CHATML, false),
    BUILTIN(WOOLLY_CHAT_LLAMA2, true),
    BUILTIN(WOOLLY_CHAT_QWEN2, false),
    BUILTIN(WOOLLY_CHAT_GEMMA, false),
    BUILTIN(WOOLLY_CHAT_PHI3, false),
    BUILTIN(WOOLLY_CHAT_MISTRAL_V1, false),
    BUILTIN(WOOLLY_CHAT_MISTRAL_V3, false),
    BUILTIN(WOOLLY_CHAT_MISTRAL_V3_TEKKEN, false),
    BUILTIN(WOOLLY_CHAT_MISTRAL_V7, false),
    BUILTIN(WOOLLY_CHAT_PHI4_MINI, false),
    BUILTIN(WOOLLY_CHAT_UNKNOWN, false),
};
#undef BUILTIN

const woolly_chat_format *woolly_chat_builtin(enum woolly_chat_family fam)
{
    return &BUILTINS[(unsigned)fam <= WOOLLY_CHAT_UNKNOWN ? fam : WOOLLY_CHAT_UNKNOWN];
}

const char *woolly_chat_format_name(const woolly_chat_format *f)
{
    return f->jinja ? f->name : woolly_chat_family_name(f->family);
}
