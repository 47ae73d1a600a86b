/* The pieces the pre-tokenizer stages share (private to tokenizer_pretok*.c): the text as code points
 * with their class flags, and the two shapes a stage has.
 *
 * A stage is applied to every piece the previous stage made, as llama.cpp applies its list of regexes.
 * A "match" stage behaves like a regex iterator over the piece: at p, match() gives the end of the match
 * that starts there (or p when none does); matches become pieces, and a stretch where nothing matches
 * becomes one piece of its own. A "find" stage is the same thing written as a search for the leftmost
 * match (for patterns such as \s+$ whose failure at one position is not cheap to see). */
#ifndef WOOLLY_TOKENIZER_PRETOK_STAGE_H
#define WOOLLY_TOKENIZER_PRETOK_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "unicode.h"

typedef struct text_cps {
    const uint32_t *cp;
    const uint8_t *fl;
} text_cps;

/* The end of the match that starts at p (< e), or p when no alternative matches there. */
typedef uint32_t (*pretok_match_fn)(const text_cps *t, uint32_t p, uint32_t e);

/* Llama 3's regex as llama.cpp runs it (tokenizer_pretok_llama3.c):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+
 *   |\s+(?!\S)|\s+
 * and Qwen2's, the same with \p{N} one character at a time. Neither ever fails. */
uint32_t pretok_match_llama3(const text_cps *t, uint32_t p, uint32_t e);
uint32_t pretok_match_qwen2(const text_cps *t, uint32_t p, uint32_t e);

/* The regexes llama.cpp runs through std::regex on its "collapsed" text (tokenizer_pretok_cased.c),
 * where every non-ASCII character stands for its class only (so a non-ASCII letter is both upper and
 * lower case) and '~' is neither punctuation nor symbol:
 *   tekken   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+
 *            |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*
 *            |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   gpt-4o   the same with an optional contraction ('s, 't, 're, 've, 'm, 'll, 'd, either case) after
 *            each letter alternative, and \p{N}{1,3}
 *   deepseek-v3, three stages: \p{N}{1,3}, then [一-龥぀-ゟ゠-ヿ]+, then
 *            [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *            | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (this one can fail: digits alone) */
uint32_t pretok_match_tekken(const text_cps *t, uint32_t p, uint32_t e);
uint32_t pretok_match_gpt4o(const text_cps *t, uint32_t p, uint32_t e);
uint32_t pretok_match_digits3(const text_cps *t, uint32_t p, uint32_t e);
uint32_t pretok_match_cjk_kana(const text_cps *t, uint32_t p, uint32_t e);
uint32_t pretok_match_deepseek_v3(const text_cps *t, uint32_t p, uint32_t e);

/* The whitespace alternatives every one of these regexes ends with: \s*[\r\n]+|\s+(?!\S)|\s+ at p (a
 * space), or p if t->cp[p] is not one. */
uint32_t pretok_match_spaces(const text_cps *t, uint32_t p, uint32_t e);

#endif
