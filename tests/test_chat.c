/* Chat templates: each family is recognized from a template text carrying its markers, and renders a
 * two-turn conversation (system, user, assistant, user, then the assistant's cue) exactly as the
 * family's documented format. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chat.h"

/* Abridged forms of the Jinja templates the families ship with: what matters is their markers. */
static const char GRANITE_TMPL[] =
    "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
    "message['content'] + '<|end_of_text|>\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}";
static const char LLAMA3_TMPL[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% "
    "endif %}";
static const char CHATML_TMPL[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char LLAMA2_TMPL[] =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] | "
    "trim "
    "+ '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content | trim + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content | trim + ' ' + eos_token }}{% endif %}{% endfor %}";

static const woolly_chat_msg CONVERSATION[] = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello."},
    {"user", "Name a color."},
};
enum { N_MSGS = sizeof CONVERSATION / sizeof CONVERSATION[0] };

static void expect_render(enum woolly_chat_family f, const char *want)
{
    char out[2048];
    const long n = woolly_chat_render(f, CONVERSATION, N_MSGS, true, out, sizeof out);
    cr_assert_eq(n, (long)strlen(want), "%s: length %ld, expected %zu:\n%s", woolly_chat_family_name(f), n,
                 strlen(want), out);
    cr_expect_str_eq(out, want, "%s rendered\n%s\nexpected\n%s", woolly_chat_family_name(f), out, want);
}

Test(chat, detects_each_family_by_its_markers)
{
    cr_expect_eq(woolly_chat_detect(GRANITE_TMPL, strlen(GRANITE_TMPL)), WOOLLY_CHAT_GRANITE);
    cr_expect_eq(woolly_chat_detect(LLAMA3_TMPL, strlen(LLAMA3_TMPL)), WOOLLY_CHAT_LLAMA3);
    cr_expect_eq(woolly_chat_detect(CHATML_TMPL, strlen(CHATML_TMPL)), WOOLLY_CHAT_CHATML);
    cr_expect_eq(woolly_chat_detect(LLAMA2_TMPL, strlen(LLAMA2_TMPL)), WOOLLY_CHAT_LLAMA2);
    const char other[] = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% endfor %}";
    /* A template that is none of the known ones is unknown, not plain: no format is guessed. */
    cr_expect_eq(woolly_chat_detect(other, strlen(other)), WOOLLY_CHAT_UNKNOWN);
    cr_expect_eq(woolly_chat_detect(NULL, 0), WOOLLY_CHAT_PLAIN);
    /* The length bounds the search: a marker past it does not count. */
    cr_expect_eq(woolly_chat_detect(CHATML_TMPL, 10), WOOLLY_CHAT_UNKNOWN);
}

Test(chat, granite)
{
    expect_render(WOOLLY_CHAT_GRANITE, "<|start_of_role|>system<|end_of_role|>You are terse.<|end_of_text|>\n"
                                       "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                                       "<|start_of_role|>assistant<|end_of_role|>Hello.<|end_of_text|>\n"
                                       "<|start_of_role|>user<|end_of_role|>Name a color.<|end_of_text|>\n"
                                       "<|start_of_role|>assistant<|end_of_role|>");
}

Test(chat, llama3)
{
    expect_render(WOOLLY_CHAT_LLAMA3, "<|begin_of_text|>"
                                      "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                                      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                      "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                                      "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
                                      "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

Test(chat, chatml)
{
    expect_render(WOOLLY_CHAT_CHATML, "<|im_start|>system\nYou are terse.<|im_end|>\n"
                                      "<|im_start|>user\nHi<|im_end|>\n"
                                      "<|im_start|>assistant\nHello.<|im_end|>\n"
                                      "<|im_start|>user\nName a color.<|im_end|>\n"
                                      "<|im_start|>assistant\n");
}

Test(chat, llama2)
{
    expect_render(WOOLLY_CHAT_LLAMA2, "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
                                      "<s>[INST] Name a color. [/INST]");
}

Test(chat, plain_fallback)
{
    expect_render(WOOLLY_CHAT_PLAIN,
                  "You are terse.\n\nUser: Hi\nAssistant: Hello.\nUser: Name a color.\nAssistant:");
}

Test(chat, bos_is_text_only_where_the_format_writes_it)
{
    cr_expect(woolly_chat_bos_in_text(WOOLLY_CHAT_LLAMA2));
    cr_expect(woolly_chat_bos_in_text(WOOLLY_CHAT_LLAMA3));
    cr_expect(!woolly_chat_bos_in_text(WOOLLY_CHAT_CHATML));
    cr_expect(!woolly_chat_bos_in_text(WOOLLY_CHAT_GRANITE));
    cr_expect(!woolly_chat_bos_in_text(WOOLLY_CHAT_PLAIN));
}

Test(chat, short_buffers_get_the_full_length_and_a_terminated_prefix)
{
    char full[1024], small[16];
    const long n = woolly_chat_render(WOOLLY_CHAT_CHATML, CONVERSATION, N_MSGS, true, full, sizeof full);
    memset(small, 'x', sizeof small);
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_CHATML, CONVERSATION, N_MSGS, true, small, sizeof small), n);
    cr_expect_eq(small[sizeof small - 1], 0);
    cr_expect(strncmp(small, full, sizeof small - 1) == 0);
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_CHATML, CONVERSATION, N_MSGS, true, NULL, 0), n);
}

