#include "chat.h"

#include <string.h>

static const char *const FAMILY_NAMES[] = {
    "plain",
    "granite",
    "llama3",
    "chatml",
    "llama2",
    "qwen2",
    "gemma",
    "phi3",
    "mistral-v1",
    "mistral-v3",
    "mistral-v3-tekken",
    "mistral-v7",
    "phi4-mini",
    "unknown",
};
enum { N_FAMILIES = sizeof FAMILY_NAMES / sizeof FAMILY_NAMES[0] };

#define QWEN2_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

static bool contains(const char *s, size_t len, const char *needle)
{
    return len ? memmem(s, len, needle, strlen(needle)) != NULL : !*needle; /* s may be NULL when empty */
}

/* The markers are those the families' published templates write (and that llama.cpp keys on too);
 * the order matters where one family's template carries another's marker. */
enum woolly_chat_family woolly_chat_detect(const char *tmpl, size_t len)
{
    if (!tmpl)
        return WOOLLY_CHAT_PLAIN;
#define HAS(marker) contains(tmpl, len, marker)
    if (HAS("<|start_of_role|>"))
        return WOOLLY_CHAT_GRANITE;
    if (HAS("<|start_header_id|>"))
        return WOOLLY_CHAT_LLAMA3;
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) /* Phi-4's variant of the markers: not ChatML */
            return WOOLLY_CHAT_UNKNOWN;
        return HAS(QWEN2_DEFAULT_SYSTEM) ? WOOLLY_CHAT_QWEN2 : WOOLLY_CHAT_CHATML;
    }
    if (HAS("<start_of_turn>"))
        return WOOLLY_CHAT_GEMMA;
    if (HAS("<|assistant|>") && HAS("<|end|>")) /* Phi-4-mini writes the role tags without a line break */
        return HAS("'|>' + message['content']") ? WOOLLY_CHAT_PHI4_MINI : WOOLLY_CHAT_PHI3;
    if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]"))
            return WOOLLY_CHAT_MISTRAL_V7;
        if (HAS("' [INST] ' + system_message"))
            return WOOLLY_CHAT_MISTRAL_V1;
        if (HAS("[AVAILABLE_TOOLS]"))
            return HAS("\"[INST]\"") || HAS("'[INST]'") ? WOOLLY_CHAT_MISTRAL_V3_TEKKEN
                                                        : WOOLLY_CHAT_MISTRAL_V3;
        return WOOLLY_CHAT_LLAMA2;
    }
#undef HAS
    return WOOLLY_CHAT_UNKNOWN;
}

const char *woolly_chat_family_name(enum woolly_chat_family f)
{
    return (unsigned)f < N_FAMILIES ? FAMILY_NAMES[f] : "?";
}

int woolly_chat_family_from_name(const char *name)
{
    for (int i = 0; i < WOOLLY_CHAT_UNKNOWN; i++)
        if (!strcmp(name, FAMILY_NAMES[i]))
            return i;
    return -1;
}

const char *woolly_chat_family_choices(void)
{
    static char list[256];
    if (!list[0])
        for (int i = 0; i < WOOLLY_CHAT_UNKNOWN; i++) {
            if (i)
                strcat(list, "|");
            strcat(list, FAMILY_NAMES[i]);
        }
    return list;
}

bool woolly_chat_bos_in_text(enum woolly_chat_family f)
{
    return f == WOOLLY_CHAT_LLAMA2 || f == WOOLLY_CHAT_LLAMA3;
}

/* Appends to a bounded buffer, counting the full length even past the capacity. */
typedef struct sink {
    char *out;
    size_t cap, len;
} sink;

static void put(sink *s, const char *text)
{
    for (; *text; text++, s->len++)
        if (s->len + 1 < s->cap)
            s->out[s->len] = *text;
}

