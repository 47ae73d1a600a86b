/* woolly chat: an interactive conversation on stdin/stdout. Each user line is added to the
 * conversation, which is rendered with the model's chat template (chat.h) and tokenized; only the
 * tokens after the longest prefix already in the KV cache are evaluated, so earlier turns are not
 * recomputed. `/exit` or end of input ends the chat.
 *
 * With --context-shift a full context does not end the chat: the oldest turns' tokens after the system
 * prompt are forgotten (half of what follows it, as llama.cpp does) and the conversation goes on
 * (woolly_context_shift). From then on the cache no longer holds the whole rendered conversation, so
 * each new turn is evaluated as the text its rendering adds to what the cache stands for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "cli_common.h"
#include "cli_spec.h"
#include "cli_template.h"
#include "commands.h"
#include "model.h"
#include "tokenizer.h"

typedef struct chat_state {
    woolly_chat_msg *msgs;
    char **owned; /* the contents we allocated, freed at the end */
    size_t n, cap;
} chat_state;

static int add_msg(chat_state *s, const char *role, const char *content, size_t len)
{
    if (s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 16;
        woolly_chat_msg *m = realloc(s->msgs, cap * sizeof *m);
        if (!m)
            return -1;
        s->msgs = m;
        char **o = realloc(s->owned, cap * sizeof *o);
        if (!o)
            return -1;
        s->owned = o;
        s->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, content, len);
    copy[len] = 0;
    s->owned[s->n] = copy;
    s->msgs[s->n++] = (woolly_chat_msg){role, copy};
    return 0;
}

static void free_chat(chat_state *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->owned[i]);
    free(s->owned);
    free(s->msgs);
}

/* A growable byte buffer for the reply being generated. */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static int append(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p)
            return -1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
    return 0;
}

/* The first n_msgs messages rendered (heap), or NULL with the reason in err. */
static char *render_n(const woolly_chat_format *fmt, const chat_state *s, size_t n_msgs, bool add_assistant,
                      char *err, size_t err_cap)
{
    char *out;
    return woolly_chat_format_render(fmt, s->msgs, n_msgs, add_assistant, &out, err, err_cap) < 0 ? NULL : out;
}

/* The tokens a context shift keeps: the longest common prefix of the cache and the rendering of the
 * conversation's start: the system message (with BOS and whatever the template puts before it), or,
 * where the template writes the system prompt into the first user turn (Gemma), that turn too. Without a
 * system message: the BOS the template or the vocabulary puts first. */
static int32_t shift_keep(const char *cmd, const woolly_model *m, const woolly_chat_format *fmt,
                          const chat_state *s, bool add_bos, const woolly_token *hist, int32_t n_hist)
{
    const bool has_system = s->n > 0 && !strcmp(s->msgs[0].role, "system");
    int32_t keep = 0, keep_none = 0;
    for (size_t k = 0; k <= (has_system ? 2u : 0u) && k <= s->n; k++) {
        char err[256];
        char *text = render_n(fmt, s, k, false, err, sizeof err);
        int32_t n_ids = 0;
        woolly_token *ids = text ? cli_tokenize(cmd, m, text, add_bos, &n_ids) : NULL;
        free(text);
        if (!ids)
            return keep;
        int32_t l = 0;
        while (l < n_ids && l < n_hist && ids[l] == hist[l])
            l++;
        free(ids);
        if (k == 0)
            keep_none = l;
        keep = l;
        if (k == 1 && keep > keep_none)
            break; /* the system message shows on its own */
        if (k == 0 && !has_system)
            break;
    }
    return keep;
}

/* Where the text this turn adds begins in its rendering `full`, once the cache no longer holds the whole
 * conversation: the cache holds (the end of) the previous turn's rendering `prev` and the reply's
 * tokens, as generated. The reply shows in the rendering of the conversation up to it, after `prev`
 * (trimmed, as some templates trim it); what follows it there (the turn's closing markup) and the new
 * turn are the added text. (size_t)-1 if the template does not render turn by turn (Mistral v3 moves
 * the system prompt to the last instruction). */
