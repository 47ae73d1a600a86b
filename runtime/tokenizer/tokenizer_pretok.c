#include "tokenizer_pretok.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_pretok_stage.h"
#include "unicode.h"

/* The start indices of the pieces made so far, increasing. */
typedef struct cuts {
    uint32_t *v;
    size_t n;
} cuts;

static void cut(cuts *c, uint32_t pos)
{
    if (c->n == 0 || c->v[c->n - 1] != pos)
        c->v[c->n++] = pos;
}

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

static bool in_ranges(uint32_t c, const cp_range *r, size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo)
            hi = mid;
        else if (c > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* DeepSeek LLM's letter class. A few endpoints are canonical singletons (U+1F7D, U+1FBE, U+1FD3,
 * U+1FDB, U+2126, U+212A): an NFC-normalized copy of the published file shows them as U+03CE, U+03B9,
 * U+0390, U+038A, U+03A9 and K, which would make ranges run backwards; the code points of the
 * tokenizer itself are the singletons. */
static const cp_range DEEPSEEK_LETTERS[] = {
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},   {0x00D8, 0x00F6},
    {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},   {0x0295, 0x02AF},   {0x0370, 0x0373},
    {0x0376, 0x0377},   {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
    {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* [!-/:-~！-／：-～‘-‟　-。]: ASCII punctuation, and with it everything from ':' to '~' (letters
 * included), full-width forms, curly quotes, the ideographic space, comma and full stop. */
static const cp_range DEEPSEEK_PUNCT[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

/* [一-龥ࠀ-一가-퟿]: U+4E00..U+9FA5 and U+0800..U+4E00 (together U+0800..U+9FA5), Hangul
 * U+AC00..U+D7FF.
 */
static const cp_range DEEPSEEK_CJK[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

#define N_RANGES(a) (sizeof(a) / sizeof((a)[0]))

static bool ds_letter(uint32_t c)
{
    if (c < 0x80)
        return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    return in_ranges(c, DEEPSEEK_LETTERS, N_RANGES(DEEPSEEK_LETTERS));
}

static bool ds_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E);
    return in_ranges(c, DEEPSEEK_PUNCT, N_RANGES(DEEPSEEK_PUNCT));
}

static bool ds_cjk(uint32_t c)
{
    return c >= 0x800 && in_ranges(c, DEEPSEEK_CJK, N_RANGES(DEEPSEEK_CJK));
}

static inline bool is_space(const text_cps *t, uint32_t i)
{
    return t->fl[i] & UCD_SPACE;
}

/* ---- Isolating splits: the matches of a pattern and the gaps between them all become pieces. ---- */

/* Finds the leftmost match in [p, e): true and its bounds, or false. */
typedef bool (*find_fn)(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me);

static void split_isolated(const text_cps *t, uint32_t b, uint32_t e, find_fn find, cuts *c)
{
    cut(c, b);
    uint32_t p = b, ms, me;
    while (p < e && find(t, p, e, &ms, &me)) {
        cut(c, ms);
        if (me < e)
            cut(c, me);
        p = me;
    }
}

/* [\r\n] */
static bool find_newline(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    for (uint32_t i = p; i < e; i++)
        if (t->cp[i] == '\r' || t->cp[i] == '\n') {
            *ms = i;
            *me = i + 1;
            return true;
        }
    return false;
}

/* \s?[class]+ : at the leftmost position where either a space followed by a class character or a
 * class character starts (the optional space is taken when it can be). */
static bool find_space_class(const text_cps *t, uint32_t p, uint32_t e, bool (*cls)(uint32_t), uint32_t *ms,
                             uint32_t *me)
{
    for (uint32_t i = p; i < e; i++) {
        uint32_t q;
        if (is_space(t, i) && i + 1 < e && cls(t->cp[i + 1]))
            q = i + 1;
        else if (cls(t->cp[i]))
            q = i;
        else
            continue;
        while (q < e && cls(t->cp[q]))
            q++;
        *ms = i;
        *me = q;
        return true;
    }
    return false;
}

static bool find_ds_letters(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    return find_space_class(t, p, e, ds_letter, ms, me);
}

static bool find_ds_punct(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    return find_space_class(t, p, e, ds_punct, ms, me);
}

/* \s+$ : the run of spaces that ends the piece. ($ would also match before a "\n" inside a piece, but
 * the first split has already isolated every "\n".) */
static bool find_trailing_space(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    if (e == p || !is_space(t, e - 1))
        return false;
    uint32_t r = e - 1;
    while (r > p && is_space(t, r - 1))
        r--;
    *ms = r;
    *me = e;
    return true;
}

/* [一-龥ࠀ-一가-퟿]+ */
static bool find_ds_cjk(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    for (uint32_t i = p; i < e; i++)
        if (ds_cjk(t->cp[i])) {
            uint32_t q = i + 1;
            while (q < e && ds_cjk(t->cp[q]))
                q++;
            *ms = i;
            *me = q;
            return true;
        }
    return false;
}

/* One \p{N} character (Hugging Face's Digits pre-tokenizer with individual_digits). */
static bool find_digit(const text_cps *t, uint32_t p, uint32_t e, uint32_t *ms, uint32_t *me)
{
    for (uint32_t i = p; i < e; i++)
        if (t->fl[i] & UCD_NUMBER) {
            *ms = i;
            *me = i + 1;
            return true;
        }
    return false;
}

/* ---- GPT-2's regex: its alternatives cover every character, so its matches tile the piece. ---- */

static inline uint32_t run_of(const text_cps *t, uint32_t q, uint32_t e, uint8_t want)
{
    while (q < e && (t->fl[q] & want))
        q++;
    return q;
}

/* The end of the match that starts at p (< e): the first alternative that matches, as a backtracking
 * engine would try them. */
static uint32_t gpt2_match(const text_cps *t, uint32_t p, uint32_t e)
{
    uint32_t c = t->cp[p];
    /* 's|'t|'re|'ve|'m|'ll|'d */
    if (c == '\'' && p + 1 < e) {
        uint32_t c1 = t->cp[p + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
            return p + 2;
        if (p + 2 < e) {
            uint32_t c2 = t->cp[p + 2];
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                return p + 3;
        }
    }
    /* ` ?X+` for X = \p{L}, \p{N}, [^\s\p{L}\p{N}]: the optional space is a plain U+0020. A space is
     * none of the three classes, so trying X at q also covers the case of the space not being taken. */
    uint32_t q = (c == ' ' && p + 1 < e) ? p + 1 : p;
    uint8_t f = t->fl[q];
    if (f & UCD_LETTER)
        return run_of(t, q + 1, e, UCD_LETTER);
    if (f & UCD_NUMBER)
        return run_of(t, q + 1, e, UCD_NUMBER);
    if (!(f & (UCD_SPACE | UCD_LETTER | UCD_NUMBER))) {
        while (q < e && !(t->fl[q] & (UCD_SPACE | UCD_LETTER | UCD_NUMBER)))
            q++;
        return q;
    }
    /* \s+(?!\S)|\s+ : a run of spaces that is followed by a non-space gives that character its last
     * space (a single space then matches \s+ alone). */
    uint32_t r = run_of(t, p, e, UCD_SPACE);
    if (r == p)
        return p + 1; /* not reached: every character is in one of the classes above */
    if (r < e && r - p >= 2)
        return r - 1;
    return r;
}

/* A match stage (see tokenizer_pretok_stage.h): matches and the stretches between them. */
static void split_matches(const text_cps *t, uint32_t b, uint32_t e, pretok_match_fn match, cuts *c)
{
    uint32_t p = b;
    while (p < e) {
        cut(c, p);
        uint32_t q = match(t, p, e);
        if (q > p) {
            p = q;
            continue;
        }
        while (++p < e && match(t, p, e) == p)
            ;
    }
}

/* ---- The pre-tokenizers as sequences of stages. ---- */

/* A stage is either a search (find) or a matcher (match); the other is NULL. */
typedef struct stage {
    find_fn find;
    pretok_match_fn match;
} stage;

static const stage GPT2_STAGES[] = {{NULL, gpt2_match}};
static const stage STARCODER_STAGES[] = {{find_digit, NULL}, {NULL, gpt2_match}};
static const stage DEEPSEEK_LLM_STAGES[] = {
    {find_newline, NULL},        {find_ds_letters, NULL}, {find_ds_punct, NULL},
    {find_trailing_space, NULL}, {find_ds_cjk, NULL},     {find_digit, NULL},
};
static const stage LLAMA3_STAGES[] = {{NULL, pretok_match_llama3}};
static const stage QWEN2_STAGES[] = {{NULL, pretok_match_qwen2}};
static const stage TEKKEN_STAGES[] = {{NULL, pretok_match_tekken}};
static const stage GPT4O_STAGES[] = {{NULL, pretok_match_gpt4o}};
static const stage DEEPSEEK_V3_STAGES[] = {
    {NULL, pretok_match_digits3},
    {NULL, pretok_match_cjk_kana},
    {NULL, pretok_match_deepseek_v3},
};

#define STAGES(a) a, N_RANGES(a)
static const struct {
    const stage *stages;
    size_t n;
} PRETOK_STAGES[] = {
    [WOOLLY_PRETOK_GPT2] = {STAGES(GPT2_STAGES)},
    [WOOLLY_PRETOK_STARCODER] = {STAGES(STARCODER_STAGES)},
    [WOOLLY_PRETOK_DEEPSEEK_LLM] = {STAGES(DEEPSEEK_LLM_STAGES)},
    [WOOLLY_PRETOK_LLAMA3] = {STAGES(LLAMA3_STAGES)},
    [WOOLLY_PRETOK_QWEN2] = {STAGES(QWEN2_STAGES)},
    [WOOLLY_PRETOK_TEKKEN] = {STAGES(TEKKEN_STAGES)},
    [WOOLLY_PRETOK_GPT4O] = {STAGES(GPT4O_STAGES)},
    [WOOLLY_PRETOK_DEEPSEEK_V3] = {STAGES(DEEPSEEK_V3_STAGES)},
};

static const struct {
    const char *name;
    enum woolly_pretok kind;
} NAMES[] = {
    {"default", WOOLLY_PRETOK_GPT2},
    {"gpt-2", WOOLLY_PRETOK_GPT2},
    {"starcoder", WOOLLY_PRETOK_STARCODER},
    {"deepseek-llm", WOOLLY_PRETOK_DEEPSEEK_LLM},
    /* Names llama.cpp gives the same pre-tokenizer. */
    {"smollm", WOOLLY_PRETOK_STARCODER},
    {"refact", WOOLLY_PRETOK_STARCODER},
    {"llama-bpe", WOOLLY_PRETOK_LLAMA3},
    {"llama3", WOOLLY_PRETOK_LLAMA3},
    {"llama-v3", WOOLLY_PRETOK_LLAMA3},
    {"qwen2", WOOLLY_PRETOK_QWEN2},
    {"deepseek-r1-qwen", WOOLLY_PRETOK_QWEN2},
    {"tekken", WOOLLY_PRETOK_TEKKEN},
    {"gpt-4o", WOOLLY_PRETOK_GPT4O},
    {"deepseek-v3", WOOLLY_PRETOK_DEEPSEEK_V3},
};

int woolly_pretok_lookup(const char *name, size_t len, enum woolly_pretok *out)
{
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strlen(NAMES[i].name) == len && memcmp(NAMES[i].name, name, len) == 0) {
            *out = NAMES[i].kind;
            return 0;
        }
    return -1;
}

const char *woolly_pretok_supported(void)
{
    static char list[512];
    if (!list[0]) {
        size_t o = 0;
        for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0] && o < sizeof list; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", NAMES[i].name);
    }
    return list;
}

const char *woolly_pretok_name(enum woolly_pretok p)
{
    switch (p) {
    case WOOLLY_PRETOK_GPT2:
        return "gpt-2";
    case WOOLLY_PRETOK_STARCODER:
        return "starcoder";
    case WOOLLY_PRETOK_DEEPSEEK_LLM:
        return "deepseek-llm";
    case WOOLLY_PRETOK_LLAMA3:
        return "llama-bpe";
    case WOOLLY_PRETOK_QWEN2:
        return "qwen2";
    case WOOLLY_PRETOK_TEKKEN:
        return "tekken";
    case WOOLLY_PRETOK_GPT4O:
        return "gpt-4o";
    case WOOLLY_PRETOK_DEEPSEEK_V3:
        return "deepseek-v3";
    }
    return "?";
}

int64_t woolly_pretok_split(enum woolly_pretok p, const char *text, size_t len, uint32_t **bounds,
                            woolly_error *err)
{
    *bounds = NULL;
    if (len >= UINT32_MAX)
        return woolly_fail(err, "tokenizer: a text of %zu bytes is too long to pre-tokenize (at most %u)",
                           len, UINT32_MAX - 1);
    if ((unsigned)p >= N_RANGES(PRETOK_STAGES))
        p = WOOLLY_PRETOK_GPT2;
    const stage *stages = PRETOK_STAGES[p].stages;
    size_t n_stages = PRETOK_STAGES[p].n;

    /* One block: code points, their byte offsets (+1), two cut lists (+1 each), then flags. */
    size_t cap = len + 1;
    uint32_t *mem = malloc(cap * 4 * sizeof(uint32_t) + cap);
    if (!mem)
        return woolly_fail(err, "tokenizer: out of memory pre-tokenizing %zu bytes", len);
    uint32_t *cp = mem, *off = mem + cap, *buf_a = mem + 2 * cap, *buf_b = mem + 3 * cap;
    uint8_t *fl = (uint8_t *)(mem + 4 * cap);

    uint32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k;
        cp[n] = woolly_utf8_decode(text + i, len - i, &k);
        fl[n] = woolly_ucd_flags(cp[n]);
        off[n++] = (uint32_t)i;
        i += k;
    }
    off[n] = (uint32_t)len;

    text_cps t = {cp, fl};
    cuts cur = {buf_a, 0}, next = {buf_b, 0};
    if (n > 0)
        cur.v[cur.n++] = 0;
    for (size_t s = 0; s < n_stages; s++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            uint32_t b = cur.v[i], e = i + 1 < cur.n ? cur.v[i + 1] : n;
            if (stages[s].match)
                split_matches(&t, b, e, stages[s].match, &next);
            else
                split_isolated(&t, b, e, stages[s].find, &next);
        }
        cuts tmp = cur;
        cur = next;
        next = tmp;
    }

    uint32_t *out = malloc((cur.n + 1) * sizeof(uint32_t));
    if (!out) {
        free(mem);
        return woolly_fail(err, "tokenizer: out of memory pre-tokenizing %zu bytes", len);
    }
    for (size_t i = 0; i < cur.n; i++)
        out[i] = off[cur.v[i]];
    out[cur.n] = (uint32_t)len;
    int64_t count = (int64_t)cur.n;
    free(mem);
    *bounds = out;
    return count;
}