Test(chat, without_the_assistant_cue)
{
    char out[512];
    woolly_chat_render(WOOLLY_CHAT_CHATML, CONVERSATION + 1, 1, false, out, sizeof out);
    cr_expect_str_eq(out, "<|im_start|>user\nHi<|im_end|>\n");
}

Test(chat, llama2_rejects_a_late_system_message)
{
    const woolly_chat_msg msgs[] = {{"user", "Hi"}, {"system", "late"}};
    char out[256];
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_LLAMA2, msgs, 2, true, out, sizeof out), -1);
}

Test(chat, family_names_round_trip)
{
    for (int f = WOOLLY_CHAT_PLAIN; f <= WOOLLY_CHAT_LLAMA2; f++)
        cr_expect_eq(woolly_chat_family_from_name(woolly_chat_family_name((enum woolly_chat_family)f)), f);
    cr_expect_eq(woolly_chat_family_from_name("vicuna"), -1);
}

/* ---- The families' real templates (tests/data/chat/, as the model files carry them) ---- */

/* A conversation whose assistant turn has the spaces a generated reply keeps, which the templates that
 * trim show. */
static const woolly_chat_msg REAL_CONVERSATION[] = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", " Hello. "},
    {"user", "Name a color."},
};
enum { N_REAL = sizeof REAL_CONVERSATION / sizeof REAL_CONVERSATION[0] };

static enum woolly_chat_family detect_file(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, WOOLLY_SOURCE_DIR "/tests/data/chat/%s", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(n > 0 && n < sizeof buf, "%s: %zu bytes", path, n);
    return woolly_chat_detect(buf, n);
}

/* Renders msgs[from..] with the family detected from the template file, and compares with what the
 * template itself renders (Jinja, add_generation_prompt true, BOS left to the tokenizer). */
static void expect_real(const char *file, enum woolly_chat_family want_family, size_t from, const char *want)
{
    enum woolly_chat_family f = detect_file(file);
    cr_assert_eq(f, want_family, "%s detected as %s, expected %s", file, woolly_chat_family_name(f),
                 woolly_chat_family_name(want_family));
    char out[4096];
    const long n = woolly_chat_render(f, REAL_CONVERSATION + from, N_REAL - from, true, out, sizeof out);
    cr_assert(n >= 0 && n < (long)sizeof out, "%s: render gave %ld", file, n);
    cr_expect_str_eq(out, want, "%s (%s) rendered\n[%s]\nexpected\n[%s]", file, woolly_chat_family_name(f),
                     out, want);
}

Test(chat_real, qwen2_5)
{
    expect_real(
        "qwen2.5-instruct.jinja", WOOLLY_CHAT_QWEN2, 0,
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>"
        "assistant\n Hello. <|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant\n");
    /* Without a system message the template adds its own. */
    expect_real("qwen2.5-instruct.jinja", WOOLLY_CHAT_QWEN2, 1,
                "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello. <|im_end|>\n"
                "<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant\n");
}

Test(chat_real, qwen3)
{
    expect_real(
        "qwen3.jinja", WOOLLY_CHAT_CHATML, 1,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello. <|im_end|>\n<|im_start|>user\n"
        "Name a color.<|im_end|>\n<|im_start|>assistant\n");
}

Test(chat_real, phi3_5)
{
    expect_real("phi-3.5-mini-instruct.jinja", WOOLLY_CHAT_PHI3, 0,
                "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n Hello. <|end|>\n"
                "<|user|>\nName a color.<|end|>\n<|assistant|>\n");
    expect_real("phi-3.5-mini-instruct.jinja", WOOLLY_CHAT_PHI3, 1,
                "<|user|>\nHi<|end|>\n<|assistant|>\n Hello. <|end|>\n<|user|>\nName a color.<|end|>\n"
                "<|assistant|>\n");
}