static size_t added_text_start(const woolly_chat_format *fmt, const chat_state *s, const char *prev,
                               const char *full)
{
    if (s->n < 2)
        return (size_t)-1;
    char err[256];
    char *upto = render_n(fmt, s, s->n - 1, false, err, sizeof err); /* up to and with the reply */
    if (!upto)
        return (size_t)-1;
    const size_t lp = strlen(prev), lu = strlen(upto);
    size_t at = (size_t)-1;
    if (!strncmp(upto, prev, lp) && !strncmp(full, upto, lu)) {
        const char *reply = s->msgs[s->n - 2].content, *ws = " \t\n\r\v\f";
        while (*reply && strchr(ws, *reply))
            reply++;
        size_t rl = strlen(reply);
        while (rl > 0 && strchr(ws, reply[rl - 1]))
            rl--;
        at = lp;
        for (size_t i = lp; rl > 0 && i + rl <= lu; i++)
            if (!strncmp(upto + i, reply, rl)) {
                at = i + rl;
                break;
            }
    }
    free(upto);
    return at;
}

/* Forgets half of what follows n_keep (at least `need` tokens) so that the cache has room. Returns the
 * new length, or -1 (message printed). */
static int32_t shift(const char *cmd, woolly_context *c, woolly_token *hist, int32_t n_hist, int32_t n_keep,
                     int32_t need, bool verbose)
{
    int32_t n_discard = (n_hist - n_keep) / 2;
    if (n_discard < need)
        n_discard = need;
    if (n_discard < 1 || n_discard > n_hist - n_keep) {
        fprintf(stderr,
                "\nwoolly %s: the context is too small to shift: %d tokens are kept (the system prompt), "
                "%d more are needed (raise --ctx-size)\n",
                cmd, n_keep, need);
        return -1;
    }
    const int32_t n = woolly_context_shift(c, hist, n_hist, n_keep, n_discard);
    if (n < 0)
        cli_api_error(cmd);
    else if (verbose)
        fprintf(stderr, "\n[context shift: %d tokens kept, %d forgotten, %d moved]\n", n_keep, n_discard,
                n - n_keep);
    return n;
}

