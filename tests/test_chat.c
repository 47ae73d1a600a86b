/* Chat templates: each family is recognized from a template text carrying its markers, and renders a
 * two-turn conversation (system, user, assistant, user, then the assistant's cue) exactly as the
 * family's documented format. */
#include <criterion/criterion.h>
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
    cr_expect_eq(woolly_chat_detect(other, strlen(other)), WOOLLY_CHAT_PLAIN);
    cr_expect_eq(woolly_chat_detect(NULL, 0), WOOLLY_CHAT_PLAIN);
    /* The length bounds the search: a marker past it does not count. */
    cr_expect_eq(woolly_chat_detect(CHATML_TMPL, 10), WOOLLY_CHAT_PLAIN);
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