/* Phi-4-mini's template as published writes no line break after the role tags. */
static const char PHI4_MINI_TMPL[] =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
    "message['tools'] "
    "is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + "
    "'<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% "
    "endif "
    "%}";

Test(chat_real, phi4_mini)
{
    enum woolly_chat_family f = woolly_chat_detect(PHI4_MINI_TMPL, strlen(PHI4_MINI_TMPL));
    cr_assert_eq(f, WOOLLY_CHAT_PHI4_MINI, "detected %s", woolly_chat_family_name(f));
    char out[1024];
    woolly_chat_render(f, REAL_CONVERSATION, N_REAL, true, out, sizeof out);
    cr_expect_str_eq(out,
                     "<|system|>You are terse.<|end|><|user|>Hi<|end|><|assistant|> Hello. <|end|><|user|>"
                     "Name a color.<|end|><|assistant|>");
}

Test(chat_real, gemma)
{
    expect_real("gemma-2-it.jinja", WOOLLY_CHAT_GEMMA, 1,
                "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
                "<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n");
    /* Gemma 2's template refuses a system message; Gemma 3's folds it into the first user turn. */
    expect_real("gemma-3-it.jinja", WOOLLY_CHAT_GEMMA, 0,
                "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
                "<end_of_turn>\n<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n");
    char out[1024];
    woolly_chat_render(WOOLLY_CHAT_GEMMA, REAL_CONVERSATION, N_REAL, true, out, sizeof out);
    cr_expect_str_eq(
        out, "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
             "<end_of_turn>\n<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n");
}

Test(chat_real, mistral_nemo_v3_tekken)
{
    expect_real("mistral-nemo-instruct-2407.jinja", WOOLLY_CHAT_MISTRAL_V3_TEKKEN, 0,
                "[INST]Hi[/INST] Hello. </s>[INST]You are terse.\n\nName a color.[/INST]");
    expect_real("mistral-nemo-instruct-2407.jinja", WOOLLY_CHAT_MISTRAL_V3_TEKKEN, 1,
                "[INST]Hi[/INST] Hello. </s>[INST]Name a color.[/INST]");
}

Test(chat_real, mistral_small_v7)
{
    /* With the conversation's own system prompt (without one, the template writes its built-in default
     * prompt, which Woolly does not: pass it with -s). */
    expect_real(
        "mistral-small-3.2-instruct-2506.jinja", WOOLLY_CHAT_MISTRAL_V7, 0,
        "[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hi[/INST] Hello. </s>[INST]Name a color.[/INST]");
}

Test(chat_real, mistral_v1_v3)
{
    expect_real("mistral-v1.jinja", WOOLLY_CHAT_MISTRAL_V1, 0,
                " [INST] You are terse.\n\nHi [/INST]  Hello. </s> [INST] Name a color. [/INST]");
    expect_real("mistral-v3.jinja", WOOLLY_CHAT_MISTRAL_V3, 0,
                "[INST] Hi[/INST] Hello.</s>[INST] You are terse.\n\nName a color.[/INST]");
    expect_real("mistral-v3.jinja", WOOLLY_CHAT_MISTRAL_V3, 1,
                "[INST] Hi[/INST] Hello.</s>[INST] Name a color.[/INST]");
}

Test(chat_real, unknown_template_does_not_render)
{
    char out[64] = "x";
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_UNKNOWN, REAL_CONVERSATION, N_REAL, true, out, sizeof out),
                 -1);
    cr_expect_eq(woolly_chat_family_from_name("unknown"), -1);
    cr_expect_eq(woolly_chat_family_from_name("mistral-v3-tekken"), WOOLLY_CHAT_MISTRAL_V3_TEKKEN);
    cr_expect(strstr(woolly_chat_family_choices(), "gemma|phi3") != NULL, "%s", woolly_chat_family_choices());
    /* A system message after the first turn cannot be expressed by the templates that take one apart. */
    const woolly_chat_msg late[] = {{"user", "Hi"}, {"system", "Be brief."}};
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_GEMMA, late, 2, true, out, sizeof out), -1);
    cr_expect_eq(woolly_chat_render(WOOLLY_CHAT_MISTRAL_V3, late, 2, true, out, sizeof out), -1);
}
