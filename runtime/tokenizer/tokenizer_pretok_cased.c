/* The pre-tokenizer regexes that llama.cpp runs through std::regex on its "collapsed" text: tekken
 * (Mistral Nemo/Small), gpt-4o (Phi-4-mini, Llama 4) and deepseek-v3 (see tokenizer_pretok_stage.h).
 *
 * llama.cpp replaces every character outside ASCII by one byte that names its class (letter, number,
 * punctuation, mark, symbol, whitespace, other) and rewrites \p{X} as that byte plus the ASCII members
 * of X. Two consequences make its result differ from the published regexes, and llama.cpp's result is
 * the one the model files are used with:
 * - [^a-z] and [^A-Z] are ASCII sets, so a letter outside ASCII counts as upper and as lower case;
 * - its ASCII \p{S} leaves out '~', so '~' is neither punctuation nor symbol. */
#include "tokenizer_pretok_stage.h"

static inline bool is_crlf(uint32_t c)
{
    return c == '\r' || c == '\n';
}

static inline bool is_space(const text_cps *t, uint32_t i)
{
    return t->fl[i] & UCD_SPACE;
}

static inline bool is_letter(const text_cps *t, uint32_t i)
{
    return t->fl[i] & UCD_LETTER;
}

static inline bool is_number(const text_cps *t, uint32_t i)
{
    return t->fl[i] & UCD_NUMBER;
}

/* ((?=[\p{L}])([^a-z])) and ((?=[\p{L}])([^A-Z])) */
static inline bool is_upperish(const text_cps *t, uint32_t i)
{
    return is_letter(t, i) && !(t->cp[i] >= 'a' && t->cp[i] <= 'z');
}

static inline bool is_lowerish(const text_cps *t, uint32_t i)
{
    return is_letter(t, i) && !(t->cp[i] >= 'A' && t->cp[i] <= 'Z');
}

/* \p{P} and \p{S} as llama.cpp collapses them: the Unicode classes outside ASCII, and inside ASCII
 * !-#%-*,-/:-;?-@[-]_{} and $+<=>^`| (no '~'). */
static inline bool is_punct_or_symbol(const text_cps *t, uint32_t i)
{
    uint32_t c = t->cp[i];
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7D);
    return (t->fl[i] & (UCD_PUNCT | UCD_SYMBOL)) && !is_space(t, i);
}

/* [\p{L}\p{M}] (no ASCII marks exist) */
static inline bool is_letter_or_mark(const text_cps *t, uint32_t i)
{
    return t->fl[i] & (UCD_LETTER | UCD_MARK);
}

/* The two letter alternatives from s (the optional prefix already taken): their end, or s.
 *   A: [^a-z]* [^A-Z]+   greedy, backtracking: the upper run, then a lower run if a-z follows it;
 *      otherwise the run gives back characters until one it gave back is lower too (a letter
 *      outside ASCII), which then ends the match alone;
 *   B: [^a-z]+ [^A-Z]*   the upper run (nothing lower can follow it once A has failed). */
static uint32_t cased_letters(const text_cps *t, uint32_t s, uint32_t e)
{
    uint32_t r = s;
    while (r < e && is_upperish(t, r))
        r++;
    if (r < e && t->cp[r] >= 'a' && t->cp[r] <= 'z') {
        while (r < e && is_lowerish(t, r))
            r++;
        return r;
    }
    for (uint32_t j = r; j > s; j--)
        if (t->cp[j - 1] >= 0x80) /* an upper-run letter outside ASCII is lower as well */
            return j;
    return r;
}

/* (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])? at p: its end, or p. */
static uint32_t contraction(const text_cps *t, uint32_t p, uint32_t e)
{
    if (p + 1 >= e || t->cp[p] != '\'')
        return p;
    uint32_t c1 = t->cp[p + 1] | 0x20, c2 = p + 2 < e ? t->cp[p + 2] | 0x20 : 0;
    if (t->cp[p + 1] >= 0x80)
        return p;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return p + 2;
    if (p + 2 < e && t->cp[p + 2] < 0x80 &&
        ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')))
        return p + 3;
    return p;
}

static uint32_t match_cased(const text_cps *t, uint32_t p, uint32_t e, uint32_t max_digits, bool contractions)
{
    /* [^\r\n\p{L}\p{N}]? then the letter alternatives */
    uint32_t s = p;
    if (!is_crlf(t->cp[p]) && !is_letter(t, p) && !is_number(t, p) && p + 1 < e)
        s = p + 1;
    uint32_t q = s < e && is_letter(t, s) ? cased_letters(t, s, e) : s;
    if (q > s)
        return contractions ? contraction(t, q, e) : q;
    /* \p{N}{1,max} */
    if (is_number(t, p)) {
        q = p + 1;
        while (q < e && q - p < max_digits && is_number(t, q))
            q++;
        return q;
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n/]*` */
    q = (t->cp[p] == ' ' && p + 1 < e) ? p + 1 : p;
    if (!is_space(t, q) && !is_letter(t, q) && !is_number(t, q)) {
        while (q < e && !is_space(t, q) && !is_letter(t, q) && !is_number(t, q))
            q++;
        while (q < e && (is_crlf(t->cp[q]) || t->cp[q] == '/'))
            q++;
        return q;
    }
    return pretok_match_spaces(t, p, e);
}

uint32_t pretok_match_tekken(const text_cps *t, uint32_t p, uint32_t e)
{
    return match_cased(t, p, e, 1, false);
}

uint32_t pretok_match_gpt4o(const text_cps *t, uint32_t p, uint32_t e)
{
    return match_cased(t, p, e, 3, true);
}

uint32_t pretok_match_digits3(const text_cps *t, uint32_t p, uint32_t e)
{
    uint32_t q = p;
    while (q < e && q - p < 3 && is_number(t, q))
        q++;
    return q;
}

/* [一-龥぀-ゟ゠-ヿ]+ : CJK ideographs U+4E00..U+9FA5, hiragana and katakana U+3040..U+30FF. */
static inline bool is_cjk_kana(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

uint32_t pretok_match_cjk_kana(const text_cps *t, uint32_t p, uint32_t e)
{
    uint32_t q = p;
    while (q < e && is_cjk_kana(t->cp[q]))
        q++;
    return q;
}

uint32_t pretok_match_deepseek_v3(const text_cps *t, uint32_t p, uint32_t e)
{
    uint32_t c = t->cp[p];
    /* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ */
    bool ascii_punct = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
    if (ascii_punct && p + 1 < e) {
        uint32_t q = p + 1;
        while (q < e && ((t->cp[q] | 0x20) >= 'a' && (t->cp[q] | 0x20) <= 'z'))
            q++;
        if (q > p + 1)
            return q;
    }
    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ */
    uint32_t s = p;
    if (!is_crlf(c) && !is_letter(t, p) && !is_punct_or_symbol(t, p) && p + 1 < e &&
        is_letter_or_mark(t, p + 1))
        s = p + 1;
    if (is_letter_or_mark(t, s)) {
        while (s < e && is_letter_or_mark(t, s))
            s++;
        return s;
    }
    /* ` ?[\p{P}\p{S}]+[\r\n]*` */
    uint32_t q = (c == ' ' && p + 1 < e) ? p + 1 : p;
    if (is_punct_or_symbol(t, q)) {
        while (q < e && is_punct_or_symbol(t, q))
            q++;
        while (q < e && is_crlf(t->cp[q]))
            q++;
        return q;
    }
    return pretok_match_spaces(t, p, e);
}
