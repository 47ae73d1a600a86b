#include "chat.h"

#include <string.h>

static const char *const FAMILY_NAMES[] = {"plain", "granite", "llama3", "chatml", "llama2"};
enum { N_FAMILIES = sizeof FAMILY_NAMES / sizeof FAMILY_NAMES[0] };

/* Marker of each family in its Jinja template, checked in this order. */
static const struct {
    const char *marker;
    enum woolly_chat_family family;
} MARKERS[] = {
    {"<|start_of_role|>", WOOLLY_CHAT_GRANITE},
    {"<|start_header_id|>", WOOLLY_CHAT_LLAMA3},
    {"<|im_start|>", WOOLLY_CHAT_CHATML},
    {"[INST]", WOOLLY_CHAT_LLAMA2},
};

static bool contains(const char *s, size_t len, const char *needle)
{
    const size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(s + i, needle, n))
            return true;
    return false;
}

enum woolly_chat_family woolly_chat_detect(const char *tmpl, size_t len)
{
    if (!tmpl)
        return WOOLLY_CHAT_PLAIN;
    for (size_t i = 0; i < sizeof MARKERS / sizeof MARKERS[0]; i++)
        if (contains(tmpl, len, MARKERS[i].marker))
            return MARKERS[i].family;
    return WOOLLY_CHAT_PLAIN;
}

const char *woolly_chat_family_name(enum woolly_chat_family f)
{
    return (unsigned)f < N_FAMILIES ? FAMILY_NAMES[f] : "?";
}

int woolly_chat_family_from_name(const char *name)
{
    for (int i = 0; i < N_FAMILIES; i++)
        if (!strcmp(name, FAMILY_NAMES[i]))
            return i;
    return -1;
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
    case WOOLLY_CHAT_CHATML:
        for (size_t i = 0; i < n; i++)
            turn(&s, "<|im_start|>", &m[i], "\n", "<|im_end|>\n");
        if (add_assistant)
            put(&s, "<|im_start|>assistant\n");
        break;
    case WOOLLY_CHAT_LLAMA2:
        if (render_llama2(&s, m, n, add_assistant))
            return -1;
        break;
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
