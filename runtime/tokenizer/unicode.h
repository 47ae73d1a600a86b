/* Unicode for the tokenizers: UTF-8 decoding that never fails (a byte that does not start a valid
 * sequence is one "invalid" unit, so every input has a defined reading), and the character classes
 * the pre-tokenizer regexes use, from tables generated at build time (codegen/unicode_gen.py). */
#ifndef WOOLLY_UNICODE_H
#define WOOLLY_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Flags of a code point: exactly one general-category class bit, plus UCD_SPACE for the regex \s
 * (Unicode White_Space: Zs, Zl, Zp and U+0009..U+000D, U+0085). */
enum {
    UCD_LETTER = 0x01,    /* \p{L} */
    UCD_MARK = 0x02,      /* \p{M} */
    UCD_NUMBER = 0x04,    /* \p{N} */
    UCD_PUNCT = 0x08,     /* \p{P} */
    UCD_SYMBOL = 0x10,    /* \p{S} */
    UCD_SEPARATOR = 0x20, /* \p{Z} */
    UCD_OTHER = 0x40,     /* \p{C}, unassigned code points included */
    UCD_SPACE = 0x80,     /* \s */
};

/* Stands for a byte that does not start a valid UTF-8 sequence (flags: UCD_OTHER). Outside the code
 * point range, so it never equals a real character. */
#define WOOLLY_CP_INVALID 0x110000u

const char *woolly_unicode_version(void);

/* Flags of cp (UCD_OTHER for WOOLLY_CP_INVALID and anything above U+10FFFF). */
uint8_t woolly_ucd_flags(uint32_t cp);

/* Decodes the character at s[0..len) (len >= 1): stores its byte length (1..4) in *n and returns the
 * code point; a malformed, overlong, surrogate or truncated sequence gives WOOLLY_CP_INVALID with
 * *n = 1. */
uint32_t woolly_utf8_decode(const char *s, size_t len, size_t *n);

/* Encodes cp (<= U+10FFFF) into out[0..4); returns the byte count. */
size_t woolly_utf8_encode(uint32_t cp, char *out);

/* The length a UTF-8 sequence announces by its first byte (1 for a continuation or invalid byte). */
size_t woolly_utf8_lead_len(unsigned char c);

#endif