int woolly_cmd_chat(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *system = NULL;
    int32_t n_predict = 1024;
    bool verbose = false, ctx_shift = false;
    cli_context_opts ctx_opts;
    cli_sampling_opts samp;
    cli_table t = {.synopsis = "-m MODEL [options]   (then type; /exit or end of input quits)"};
    cli_add_model_flag(&t, &model_path);
    cli_add(&t, (cli_flag){"-s", "--system", CLI_STR, &system, 0, 0, "TEXT", "a system prompt", NULL});
    cli_template_opts tmpl_opts;
    cli_add_template_flags(&t, &tmpl_opts,
                           "the prompt format (default: recognized from the model's tokenizer.chat_template)");
    cli_add(&t, (cli_flag){NULL, "--context-shift", CLI_BOOL, &ctx_shift, 0, 0, NULL,
                           "when the context is full, forget the oldest turns (keeping the system prompt) "
                           "instead of stopping",
                           NULL});
    cli_add(&t, (cli_flag){"-n", "--n-predict", CLI_INT, &n_predict, 0, 1 << 30, "N",
                           "tokens per reply at most (default 1024)", NULL});
    cli_add(&t, (cli_flag){"-v", "--verbose", CLI_BOOL, &verbose, 0, 0, NULL,
                           "report per turn how many tokens came from the cache and how many were evaluated",
                           NULL});
    cli_add_sampling_flags(&t, &samp);
    cli_add_context_flags(&t, &ctx_opts);
    cli_spec_opts spec_opts;
    cli_add_spec_flags(&t, &spec_opts);
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    bool bad_spec;
    const bool speculate = cli_spec_wanted(cmd, &spec_opts, ctx_shift, &bad_spec);
    if (bad_spec)
        return 2;
    int forced;
    char *tmpl_text = NULL;
    if (!cli_template_finish(cmd, &tmpl_opts, &forced, &tmpl_text))
        return 2;
    if (cli_sampling_finish(cmd, &samp, true)) {
        free(tmpl_text);
        return 2;
    }

    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m) {
        free(tmpl_text);
        return 1;
    }
    int status = 1;
    woolly_context *c = NULL, *dc = NULL;
    woolly_model *dm = NULL;
    woolly_spec *spec = NULL;
    woolly_sampler *smp = NULL;
    woolly_token *hist = NULL, *ids = NULL;
    char *line = NULL, *buf = NULL, *prompt = NULL, *prev_prompt = NULL;
    size_t line_cap = 0;
    chat_state chat = {0};
    woolly_chat_format fmt = {0};
    text reply = {0};
    woolly_context_params cp;
    if (!m->tok) {
        fprintf(stderr, "woolly %s: %s: no usable tokenizer: %s\n", cmd, model_path, m->tok_err.msg);
        goto done;
    }
    cli_context_params(cmd, &ctx_opts, m, &cp);
    if (speculate)
        cli_spec_context_params(&spec_opts, &cp);
    if (!(c = woolly_context_open(m, &cp)) || !(smp = cli_open_sampler(m, &samp))) {
        cli_api_error(cmd);
        goto done;
    }
    if (speculate && !(spec = cli_spec_open(cmd, &spec_opts, &ctx_opts, c, &dm, &dc)))
        goto done;
    char who[64];
    snprintf(who, sizeof who, "woolly %s", cmd);
    const int unknown = woolly_chat_format_open_model(&fmt, m, tmpl_text, forced, who);
    if (tmpl_text && !fmt.jinja) { /* a template given on purpose is not replaced by a built-in */
        fprintf(stderr, "woolly %s: %s: the chat template cannot be rendered: %s\n", cmd, tmpl_opts.file,
                fmt.jinja_error);
        goto done;
    }
    if (unknown) {
        fprintf(stderr,
                "woolly %s: %s: the model's chat template (tokenizer.chat_template) is not one Woolly "
                "recognizes; choose the prompt format with --chat-template %s\n",
                cmd, model_path, woolly_chat_family_choices());
        goto done;
    }
    fprintf(stderr, "woolly %s: chat template %s; /exit or end of input quits\n", cmd,
            woolly_chat_format_name(&fmt));
    const bool add_bos = !fmt.bos_in_text && woolly_model_adds_bos(m);
    const int32_t n_ctx = woolly_context_n_ctx(c);
    size_t cap = 64;
    for (int32_t id = 0; id < woolly_tokenizer_n_vocab(m->tok); id++) {
        const int64_t n = woolly_token_bytes(m->tok, id, NULL, 0);
        cap = 64 + (size_t)n > cap ? 64 + (size_t)n : cap;
    }
    hist = malloc(sizeof *hist * (size_t)n_ctx);
    buf = malloc(cap);
    if (!hist || !buf || (system && add_msg(&chat, "system", system, strlen(system)))) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }
    const bool interactive = isatty(STDIN_FILENO);
    int32_t n_hist = 0, turn = 0, n_keep = 0;
    bool shifted = false;
    for (;;) {
        if (interactive) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0)
            break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!strcmp(line, "/exit"))
            break;
        if (len == 0)
            continue;
        free(prev_prompt);
        prev_prompt = prompt; /* the previous turn's rendering: the cache holds it, then the reply */
        prompt = NULL;
        free(ids);
        ids = NULL;
        int32_t n_ids;
        char err[512] = "out of memory";
        if (add_msg(&chat, "user", line, (size_t)len) ||
            !(prompt = render_n(&fmt, &chat, chat.n, true, err, sizeof err))) {
            fprintf(stderr, "woolly %s: cannot render the conversation with the %s template: %s\n", cmd,
                    woolly_chat_format_name(&fmt), err);
            goto done;
        }
        if (shifted || !(ids = cli_tokenize(cmd, m, prompt, add_bos, &n_ids)) || n_ids >= n_ctx) {
            if (!shifted && !ids)
                goto done;
            if (!ctx_shift || !prev_prompt) {
                if (ids)
                    fprintf(stderr,
                            "woolly %s: the conversation has %d tokens, the context only %d (raise "
                            "--ctx-size%s)\n",
                            cmd, n_ids, n_ctx, ctx_shift ? "" : ", or let --context-shift forget old turns");
                goto done;
            }
            const size_t hl = added_text_start(&fmt, &chat, prev_prompt, prompt);
            if (hl == (size_t)-1) {
                fprintf(stderr,
                        "woolly %s: the %s template does not render the conversation turn by turn (it moves "
                        "the system prompt), so the context cannot be shifted; raise --ctx-size\n",
                        cmd, woolly_chat_format_name(&fmt));
                goto done;
            }
            free(ids);
            if (!(ids = cli_tokenize(cmd, m, prompt + hl, false, &n_ids)))
                goto done;
            if (!shifted)
                n_keep = shift_keep(cmd, m, &fmt, &chat, add_bos, hist, n_hist);
            shifted = true;
            if (n_hist + n_ids >= n_ctx &&
                (n_hist = shift(cmd, c, hist, n_hist, n_keep, n_hist + n_ids - n_ctx + 1, verbose)) < 0)
                goto done;
            if (verbose)
                fprintf(stderr, "[turn %d: %d tokens in the cache, %d evaluated]\n", ++turn, n_hist, n_ids);
            if (woolly_eval(c, ids, n_ids)) {
                cli_api_error(cmd);
                goto done;
            }
            memcpy(hist + n_hist, ids, sizeof *ids * (size_t)n_ids);
            n_hist += n_ids;
        } else if (spec) { /* it keeps the prefix its caches share with the conversation */
            if (woolly_spec_begin(spec, ids, n_ids)) {
                cli_api_error(cmd);
                goto done;
            }
        } else {
            /* Reuse the cached prefix; at least one token is evaluated so that there are logits. */
            int32_t keep = 0;
            while (keep < n_hist && keep < n_ids - 1 && hist[keep] == ids[keep])
                keep++;
            if (woolly_context_rewind(c, keep)) { /* a sliding window's ring has moved past it */
                keep = 0;
                woolly_context_rewind(c, 0);
            }
            if (verbose)
                fprintf(stderr, "[turn %d: %d tokens reused from the cache, %d evaluated]\n", ++turn, keep,
                        n_ids - keep);
            if (woolly_eval(c, ids + keep, n_ids - keep)) {
                cli_api_error(cmd);
                goto done;
            }
            memcpy(hist + keep, ids + keep, sizeof *ids * (size_t)(n_ids - keep));
            n_hist = n_ids;
        }

        woolly_detok_stream ds;
        woolly_detok_stream_init(&ds, m->tok);
        reply.len = 0;
        for (int32_t k = 0; spec && k < n_predict;) {
            woolly_token step[65];
            const int32_t got = woolly_spec_step(spec, smp, step, n_predict - k < 65 ? n_predict - k : 65);
            if (got < 0) {
                cli_api_error(cmd);
                goto done;
            }
            if (got == 0) {
                fprintf(stderr, "\nwoolly %s: the context of %d tokens is full (raise --ctx-size)\n", cmd,
                        n_ctx);
                goto done;
            }
            bool end = false;
            for (int32_t i = 0; i < got && !end; i++, k++) {
                if ((end = woolly_token_is_eog(m, step[i])))
                    break;
                const int64_t n = woolly_detok_stream_feed(&ds, step[i], buf, cap);
                if (n > 0) {
                    fwrite(buf, 1, (size_t)n, stdout);
                    fflush(stdout);
                    if (append(&reply, buf, (size_t)n))
                        goto oom;
                }
            }
            if (end)
                break;
        }
        if (spec && verbose)
            cli_spec_report(stderr, spec);
        for (int32_t k = 0; !spec && k < n_predict; k++) {
            const woolly_token tok = woolly_sampler_sample(smp, woolly_get_logits(c, -1));
            if (woolly_sampler_error(smp)) {
                fprintf(stderr, "\nwoolly %s: %s\n", cmd, woolly_sampler_error(smp));
                goto done;
            }
            woolly_sampler_accept(smp, tok);
            if (woolly_token_is_eog(m, tok))
                break;
            const int64_t n = woolly_detok_stream_feed(&ds, tok, buf, cap);
            if (n > 0) {
                fwrite(buf, 1, (size_t)n, stdout);
                fflush(stdout);
                if (append(&reply, buf, (size_t)n))
                    goto oom;
            }
            if (n_hist == n_ctx) {
                if (!ctx_shift) {
                    fprintf(stderr,
                            "\nwoolly %s: the context of %d tokens is full (raise --ctx-size, or let "
                            "--context-shift forget old turns)\n",
                            cmd, n_ctx);
                    goto done;
                }
                if (!shifted)
                    n_keep = shift_keep(cmd, m, &fmt, &chat, add_bos, hist, n_hist);
                shifted = true;
                if ((n_hist = shift(cmd, c, hist, n_hist, n_keep, 1, verbose)) < 0)
                    goto done;
            }
            if (woolly_eval(c, &tok, 1)) {
                cli_api_error(cmd);
                goto done;
            }
            hist[n_hist++] = tok;
        }
        const int64_t n = woolly_detok_stream_flush(&ds, buf, cap);
        if (n > 0) {
            fwrite(buf, 1, (size_t)n, stdout);
            if (append(&reply, buf, (size_t)n))
                goto oom;
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (add_msg(&chat, "assistant", reply.p ? reply.p : "", reply.len))
            goto oom;
    }
    status = 0;
    goto done;
oom:
    fprintf(stderr, "woolly %s: out of memory\n", cmd);
done:
    free(prev_prompt);
    free(reply.p);
    free_chat(&chat);
    woolly_chat_format_close(&fmt);
    free(tmpl_text);
    free(prompt);
    free(ids);
    free(line);
    free(buf);
    free(hist);
    woolly_sampler_close(smp);
    woolly_spec_close(spec);
    woolly_context_close(dc);
    woolly_model_close(dm);
    woolly_context_close(c);
    woolly_model_close(m);
    return status;
}
