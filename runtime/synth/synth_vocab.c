/* The built-in byte-level BPE vocabulary of `woolly synth` (see synth_vocab.h): merges learned by the
 * classic BPE procedure (repeatedly merge the most frequent adjacent pair of tokens within words) from
 * woolly_synth_text. */
#include "synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENDOFTEXT "<|endoftext|>"
#define FILLER_PREFIX "<|filler_"
/* Pairs seen fewer times than this are not worth a token. */
#define MIN_PAIR_COUNT 2

uint32_t woolly_byte_to_codepoint(uint8_t b)
{
    /* printable Latin-1 bytes stand for themselves; the others (controls, space, DEL, NBSP, soft
     * hyphen...) take the code points from 256 on, in byte order */
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (printable)
        return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE)))
            n++;
    return 256 + n;
}

/* Appends the UTF-8 encoding of code point cp (< 0x800 here) to s at *len. */
static void put_utf8(char *s, size_t *len, uint32_t cp)
{
    if (cp < 0x80) {
        s[(*len)++] = (char)cp;
    } else {
        s[(*len)++] = (char)(0xC0 | (cp >> 6));
        s[(*len)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* ---- the vocabulary under construction ---------------------------------------------------------- */

typedef struct {
    woolly_synth_vocab *v;
    uint64_t cap_tokens, cap_merges;
    bool oom;
} builder;

static char *dup_str(builder *b, const char *s)
{
    char *d = strdup(s);
    if (!d)
        b->oom = true;
    return d;
}

static int64_t add_token(builder *b, const char *text, int32_t type)
{
    woolly_synth_vocab *v = b->v;
    if (v->n == b->cap_tokens) {
        b->oom = true; /* capacity is n_vocab: the callers never exceed it */
        return -1;
    }
    v->tokens[v->n] = dup_str(b, text);
    v->types[v->n] = type;
    return (int64_t)v->n++;
}

static int64_t find_token(const woolly_synth_vocab *v, const char *text)
{
    for (uint64_t i = 0; i < v->n; i++)
        if (strcmp(v->tokens[i], text) == 0)
            return (int64_t)i;
    return -1;
}

static void add_merge(builder *b, const char *left, const char *right)
{
    woolly_synth_vocab *v = b->v;
    if (v->n_merges == b->cap_merges) {
        const uint64_t cap = b->cap_merges ? 2 * b->cap_merges : 256;
        char **m = realloc(v->merges, sizeof *m * cap);
        if (!m) {
            b->oom = true;
            return;
        }
        v->merges = m;
        b->cap_merges = cap;
    }
    char *s = malloc(strlen(left) + strlen(right) + 2);
    if (!s) {
        b->oom = true;
        return;
    }
    sprintf(s, "%s %s", left, right);
    v->merges[v->n_merges++] = s;
}

/* ---- words of the training text ----------------------------------------------------------------- */

typedef struct {
    int32_t *ids; /* current tokens of the word */
    int n;
    int count; /* occurrences in the text */
} word;

typedef struct {
    word *w;
    int n, cap;
} word_list;

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}
static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* Length of the pre-token at s, GPT-2 style: a contraction ('s 't 're 've 'm 'll 'd), an optional
 * space then letters, digits or other symbols, or a run of whitespace that leaves its last space to
 * the word after it. */
static size_t pretoken_length(const char *s)
{
    static const char *const CONTRACTIONS[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t i = 0; i < sizeof CONTRACTIONS / sizeof CONTRACTIONS[0]; i++)
        if (strncmp(s, CONTRACTIONS[i], strlen(CONTRACTIONS[i])) == 0)
            return strlen(CONTRACTIONS[i]);
    size_t n = 0;
    const char *p = s[0] == ' ' && s[1] && !is_space(s[1]) ? s + 1 : s;
    n = (size_t)(p - s);
    if (is_letter(p[0])) {
        while (is_letter(s[n]))
            n++;
    } else if (is_digit(p[0])) {
        while (is_digit(s[n]))
            n++;
    } else if (!is_space(p[0])) {
        while (s[n] && !is_space(s[n]) && !is_letter(s[n]) && !is_digit(s[n]))
            n++;
    } else {
        while (is_space(s[n]))
            n++;
        if (s[n] && n > 1 && s[n - 1] == ' ')
            n--; /* that space starts the next word */
    }
    return n;
}

static int add_word(word_list *l, const char *s, size_t len, int32_t first_byte_id)
{
    for (int i = 0; i < l->n; i++) {
        if ((size_t)l->w[i].n != len)
            continue;
        bool same = true;
        for (size_t j = 0; j < len && same; j++)
            same = l->w[i].ids[j] == first_byte_id + (uint8_t)s[j];
        if (same) {
            l->w[i].count++;
            return 0;
        }
    }
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 256;
        word *w = realloc(l->w, sizeof *w * (size_t)cap);
        if (!w)
            return -1;
        l->w = w;
        l->cap = cap;
    }
    word *w = &l->w[l->n];
    w->ids = malloc(sizeof *w->ids * len);
    if (!w->ids)
        return -1;
    for (size_t j = 0; j < len; j++)
        w->ids[j] = first_byte_id + (uint8_t)s[j];
    w->n = (int)len;
    w->count = 1;
    l->n++;
    return 0;
}

static void free_words(word_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->w[i].ids);
    free(l->w);
}

/* ---- pair counting ------------------------------------------------------------------------------ */

enum { PAIR_SLOTS = 1 << 16 };

typedef struct {
    int32_t a, b; /* a < 0: empty */
    int count;
} pair_slot;

static pair_slot *pair_find(pair_slot *t, int32_t a, int32_t b)
{
    uint32_t h = ((uint32_t)a * 0x9E3779B1u) ^ ((uint32_t)b * 0x85EBCA77u);
    for (uint32_t i = h & (PAIR_SLOTS - 1);; i = (i + 1) & (PAIR_SLOTS - 1))
        if (t[i].a < 0 || (t[i].a == a && t[i].b == b))
            return &t[i];
}

/* The most frequent adjacent pair (ties: the smallest ids, so that the result is deterministic). Returns
 * its count, 0 if there is no pair. The table has room for every pair: the text has fewer symbols
 * than slots. */
static int best_pair(const word_list *l, pair_slot *t, int32_t *a, int32_t *b)
{
    for (int i = 0; i < PAIR_SLOTS; i++)
        t[i].a = -1;
    int best = 0;
    for (int i = 0; i < l->n; i++)
        for (int j = 0; j + 1 < l->w[i].n; j++) {
            pair_slot *s = pair_find(t, l->w[i].ids[j], l->w[i].ids[j + 1]);
            if (s->a < 0)
                *s = (pair_slot){l->w[i].ids[j], l->w[i].ids[j + 1], 0};
            s->count += l->w[i].count;
            const bool better =
                s->count > best || (s->count == best && (s->a < *a || (s->a == *a && s->b < *b)));
            if (better) {
                best = s->count;
                *a = s->a;
                *b = s->b;
            }
        }
    return best;
}

static void apply_merge(word_list *l, int32_t a, int32_t b, int32_t merged)
{
    for (int i = 0; i < l->n; i++) {
        word *w = &l->w[i];
        int out = 0;
        for (int j = 0; j < w->n; j++) {
            if (j + 1 < w->n && w->ids[j] == a && w->ids[j + 1] == b) {
                w->ids[out++] = merged;
                j++;
            } else {
                w->ids[out++] = w->ids[j];
            }
        }
        w->n = out;
    }
}

/* ---- the whole vocabulary ----------------------------------------------------------------------- */

static int n_specials(const woolly_chat_family *family)
{
    int n = 1; /* <|endoftext|> */
    if (family)
        for (const char *const *s = family->specials; *s; s++)
            n++;
    return n;
}

int64_t woolly_synth_vocab_min(const woolly_chat_family *family)
{
    return n_specials(family) + 256;
}

static int learn_merges(builder *b, int32_t first_byte_id, uint64_t budget)
{
    word_list words = {0};
    for (const char *s = woolly_synth_text; *s;) {
        const size_t len = pretoken_length(s);
        if (add_word(&words, s, len, first_byte_id) != 0) {
            free_words(&words);
            return -1;
        }
        s += len;
    }
    pair_slot *table = malloc(sizeof *table * PAIR_SLOTS);
    if (!table) {
        free_words(&words);
        return -1;
    }
    woolly_synth_vocab *v = b->v;
    while (v->n_learned < budget && !b->oom) {
        int32_t a = -1, c = -1;
        if (best_pair(&words, table, &a, &c) < MIN_PAIR_COUNT)
            break;
        char *text = malloc(strlen(v->tokens[a]) + strlen(v->tokens[c]) + 1);
        if (!text) {
            b->oom = true;
            break;
        }
        sprintf(text, "%s%s", v->tokens[a], v->tokens[c]);
        int64_t id = find_token(v, text);
        if (id < 0) {
            id = add_token(b, text, WOOLLY_TOKEN_NORMAL);
            v->n_learned++;
        }
        free(text);
        add_merge(b, v->tokens[a], v->tokens[c]);
        apply_merge(&words, a, c, (int32_t)id);
    }
    free(table);
    free_words(&words);
    return b->oom ? -1 : 0;
}

int woolly_synth_vocab_build(int64_t n_vocab, const woolly_chat_family *family, woolly_synth_vocab *v,
                             woolly_error *err)
{
    memset(v, 0, sizeof *v);
    const int64_t min = woolly_synth_vocab_min(family);
    if (n_vocab < min || n_vocab > (1 << 24))
        return woolly_fail(err, "the built-in tokenizer needs a vocabulary of %lld to %d tokens, not %lld",
                           (long long)min, 1 << 24, (long long)n_vocab);
    v->tokens = calloc((size_t)n_vocab, sizeof *v->tokens);
    v->types = calloc((size_t)n_vocab, sizeof *v->types);
    builder b = {.v = v, .cap_tokens = (uint64_t)n_vocab, .oom = !v->tokens || !v->types};

    if (!b.oom) {
        add_token(&b, ENDOFTEXT, WOOLLY_TOKEN_CONTROL);
        if (family)
            for (const char *const *s = family->specials; *s; s++)
                add_token(&b, *s, WOOLLY_TOKEN_CONTROL);
        const int32_t first_byte_id = (int32_t)v->n;
        for (int byte = 0; byte < 256; byte++) {
            char text[4];
            size_t len = 0;
            put_utf8(text, &len, woolly_byte_to_codepoint((uint8_t)byte));
            text[len] = '\0';
            add_token(&b, text, WOOLLY_TOKEN_NORMAL);
        }
        if (!b.oom)
            learn_merges(&b, first_byte_id, (uint64_t)n_vocab - v->n);
        /* the text has no "<|", so no learned token can look like a filler, nor can a special */
        for (uint64_t i = 0; v->n < (uint64_t)n_vocab && !b.oom; i++) {
            char text[32];
            snprintf(text, sizeof text, FILLER_PREFIX "%llu|>", (unsigned long long)i);
            add_token(&b, text, WOOLLY_TOKEN_UNUSED);
        }
        const char *bos = family ? family->bos : ENDOFTEXT, *eos = family ? family->eos : ENDOFTEXT;
        v->bos = (uint32_t)find_token(v, bos);
        v->eos = (uint32_t)find_token(v, eos);
        v->add_bos = family ? family->add_bos : false;
    }
    if (b.oom) {
        woolly_synth_vocab_free(v);
        return woolly_fail(err, "out of memory building a %lld-token vocabulary", (long long)n_vocab);
    }
    return 0;
}

void woolly_synth_vocab_free(woolly_synth_vocab *v)
{
    for (uint64_t i = 0; v->tokens && i < v->n; i++)
        free(v->tokens[i]);
    for (uint64_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tokens), free(v->types), free(v->merges);
    memset(v, 0, sizeof *v);
}
