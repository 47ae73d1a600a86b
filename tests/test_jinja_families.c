/* The families' published chat templates (tests/data/chat/), rendered by the Jinja interpreter through
 * woolly_chat_format, against the built-in format Woolly recognizes them as: byte for byte where the
 * built-in renders the same format, and where the template legitimately writes more (BOS as text, a
 * date line, a default system prompt, EOS after the last turn), the exact text the template's logic
 * gives, built here from the built-in's rendering and said why. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"

static char *read_fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, WOOLLY_SOURCE_DIR "/tests/data/chat/%s", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    static char buf[65536];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    cr_assert(n > 0 && n < sizeof buf - 1, "%s: %zu bytes", path, n);
    buf[n] = 0;
    return strdup(buf);
}

/* The conversations: system + user, multi-turn with and without a system prompt, a finished exchange
 * without the assistant's cue, a lone user turn. */
static const woolly_chat_msg SYS_USER[] = {{"system", "You are terse."}, {"user", "Hi"}};
static const woolly_chat_msg MULTI[] = {
    {"system", "You are terse."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Name a color."}};
static const woolly_chat_msg MULTI_NOSYS[] = {
    {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Name a color."}};
static const woolly_chat_msg DONE[] = {{"system", "You are terse."}, {"user", "Hi"}, {"assistant", "Hello."}};
static const woolly_chat_msg LONE[] = {{"user", "Hi there, \"friend\" \\ {{ x }}"}};

typedef struct convo {
    const woolly_chat_msg *m;
    size_t n;
    bool gen;
    bool has_system;
} convo;
#define CONVO(a, gen, sys)                                                                                   \
    {                                                                                                        \
        a, sizeof a / sizeof a[0], gen, sys                                                                  \
    }
static const convo CONVOS[] = {CONVO(SYS_USER, true, true),     CONVO(MULTI, true, true),
                               CONVO(MULTI_NOSYS, true, false), CONVO(DONE, false, true),
                               CONVO(LONE, false, false),       CONVO(LONE, true, false)};
enum { N_CONVOS = sizeof CONVOS / sizeof CONVOS[0] };

static woolly_chat_format open_fixture(const char *file, const char *bos, const char *eos,
                                       enum woolly_chat_family family)
{
    char *tmpl = read_fixture(file);
    woolly_chat_format f;
    cr_assert_eq(woolly_chat_format_open(&f, tmpl, bos, eos, -1, "test"), 0, "%s", file);
    free(tmpl);
    cr_assert(f.jinja != NULL, "%s: the interpreter does not render it", file);
    cr_assert_eq(f.family, family, "%s recognized as %s", file, woolly_chat_family_name(f.family));
    return f;
}

static char *render(const woolly_chat_format *f, const convo *c)
{
    char *out, err[512];
    const long n = woolly_chat_format_render(f, c->m, c->n, c->gen, &out, err, sizeof err);
    cr_assert(n >= 0, "render failed: %s", err);
    cr_assert_eq(strlen(out), (size_t)n);
    return out;
}

static char *builtin(enum woolly_chat_family fam, const convo *c)
{
    char *out, err[512];
    cr_assert(
        woolly_chat_format_render(woolly_chat_builtin(fam), c->m, c->n, c->gen, &out, err, sizeof err) >= 0,
        "%s", err);
    return out;
}

static char *concat3(const char *a, const char *b, const char *c)
{
    char *s = malloc(strlen(a) + strlen(b) + strlen(c) + 1);
    strcpy(s, a);
    strcat(s, b);
    strcat(s, c);
    return s;
}

/* `text` with `insert` put after the first `after` in it (or at its start when after is ""). */
static char *insert_after(const char *text, const char *after, const char *insert)
{
    const char *at = *after ? strstr(text, after) : text;
    cr_assert(at != NULL, "'%s' not in [%s]", after, text);
    const size_t k = (size_t)(at - text) + strlen(after);
    char *head = strndup(text, k), *s = concat3(head, insert, text + k);
    free(head);
    return s;
}

static void expect_same(const char *what, size_t i, const char *got, const char *want)
{
    cr_expect_str_eq(got, want, "%s, conversation %zu: the template rendered\n[%s]\nexpected\n[%s]", what, i,
                     got, want);
}

/* Templates whose rendering equals the built-in's, after `prefix` (BOS the template writes as text). */
static void expect_builtin(const char *file, enum woolly_chat_family fam, const char *bos, const char *prefix,
                           bool need_system)
{
    woolly_chat_format f = open_fixture(file, bos, "</s>", fam);
    cr_expect_eq(f.bos_in_text, *prefix != 0, "%s: BOS in the text", file);
    for (size_t i = 0; i < N_CONVOS; i++) {
        if (need_system && !CONVOS[i].has_system)
            continue;
        char *got = render(&f, &CONVOS[i]), *b = builtin(fam, &CONVOS[i]), *want = concat3(prefix, b, "");
        expect_same(file, i, got, want);
        free(got);
        free(b);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, qwen2_5_equals_builtin)
{
    expect_builtin("qwen2.5-instruct.jinja", WOOLLY_CHAT_QWEN2, "<|endoftext|>", "", false);
}

Test(jinja_families, chatml_equals_builtin)
{
    /* The ChatML template Woolly's synthesized models carry (runtime/synth/synth_template.c). */
    static const char CHATML[] =
        "{%- for message in messages %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n' }}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    woolly_chat_format f;
    cr_assert_eq(woolly_chat_format_open(&f, CHATML, "<|endoftext|>", "<|im_end|>", -1, "test"), 0);
    cr_assert(f.jinja && f.family == WOOLLY_CHAT_CHATML);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *want = builtin(WOOLLY_CHAT_CHATML, &CONVOS[i]);
        expect_same("chatml", i, got, want);
        free(got);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, qwen3_equals_chatml_but_the_last_reply)
{
    woolly_chat_format f = open_fixture("qwen3.jinja", "<|endoftext|>", "<|im_end|>", WOOLLY_CHAT_CHATML);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_CHATML, &CONVOS[i]);
        /* An assistant message after the last user turn is the one being written: the template opens
         * its (empty) thinking block, as Qwen3 was trained to see. */
        const bool replying = !CONVOS[i].gen && !strcmp(CONVOS[i].m[CONVOS[i].n - 1].role, "assistant");
        char *want =
            replying ? insert_after(b, "<|im_start|>assistant\n", "<think>\n\n</think>\n\n") : strdup(b);
        expect_same("qwen3", i, got, want);
        free(got);
        free(b);
        free(want);
    }
    /* Earlier replies lose their thinking. */
    const woolly_chat_msg think[] = {
        {"user", "2+2?"}, {"assistant", "<think>\nadd\n</think>\n\n4"}, {"user", "3+3?"}};
    char *out, err[512];
    cr_assert(woolly_chat_format_render(&f, think, 3, true, &out, err, sizeof err) >= 0, "%s", err);
    cr_expect_str_eq(out, "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                          "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    /* A system message alone renders too (the prefix a context shift keeps). */
    const woolly_chat_msg sys_only[] = {{"system", "S"}};
    cr_assert(woolly_chat_format_render(&f, sys_only, 1, false, &out, err, sizeof err) >= 0, "%s", err);
    cr_expect_str_eq(out, "<|im_start|>system\nS<|im_end|>\n");
    free(out);
    woolly_chat_format_close(&f);
}

Test(jinja_families, phi3_5_equals_builtin_with_eos_after_a_finished_exchange)
{
    woolly_chat_format f =
        open_fixture("phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", WOOLLY_CHAT_PHI3);
    cr_expect(!f.bos_in_text);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_PHI3, &CONVOS[i]);
        /* Without the assistant's cue the template ends with EOS (a finished document). */
        char *want = concat3(b, CONVOS[i].gen ? "" : "<|endoftext|>", "");
        expect_same("phi-3.5", i, got, want);
        free(got);
        free(b);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, gemma_2_writes_bos_and_refuses_a_system_prompt)
{
    woolly_chat_format f = open_fixture("gemma-2-it.jinja", "<bos>", "<eos>", WOOLLY_CHAT_GEMMA);
    cr_expect(f.bos_in_text);
    for (size_t i = 0; i < N_CONVOS; i++) {
        if (CONVOS[i].has_system)
            continue; /* Gemma 3's template folds it into the first turn (the built-in); Gemma 2's refuses */
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_GEMMA, &CONVOS[i]);
        char *want = concat3("<bos>", b, "");
        expect_same("gemma-2", i, got, want);
        free(got);
        free(b);
        free(want);
    }
    char *out, err[512];
    cr_expect_eq(woolly_chat_format_render(&f, SYS_USER, 2, true, &out, err, sizeof err), -1);
    cr_expect(strstr(err, "System role not supported") != NULL, "%s", err);
    woolly_chat_format_close(&f);
}

/* Gemma 3's template is the built-in (which follows it: a system prompt folded into the first user turn)
 * after BOS as text, on every conversation. */
Test(jinja_families, gemma_3_equals_builtin_with_bos)
{
    woolly_chat_format f = open_fixture("gemma-3-it.jinja", "<bos>", "<eos>", WOOLLY_CHAT_GEMMA);
    cr_expect(f.bos_in_text);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_GEMMA, &CONVOS[i]);
        char *want = concat3("<bos>", b, "");
        expect_same("gemma-3", i, got, want);
        free(got);
        free(b);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, mistral_equals_builtin)
{
    expect_builtin("mistral-nemo-instruct-2407.jinja", WOOLLY_CHAT_MISTRAL_V3_TEKKEN, "<s>", "<s>", false);
    /* v7 writes a default system prompt (with today's date) when the conversation has none: only
     * conversations with one compare. */
    expect_builtin("mistral-small-3.2-instruct-2506.jinja", WOOLLY_CHAT_MISTRAL_V7, "<s>", "<s>", true);
    expect_builtin("mistral-v1.jinja", WOOLLY_CHAT_MISTRAL_V1, "<s>", "<s>", false);
    expect_builtin("mistral-v3.jinja", WOOLLY_CHAT_MISTRAL_V3, "<s>", "<s>", false);
}

static const char *today(const char *fmt)
{
    static char buf[64];
    const time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(buf, sizeof buf, fmt, &tm);
    return buf;
}

/* Llama 3.1 and 3.2 always open with a system turn holding the knowledge cutoff and today's date (3.1:
 * a fixed date unless date_string is given; 3.2: strftime_now), before the conversation's own system
 * prompt. */
static void expect_llama3(const char *file, const char *date)
{
    woolly_chat_format f = open_fixture(file, "<|begin_of_text|>", "<|eot_id|>", WOOLLY_CHAT_LLAMA3);
    cr_expect(f.bos_in_text);
    char dates[256];
    snprintf(dates, sizeof dates, "Cutting Knowledge Date: December 2023\nToday Date: %s\n\n", date);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_LLAMA3, &CONVOS[i]), *want;
        if (CONVOS[i].has_system) {
            want = insert_after(b, "<|start_header_id|>system<|end_header_id|>\n\n", dates);
        } else {
            char *block = concat3("<|start_header_id|>system<|end_header_id|>\n\n", dates, "<|eot_id|>");
            want = insert_after(b, "<|begin_of_text|>", block);
            free(block);
        }
        expect_same(file, i, got, want);
        free(got);
        free(b);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, llama3_1_adds_its_date_header)
{
    expect_llama3("llama-3.1-instruct.jinja", "26 Jul 2024");
}
Test(jinja_families, llama3_2_adds_todays_date)
{
    expect_llama3("llama-3.2-instruct.jinja", today("%d %b %Y"));
}