/* Jinja's trim: the content without leading and trailing whitespace. */
static void put_trimmed(sink *s, const char *text)
{
    const char *ws = " \t\n\r\v\f";
    while (*text && strchr(ws, *text))
        text++;
    size_t n = strlen(text);
    while (n > 0 && strchr(ws, text[n - 1]))
        n--;
    for (size_t i = 0; i < n; i++, s->len++)
        if (s->len + 1 < s->cap)
            s->out[s->len] = text[i];
}

static void put3(sink *s, const char *a, const char *b, const char *c)
{
    put(s, a);
    put(s, b);
    put(s, c);
}

/* One message of a family that brackets each turn: open + role + mid + content + close. */
static void turn(sink *s, const char *open, const woolly_chat_msg *m, const char *mid, const char *close)
{
    put3(s, open, m->role, mid);
    put3(s, m->content, close, "");
}

static int render_llama2(sink *s, const woolly_chat_msg *m, size_t n, bool add_assistant)
{
    const char *system = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            if (i != 0)
                return -1; /* Llama 2 folds one system prompt into the first instruction only */
            system = m[i].content;
        } else if (!strcmp(m[i].role, "user")) {
            put(s, "<s>[INST] ");
            if (system) {
                put3(s, "<<SYS>>\n", system, "\n<</SYS>>\n\n");
                system = NULL;
            }
            put3(s, m[i].content, " [/INST]", "");
        } else {
            put3(s, " ", m[i].content, " </s>");
        }
    }
    (void)add_assistant; /* the open [INST] block already is the assistant's cue */
    return 0;
}

static bool is_role(const woolly_chat_msg *m, const char *role)
{
    return !strcmp(m->role, role);
}

/* Templates that take one leading system message apart: its content (or NULL), and -1 if a system
 * message comes later, which they cannot express. */
static int leading_system(const woolly_chat_msg *m, size_t n, const char **system, size_t *first)
{
    *system = NULL;
    *first = 0;
    if (n > 0 && is_role(&m[0], "system")) {
        *system = m[0].content;
        *first = 1;
    }
    for (size_t i = *first; i < n; i++)
        if (is_role(&m[i], "system"))
            return -1;
    return 0;
}

/* Gemma 3: assistant turns are "model" turns; the system prompt opens the first turn after it. */
static int render_gemma(sink *s, const woolly_chat_msg *m, size_t n, bool add_assistant)
{
    const char *system;
    size_t first;
    if (leading_system(m, n, &system, &first))
        return -1;
    for (size_t i = first; i < n; i++) {
        put3(s, "<start_of_turn>", is_role(&m[i], "assistant") ? "model" : m[i].role, "\n");
        if (i == first && system)
            put3(s, system, "\n\n", "");
        put_trimmed(s, m[i].content);
        put(s, "<end_of_turn>\n");
    }
    if (add_assistant)
        put(s, "<start_of_turn>model\n");
    return 0;
}

/* Mistral's [INST] formats. v1 puts the system prompt in the first instruction, v3 and v3-tekken in the
 * last one (the one being answered); they differ in the spaces around the markers. The closing [/INST]
 * is the assistant's cue. */
static int render_mistral(sink *s, enum woolly_chat_family f, const woolly_chat_msg *m, size_t n)
{
    const char *system;
    size_t first;
    if (leading_system(m, n, &system, &first))
        return -1;
    const bool v1 = f == WOOLLY_CHAT_MISTRAL_V1, tekken = f == WOOLLY_CHAT_MISTRAL_V3_TEKKEN;
    for (size_t i = first; i < n; i++) {
        if (is_role(&m[i], "user")) {
            put(s, v1 ? " [INST] " : tekken ? "[INST]" : "[INST] ");
            if (system && (v1 ? i == first : i == n - 1))
                put3(s, system, "\n\n", "");
            put3(s, m[i].content, v1 ? " [/INST]" : "[/INST]", "");
        } else if (v1) {
            put3(s, " ", m[i].content, "</s>");
        } else if (tekken) {
            put3(s, m[i].content, "</s>", "");
        } else {
            put(s, " ");
            put_trimmed(s, m[i].content);
            put(s, "</s>");
        }
    }
    return 0;
}

