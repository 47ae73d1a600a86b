/* Llama 3's and Qwen2's pre-tokenizer regexes (see tokenizer_pretok_stage.h), as hand-written matchers
 * that take the alternatives in the order a backtracking engine tries them. llama.cpp's own matcher is
 * the reference: where the published regex and it could differ, this follows it. */
#include "tokenizer_pretok_stage.h"

static inline bool is_crlf(uint32_t c)
{
    return c == '\r' || c == '\n';
}

static inline uint32_t ascii_lower(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

uint32_t pretok_match_spaces(const text_cps *t, uint32_t p, uint32_t e)
{
    uint32_t r = p, last_crlf = 0;
    while (r < e && (t->fl[r] & UCD_SPACE)) {
        if (is_crlf(t->cp[r]))
            last_crlf = r + 1;
        r++;
    }
    if (r == p)
        return p;
    if (last_crlf) /* \s*[\r\n]+ : up to the last line break of the run */
        return last_crlf;
    if (r < e && r - p >= 2) /* \s+(?!\S) : the last space goes with what follows */
        return r - 1;
    return r;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at p: its end, or p. */
static uint32_t contraction(const text_cps *t, uint32_t p, uint32_t e)
{
    if (p + 1 >= e || t->cp[p] != '\'')
        return p;
    uint32_t c1 = ascii_lower(t->cp[p + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return p + 2;
    if (p + 2 < e) {
        uint32_t c2 = ascii_lower(t->cp[p + 2]);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
            return p + 3;
    }
    return p;
}

static uint32_t match_llama3_like(const text_cps *t, uint32_t p, uint32_t e, uint32_t max_digits)
{
    uint32_t q = contraction(t, p, e);
    if (q > p)
        return q;
    uint32_t c = t->cp[p];
    uint8_t f = t->fl[p];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!is_crlf(c) && !(f & UCD_NUMBER) &&
        ((f & UCD_LETTER) || (p + 1 < e && (t->fl[p + 1] & UCD_LETTER)))) {
        q = p + 1;
        while (q < e && (t->fl[q] & UCD_LETTER))
            q++;
        return q;
    }
    /* \p{N}{1,max} */
    if (f & UCD_NUMBER) {
        q = p + 1;
        while (q < e && q - p < max_digits && (t->fl[q] & UCD_NUMBER))
            q++;
        return q;
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    const uint8_t word = UCD_SPACE | UCD_LETTER | UCD_NUMBER;
    q = (c == ' ' && p + 1 < e) ? p + 1 : p;
    if (!(t->fl[q] & word)) {
        while (q < e && !(t->fl[q] & word))
            q++;
        while (q < e && is_crlf(t->cp[q]))
            q++;
        return q;
    }
    q = pretok_match_spaces(t, p, e);
    return q > p ? q : p + 1;
}

uint32_t pretok_match_llama3(const text_cps *t, uint32_t p, uint32_t e)
{
    return match_llama3_like(t, p, e, 3);
}

uint32_t pretok_match_qwen2(const text_cps *t, uint32_t p, uint32_t e)
{
    return match_llama3_like(t, p, e, 1);
}
