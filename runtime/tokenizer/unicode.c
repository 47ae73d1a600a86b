#include "unicode.h"

#include "unicode/unicode_tables.inc"

const char *woolly_unicode_version(void)
{
    return WOOLLY_UNICODE_VERSION;
}

uint8_t woolly_ucd_flags(uint32_t cp)
{
    if (cp < WOOLLY_UCD_DIRECT_LIMIT)
        return WOOLLY_UCD_DIRECT[cp];
    if (cp > 0x10FFFF)
        return UCD_OTHER;
    /* The last range whose start is <= cp. */
    size_t lo = 0, hi = WOOLLY_UCD_N_RANGES;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (WOOLLY_UCD_START[mid] <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return WOOLLY_UCD_FLAGS[lo];
}

size_t woolly_utf8_lead_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 1;
}

uint32_t woolly_utf8_decode(const char *s, size_t len, size_t *n)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    *n = 1;
    if (c < 0x80)
        return c;
    size_t need = woolly_utf8_lead_len(c);
    if (need == 1 || need > len)
        return WOOLLY_CP_INVALID;
    uint32_t cp = c & (0xFF >> (need + 1));
    for (size_t i = 1; i < need; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return WOOLLY_CP_INVALID;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    /* Overlong 3- and 4-byte forms, surrogates and values above U+10FFFF (C0, C1 and F5..FF are
     * already rejected as lead bytes). */
    if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) || (cp >= 0xD800 && cp <= 0xDFFF) ||
        cp > 0x10FFFF)
        return WOOLLY_CP_INVALID;
    *n = need;
    return cp;
}

size_t woolly_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