static void render_mistral_v7(sink *s, const woolly_chat_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "system"))
            put3(s, "[SYSTEM_PROMPT]", m[i].content, "[/SYSTEM_PROMPT]");
        else if (is_role(&m[i], "user"))
            put3(s, "[INST]", m[i].content, "[/INST]");
        else
            put3(s, m[i].content, "</s>", "");
    }
}

long woolly_chat_render(enum woolly_chat_family f, const woolly_chat_msg *m, size_t n, bool add_assistant,
                        char *out, size_t cap)
{
    sink s = {out, cap, 0};
    switch (f) {
    case WOOLLY_CHAT_GRANITE:
        for (size_t i = 0; i < n; i++)
            turn(&s, "<|start_of_role|>", &m[i], "<|end_of_role|>", "<|end_of_text|>\n");
        if (add_assistant)
            put(&s, "<|start_of_role|>assistant<|end_of_role|>");
        break;
    case WOOLLY_CHAT_LLAMA3:
        put(&s, "<|begin_of_text|>");
        for (size_t i = 0; i < n; i++)
            turn(&s, "<|start_header_id|>", &m[i], "<|end_header_id|>\n\n", "<|eot_id|>");
        if (add_assistant)
            put(&s, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case WOOLLY_CHAT_QWEN2:
    case WOOLLY_CHAT_CHATML:
        if (f == WOOLLY_CHAT_QWEN2 && (n == 0 || !is_role(&m[0], "system")))
            put(&s, "<|im_start|>system\n" QWEN2_DEFAULT_SYSTEM "<|im_end|>\n");
        for (size_t i = 0; i < n; i++)
            turn(&s, "<|im_start|>", &m[i], "\n", "<|im_end|>\n");
        if (add_assistant)
            put(&s, "<|im_start|>assistant\n");
        break;
    case WOOLLY_CHAT_LLAMA2:
        if (render_llama2(&s, m, n, add_assistant))
            return -1;
        break;
    case WOOLLY_CHAT_GEMMA:
        if (render_gemma(&s, m, n, add_assistant))
            return -1;
        break;
    case WOOLLY_CHAT_PHI3:
        for (size_t i = 0; i < n; i++)
            if (!is_role(&m[i], "system") || m[i].content[0]) /* an empty system prompt is left out */
                turn(&s, "<|", &m[i], "|>\n", "<|end|>\n");
        if (add_assistant)
            put(&s, "<|assistant|>\n");
        break;
    case WOOLLY_CHAT_PHI4_MINI:
        for (size_t i = 0; i < n; i++)
            turn(&s, "<|", &m[i], "|>", "<|end|>");
        if (add_assistant)
            put(&s, "<|assistant|>");
        break;
    case WOOLLY_CHAT_MISTRAL_V1:
    case WOOLLY_CHAT_MISTRAL_V3:
    case WOOLLY_CHAT_MISTRAL_V3_TEKKEN:
        if (render_mistral(&s, f, m, n))
            return -1;
        break;
    case WOOLLY_CHAT_MISTRAL_V7:
        render_mistral_v7(&s, m, n);
        break;
    case WOOLLY_CHAT_UNKNOWN:
        return -1;
    case WOOLLY_CHAT_PLAIN:
    default:
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(m[i].role, "system"))
                put3(&s, m[i].content, "\n\n", "");
            else if (!strcmp(m[i].role, "user"))
                put3(&s, "User: ", m[i].content, "\n");
            else
                put3(&s, "Assistant: ", m[i].content, "\n");
        }
        if (add_assistant)
            put(&s, "Assistant:");
        break;
    }
    if (cap)
        out[s.len < cap ? s.len : cap - 1] = 0;
    return (long)s.len;
}
