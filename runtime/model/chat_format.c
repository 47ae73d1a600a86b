/* The format a command renders conversations with (chat.h): the model's own template through the Jinja
 * interpreter first, the built-in families as the fallback. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "chat_text.h"
#include "chat_tools.h"
#include "jinja.h"
#include "model.h"
#include "tokenizer.h"

static void put_tool_calls(chat_text *t, const woolly_chat_msg_tools *m)
{
    chat_text_puts(t, ", \"tool_calls\": [");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const woolly_chat_tool_call *c = &m->tool_calls[k];
        chat_text_puts(t, k ? ", {\"id\": " : "{\"id\": ");
        chat_text_json(t, c->id ? c->id : "");
        chat_text_puts(t, ", \"type\": \"function\", \"function\": {\"name\": ");
        chat_text_json(t, c->name);
        chat_text_puts(t, ", \"arguments\": ");
        if (c->arguments_json) /* JSON text the caller checked: the object itself */
            chat_text_puts(t, c->arguments);
        else
            chat_text_json(t, c->arguments ? c->arguments : "");
        chat_text_puts(t, "}}");
    }
    chat_text_puts(t, "]");
}

/* The variables Hugging Face gives a chat template: messages (with their tool_calls, tool_call_id and
 * name when given), tools (when given), add_generation_prompt, bos_token, eos_token. */
static char *context_json(const woolly_chat_format *f, const woolly_chat_msg *m,
                          const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                          size_t n_tools, bool add_assistant)
{
    chat_text t = {0};
    chat_text_put(&t, "{\"messages\": [", 14);
    for (size_t i = 0; i < n; i++) {
        chat_text_put(&t, i ? ", {\"role\": " : "{\"role\": ", i ? 11 : 9);
        chat_text_json(&t, m[i].role);
        chat_text_put(&t, ", \"content\": ", 13);
        chat_text_json(&t, m[i].content);
        if (parts && parts[i].n_tool_calls)
            put_tool_calls(&t, &parts[i]);
        if (parts && parts[i].tool_call_id) {
            chat_text_puts(&t, ", \"tool_call_id\": ");
            chat_text_json(&t, parts[i].tool_call_id);
        }
        if (parts && parts[i].name) {
            chat_text_puts(&t, ", \"name\": ");
            chat_text_json(&t, parts[i].name);
        }
        chat_text_put(&t, "}", 1);
    }
    chat_text_puts(&t, "]");
    if (n_tools) { /* JSON texts the caller checked */
        chat_text_puts(&t, ", \"tools\": [");
        for (size_t i = 0; i < n_tools; i++) {
            if (i)
                chat_text_puts(&t, ", ");
            chat_text_puts(&t, tools[i]);
        }
        chat_text_puts(&t, "]");
    }
    chat_text_puts(&t, ", \"add_generation_prompt\": ");
    chat_text_put(&t, add_assistant ? "true" : "false", add_assistant ? 4 : 5);
    chat_text_put(&t, ", \"bos_token\": ", 15);
    chat_text_json(&t, f->bos ? f->bos : "");
    chat_text_put(&t, ", \"eos_token\": ", 15);
    chat_text_json(&t, f->eos ? f->eos : "");
    chat_text_put(&t, "}", 1);
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
            f->named_calls = strstr(tmpl, "[ARGS]") != NULL;
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
    snprintf(f->jinja_error, sizeof f->jinja_error, "%s", err);
    f->bos_in_text = woolly_chat_bos_in_text(f->family);
    if (f->family == WOOLLY_CHAT_UNKNOWN)
        return -1;
    fprintf(stderr,
            "%s: warning: cannot render the model's chat template (%s); using the built-in %s format\n",
            who ? who : "woolly", err, woolly_chat_family_name(f->family));
    return 0;
}

int woolly_chat_format_open_model(woolly_chat_format *f, const woolly_model *m, const char *tmpl, int forced,
                                  const char *who)
{
    const int32_t bos = m->tok ? woolly_tokenizer_bos(m->tok) : -1,
                  eos = m->tok ? woolly_tokenizer_eos(m->tok) : -1;
    const int rc = woolly_chat_format_open(f, tmpl ? tmpl : m->chat_template,
                                           bos >= 0 ? woolly_tokenizer_piece(m->tok, bos) : NULL,
                                           eos >= 0 ? woolly_tokenizer_piece(m->tok, eos) : NULL, forced, who);
    if (tmpl && f->jinja) { /* not the model's own: say so */
        if (f->family == WOOLLY_CHAT_UNKNOWN)
            snprintf(f->name, sizeof f->name, "the template given (Jinja)");
        else
            snprintf(f->name, sizeof f->name, "the template given (Jinja, recognized as %s)",
                     woolly_chat_family_name(f->family));
    }
    return rc;
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
