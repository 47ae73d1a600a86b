/* Chat templates. A GGUF model carries its chat template as a Jinja program
 * (`tokenizer.chat_template`); Woolly also recognizes the common families by their
 * markers and renders their documented formats itself (the built-ins; woolly_chat_format below prefers
 * the model's own template, rendered by the Jinja interpreter, and keeps these as the fallback):
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

/* A call an assistant message made (the API's tool_calls[i]): arguments is JSON text, an object when
 * arguments_json (then templates see it as an object, as Hugging Face's do), else a string as sent. */
typedef struct woolly_chat_tool_call {
    const char *id, *name, *arguments;
    bool arguments_json;
} woolly_chat_tool_call;

typedef struct woolly_chat_msg {
    const char *role; /* "system", "user", "assistant", "tool" */
    const char *content;
} woolly_chat_msg;

/* A message's tool parts, beside it (see woolly_chat_format_render_tools). */
typedef struct woolly_chat_msg_tools {
    const woolly_chat_tool_call *tool_calls; /* an assistant's calls, or NULL */
    size_t n_tool_calls;
    const char *tool_call_id, *name; /* a tool result's call id and function name, or NULL */
} woolly_chat_msg_tools;

/* How a family's models write a tool call (parsed back by the server, written by the built-ins):
 *   hermes   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Qwen, ChatML, the default)
 *   llama3   {"name": "f", "parameters": {...}}, maybe after <|python_tag|>
 *   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}]
 *   granite  <|tool_call|>[{"name": "f", "arguments": {...}}]
 * The markers of llama3, mistral and granite are control tokens in those models' vocabularies: they
 * decode to no text, so the JSON alone must be recognized too. */
enum woolly_chat_tool_syntax {
    WOOLLY_TOOLS_HERMES,
    WOOLLY_TOOLS_LLAMA3,
    WOOLLY_TOOLS_MISTRAL,
    WOOLLY_TOOLS_GRANITE,
};
enum woolly_chat_tool_syntax woolly_chat_tool_syntax_of(enum woolly_chat_family f);
const char *woolly_chat_tool_syntax_name(enum woolly_chat_tool_syntax s);

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

/* ---- the format a command renders with ----
 * A model's own template comes first: the Jinja interpreter (runtime/chat/jinja.h) renders
 * tokenizer.chat_template as Hugging Face does. A built-in family renders when one is forced
 * (--chat-template), when the file has no template (plain), or as the fallback when the interpreter
 * cannot render the file's template (a construct it lacks): then the family its markers name renders,
 * after one warning. */
struct jinja_template;
typedef struct woolly_chat_format {
    enum woolly_chat_family family; /* the built-in (with a template: the one recognized, the fallback) */
    struct jinja_template *jinja;   /* the model's template, or NULL: the built-in renders */
    char *bos, *eos;                /* the vocabulary's BOS/EOS text (bos_token, eos_token) */
    bool bos_in_text;               /* renderings start with BOS as text: the caller adds none */
    bool named_calls;               /* the template writes Mistral's newer calls, name[ARGS]{...} */
    const char *who;                /* prefix of warnings ("woolly serve") */
    char name[64];                  /* what woolly_chat_format_name says */
    char jinja_error[512];          /* why the template given did not render ("" if it did, or none) */
} woolly_chat_format;

/* Chooses the format for template text `tmpl` (NULL: none) with the vocabulary's BOS/EOS texts (NULL:
 * none); forced >= 0 is a built-in family to use regardless. Returns 0, or -1 when nothing can render
 * (a template neither the interpreter nor a built-in handles): then family is WOOLLY_CHAT_UNKNOWN and
 * rendering fails. Warnings go to stderr prefixed by `who`. */
int woolly_chat_format_open(woolly_chat_format *f, const char *tmpl, const char *bos, const char *eos, int forced,
                            const char *who);
/* The same for a model: its tokenizer.chat_template (or `tmpl` in its place, if not NULL) and its
 * vocabulary's BOS/EOS. */
struct woolly_model;
int woolly_chat_format_open_model(woolly_chat_format *f, const struct woolly_model *m, const char *tmpl,
                                  int forced, const char *who);
void woolly_chat_format_close(woolly_chat_format *f);
/* A format of a built-in family (static, never closed). */
const woolly_chat_format *woolly_chat_builtin(enum woolly_chat_family fam);
/* "the model's own (Jinja)", "the model's own (Jinja, recognized as llama3)", or the built-in's name. */
const char *woolly_chat_format_name(const woolly_chat_format *f);
/* Renders the conversation (and, if add_assistant, the opening of the assistant's turn) into *out (heap,
 * NUL-terminated); returns its length, or -1 with a message in err: the template refused the
 * conversation (its raise_exception), or the built-in cannot express it. */
long woolly_chat_format_render(const woolly_chat_format *f, const woolly_chat_msg *msgs, size_t n,
                               bool add_assistant, char **out, char *err, size_t err_cap);
/* The same with tools: parts[i] (parts may be NULL) are msgs[i]'s tool calls or tool result, tools[i]
 * the JSON text of the API's tools[i] ({"type": "function", "function": {...}}). The model's template
 * gets them as `tools` and as the messages' tool_calls, tool_call_id and name; a built-in writes them in
 * its family's tool syntax (chat_tools.c). */
long woolly_chat_format_render_tools(const woolly_chat_format *f, const woolly_chat_msg *msgs,
                                     const woolly_chat_msg_tools *parts, size_t n, const char *const *tools,
                                     size_t n_tools, bool add_assistant, char **out, char *err,
                                     size_t err_cap);

#endif
