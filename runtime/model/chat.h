/* Chat templates. A GGUF model carries its chat template as a Jinja program
 * (`tokenizer.chat_template`); Woolly does not run Jinja, it recognizes the common families by their
 * markers and renders their documented formats itself:
 *
 *   granite  <|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n
 *            <|start_of_role|>assistant<|end_of_role|>
 *   llama3   <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>
 *            <|start_header_id|>assistant<|end_header_id|>\n\n
 *   chatml   <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n
 *   llama2   <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Again [/INST]
 *   qwen2    chatml, with the system prompt Qwen2/2.5 templates add when the conversation has none
 *   gemma    <start_of_turn>user\nsystem\n\nHi<end_of_turn>\n<start_of_turn>model\n  (the system prompt
 *            opens the first user turn, as Gemma 3's template writes it; contents trimmed)
 *   phi3     <|system|>\nsys<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n
 *   phi4-mini  <|system|>sys<|end|><|user|>Hi<|end|><|assistant|>   (Phi-4-mini: no line breaks)
 *   mistral-v1         [INST] sys\n\nHi [/INST] Hello</s> [INST] Again [/INST]   (system: first turn)
 *   mistral-v3         [INST] Hi[/INST] Hello</s>[INST] sys\n\nAgain[/INST]       (system: last turn)
 *   mistral-v3-tekken  [INST]Hi[/INST]Hello</s>[INST]sys\n\nAgain[/INST]         (Mistral Nemo)
 *   mistral-v7         [SYSTEM_PROMPT]sys[/SYSTEM_PROMPT][INST]Hi[/INST]Hello</s>  (Mistral Small 3)
 *   plain    (the model has no template) "User: Hi\nAssistant:" style transcript
 *   unknown  the model has a template none of these is: rendering fails, and the commands ask for
 *            --chat-template rather than guess a format the model was not trained on
 *
 * The rendered text holds the control tokens as text: tokenize it with special tokens parsed. Families
 * whose documented format starts with BOS write it as text (llama2's <s>, llama3's <|begin_of_text|>);
 * for the others the caller prepends BOS when the vocabulary asks for one (woolly_chat_bos_in_text). */
#ifndef WOOLLY_CHAT_H
#define WOOLLY_CHAT_H

#include <stdbool.h>
#include <stddef.h>

enum woolly_chat_family {
    WOOLLY_CHAT_PLAIN = 0,
    WOOLLY_CHAT_GRANITE,
    WOOLLY_CHAT_LLAMA3,
    WOOLLY_CHAT_CHATML,
    WOOLLY_CHAT_LLAMA2,
    WOOLLY_CHAT_QWEN2,
    WOOLLY_CHAT_GEMMA,
    WOOLLY_CHAT_PHI3,
    WOOLLY_CHAT_MISTRAL_V1,
    WOOLLY_CHAT_MISTRAL_V3,
    WOOLLY_CHAT_MISTRAL_V3_TEKKEN,
    WOOLLY_CHAT_MISTRAL_V7,
    WOOLLY_CHAT_PHI4_MINI,
    WOOLLY_CHAT_UNKNOWN,
};

typedef struct woolly_chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} woolly_chat_msg;

/* The family of a template text: plain for none (NULL), unknown for one Woolly does not recognize. */
enum woolly_chat_family woolly_chat_detect(const char *tmpl, size_t len);
/* "granite", "llama3", "chatml", ... (the names above); and back (-1 for a name that is none of them;
 * "unknown" is not a name one can choose). */
const char *woolly_chat_family_name(enum woolly_chat_family f);
int woolly_chat_family_from_name(const char *name);
bool woolly_chat_bos_in_text(enum woolly_chat_family f);

/* The names one can give --chat-template, '|'-separated (for help texts and messages). */
const char *woolly_chat_family_choices(void);

/* Renders the conversation, then, if add_assistant, the opening of the assistant's turn. Writes at most
 * cap - 1 bytes and a NUL; returns the full length (render again with a larger buffer if it is >= cap),
 * or -1 for a conversation the family cannot express (a system message after the first turn) and for the
 * unknown family. */
long woolly_chat_render(enum woolly_chat_family f, const woolly_chat_msg *msgs, size_t n, bool add_assistant,
                        char *out, size_t cap);

#endif
