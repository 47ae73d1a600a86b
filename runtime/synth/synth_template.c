/* Chat templates a synthesized model can carry (tokenizer.chat_template), one representative Jinja
 * template per family, written from each family's documented prompt format, and the special tokens
 * the built-in vocabulary must have for it. Runtimes recognize the families by their markers:
 * granite <|start_of_role|>, llama3 <|start_header_id|>, chatml <|im_start|>, llama2 [INST], phi3 <|assistant|>
 * and <|end|>. */
#include <string.h>

#include "synth_vocab.h"

/* Granite 3.x: <|start_of_role|>ROLE<|end_of_role|>CONTENT<|end_of_text|> per message. */
static const char GRANITE_JINJA[] =
    "{%- for message in messages %}"
    "{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + "
    "'<|end_of_text|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}";
static const char *const GRANITE_SPECIALS[] = {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>",
                                               NULL};

/* Llama 2 chat: BOS [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER EOS, the system prompt
 * folded into the first user turn. */
static const char LLAMA2_JINJA[] =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
    "{%- set turns = messages[1:] %}"
    "{%- else %}{%- set system = '' %}{%- set turns = messages %}{%- endif %}"
    "{%- for message in turns %}"
    "{%- if message['role'] == 'user' %}"
    "{{- bos_token + '[INST] ' + (system if loop.first else '') + message['content'] | trim + ' [/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- ' ' + message['content'] | trim + ' ' + eos_token }}"
    "{%- endif %}"
    "{%- endfor %}";
static const char *const LLAMA2_SPECIALS[] = {"<s>",     "</s>",     "[INST]", "[/INST]",
                                              "<<SYS>>", "<</SYS>>", NULL};

/* Llama 3 instruct: BOS, then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> per message. */
static const char LLAMA3_JINJA[] =
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
static const char *const LLAMA3_SPECIALS[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                              "<|end_header_id|>", "<|eot_id|>",      NULL};

/* ChatML: <|im_start|>ROLE\nCONTENT<|im_end|>\n per message. */
static const char CHATML_JINJA[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char *const CHATML_SPECIALS[] = {"<|im_start|>", "<|im_end|>", NULL};

/* Phi-3 and Phi-3.5-mini: <|ROLE|>\nCONTENT<|end|>\n per message (an empty system message left out), the
 * generation prompt <|assistant|>\n. The vocabulary also needs <s>, </s> and <unk>: other runtimes look
 * them up by name in any model that says it is a Phi-3. */
static const char PHI3_JINJA[] =
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and message['content'] %}"
    "{{- '<|system|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- elif message['role'] == 'user' %}{{- '<|user|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' %}{{- '<|assistant|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- else %}{{- eos_token }}{%- endif %}";
static const char *const PHI3_SPECIALS[] = {"<s>",      "</s>",          "<unk>", "<|system|>",
                                            "<|user|>", "<|assistant|>", "<|end|>", NULL};

static const woolly_chat_family FAMILIES[] = {
    {"granite", GRANITE_JINJA, GRANITE_SPECIALS, "<|end_of_text|>", "<|end_of_text|>", false},
    {"llama2", LLAMA2_JINJA, LLAMA2_SPECIALS, "<s>", "</s>", true},
    {"llama3", LLAMA3_JINJA, LLAMA3_SPECIALS, "<|begin_of_text|>", "<|eot_id|>", true},
    {"chatml", CHATML_JINJA, CHATML_SPECIALS, "<|endoftext|>", "<|im_end|>", false},
    {"phi3", PHI3_JINJA, PHI3_SPECIALS, "<s>", "<|end|>", true},
};

const woolly_chat_family *woolly_chat_family_get(const char *name)
{
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (strcmp(FAMILIES[i].name, name) == 0)
            return &FAMILIES[i];
    return NULL;
}

const char *woolly_chat_family_names(void)
{
    return "granite, llama2, llama3, chatml, phi3";
}