Test(jinja_families, granite_3_3_equals_builtin_with_a_system_prompt)
{
    woolly_chat_format f =
        open_fixture("granite-3.3-instruct.jinja", "<|end_of_text|>", "<|end_of_text|>", WOOLLY_CHAT_GRANITE);
    cr_expect(!f.bos_in_text);
    for (size_t i = 0; i < N_CONVOS; i++) {
        char *got = render(&f, &CONVOS[i]), *b = builtin(WOOLLY_CHAT_GRANITE, &CONVOS[i]), *want;
        if (CONVOS[i].has_system) {
            want = strdup(b);
        } else { /* the template's default system prompt, with today's date */
            char sys[512];
            snprintf(
                sys, sizeof sys,
                "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: %s. "
                "You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n",
                today("%B %d, %Y"));
            want = concat3(sys, b, "");
        }
        expect_same("granite-3.3", i, got, want);
        free(got);
        free(b);
        free(want);
    }
    woolly_chat_format_close(&f);
}

Test(jinja_families, forced_builtin_and_fallback)
{
    char *tmpl = read_fixture("qwen2.5-instruct.jinja");
    woolly_chat_format f;
    /* --chat-template NAME forces the built-in */
    cr_assert_eq(woolly_chat_format_open(&f, tmpl, NULL, NULL, WOOLLY_CHAT_CHATML, "test"), 0);
    cr_expect(f.jinja == NULL && f.family == WOOLLY_CHAT_CHATML);
    woolly_chat_format_close(&f);
    free(tmpl);
    /* a template the interpreter cannot parse: the built-in its markers name, after a warning */
    static const char BROKEN[] = "{% for m in messages %}<|im_start|>{{ m.content | frobnicate }}{% endfor %}"
                                 "{% if %}";
    cr_assert_eq(woolly_chat_format_open(&f, BROKEN, NULL, NULL, -1, "test"), 0);
    cr_expect(f.jinja == NULL && f.family == WOOLLY_CHAT_CHATML);
    char *out, err[256];
    cr_expect(woolly_chat_format_render(&f, LONE, 1, true, &out, err, sizeof err) > 0);
    free(out);
    woolly_chat_format_close(&f);
    /* a template that parses but uses an unknown filter: the probe render fails, same fallback */
    static const char UNKNOWN_FILTER[] =
        "{% for m in messages %}<|im_start|>{{ m.content | frobnicate }}{% endfor %}";
    cr_assert_eq(woolly_chat_format_open(&f, UNKNOWN_FILTER, NULL, NULL, -1, "test"), 0);
    cr_expect(f.jinja == NULL && f.family == WOOLLY_CHAT_CHATML);
    woolly_chat_format_close(&f);
    /* neither: the unknown family, which does not render */
    static const char ALIEN[] = "{% if %}<|weird|>";
    cr_expect_eq(woolly_chat_format_open(&f, ALIEN, NULL, NULL, -1, "test"), -1);
    cr_expect_eq(f.family, WOOLLY_CHAT_UNKNOWN);
    cr_expect_eq(woolly_chat_format_render(&f, LONE, 1, true, &out, err, sizeof err), -1);
    woolly_chat_format_close(&f);
    /* no template: plain */
    cr_assert_eq(woolly_chat_format_open(&f, NULL, NULL, NULL, -1, "test"), 0);
    cr_expect(f.jinja == NULL && f.family == WOOLLY_CHAT_PLAIN);
    woolly_chat_format_close(&f);
    /* an unrecognized template the interpreter renders is used as it is */
    static const char OWN[] = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}"
                              "{% if add_generation_prompt %}[ASSISTANT] {% endif %}";
    cr_assert_eq(woolly_chat_format_open(&f, OWN, NULL, NULL, -1, "test"), 0);
    cr_assert(f.jinja != NULL);
    cr_assert(woolly_chat_format_render(&f, MULTI_NOSYS, 3, true, &out, err, sizeof err) > 0, "%s", err);
    cr_expect_str_eq(out, "[USER] Hi\n[ASSISTANT] Hello.\n[USER] Name a color.\n[ASSISTANT] ");
    free(out);
    woolly_chat_format_close(&f);
}
