/* GBNF, llama.cpp's grammar format, read from its description:
 *
 *   root  ::= value ("," value)*      # a rule: name ::= alternatives; newlines are white space
 *   value ::= "lit\"eral\n" | [a-z0-9_] | [^"\\] | . | name | ( group ) | item* | item+ | item? | item{2,5}
 *
 * Rule names are letters, digits, '-' and '_'. A rule ends where the next `name ::=` begins. Literals
 * and classes take the escapes \n \r \t \\ \" \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH; `.` is any character;
 * `#` starts a comment. Repetition {m}, {m,}, {m,n}, {,n} bounds are at most 10000, and groups nest at most
 * 256 deep. Text is UTF-8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

#define GBNF_MAX_REPEAT 10000u
/* Groups nest at most this deep: the parser descends one call per group, and a client's grammar of
 * thousands of '(' would otherwise overflow the thread's stack. */
#define GBNF_MAX_NESTING 256u

typedef struct parser {
    const char *s, *end, *p;
    gbuilder b;
    woolly_error *err;
    bool failed;
    uint32_t depth; /* groups open around the parse position */
} parser;

static void where(const parser *ps, const char *at, uint32_t *line, uint32_t *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = ps->s; q < at; q++) {
        if (*q == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80) {
            ++*col;
        }
    }
}

__attribute__((format(printf, 3, 4))) static void fail_at(parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line, col;
    where(ps, at, &line, &col);
    woolly_fail(ps->err, "grammar: line %u, column %u: %s", line, col, msg);
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(parser *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else {
            break;
        }
    }
}

/* Whether a rule definition (`name ::=`) starts at p. */
static bool at_definition(parser *ps)
{
    const char *q = ps->p;
    while (q < ps->end && is_name_char(*q))
        q++;
    if (q == ps->p)
        return false;
    while (q < ps->end && (*q == ' ' || *q == '\t'))
        q++;
    return ps->end - q >= 3 && !memcmp(q, "::=", 3);
}

/* One UTF-8 character; advances p. Invalid bytes are an error. */
static uint32_t read_utf8(parser *ps)
{
    const unsigned char *q = (const unsigned char *)ps->p;
    const unsigned char *e = (const unsigned char *)ps->end;
    uint32_t c = q[0], need = 0;
    if (c < 0x80)
        need = 0;
    else if ((c & 0xE0) == 0xC0)
        need = 1, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        need = 2, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        need = 3, c &= 0x07;
    else {
        fail_at(ps, ps->p, "invalid UTF-8 byte 0x%02x", q[0]);
        return 0;
    }
    if ((size_t)(e - q) <= need) {
        fail_at(ps, ps->p, "truncated UTF-8 character");
        return 0;
    }
    for (uint32_t i = 1; i <= need; i++) {
        if ((q[i] & 0xC0) != 0x80) {
            fail_at(ps, ps->p, "invalid UTF-8 sequence");
            return 0;
        }
        c = (c << 6) | (q[i] & 0x3F);
    }
    ps->p += need + 1;
    return c;
}

static uint32_t read_hex(parser *ps, int digits)
{
    uint32_t v = 0;
    const char *at = ps->p;
    for (int i = 0; i < digits; i++) {
        if (ps->p >= ps->end) {
            fail_at(ps, at, "escape needs %d hex digits", digits);
            return 0;
        }
        char c = *ps->p++;
        uint32_t d = c >= '0' && c <= '9'   ? (uint32_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (uint32_t)(c - 'A' + 10)
                                            : 16u;
        if (d == 16) {
            fail_at(ps, ps->p - 1, "'%c' is not a hex digit", c);
            return 0;
        }
        v = v * 16 + d;
    }
    if (v > 0x10FFFF)
        fail_at(ps, at, "code point 0x%X is beyond Unicode", v);
    return v;
}

/* One character of a literal or class, escapes decoded. */
static uint32_t read_char(parser *ps)
{
    if (*ps->p != '\\')
        return read_utf8(ps);
    const char *at = ps->p++;
    if (ps->p >= ps->end) {
        fail_at(ps, at, "escape at the end of the text");
        return 0;
    }
    char c = *ps->p++;
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return (uint32_t)c;
    case 'x': return read_hex(ps, 2);
    case 'u': return read_hex(ps, 4);
    case 'U': return read_hex(ps, 8);
    default: fail_at(ps, at, "unknown escape '\\%c'", c); return 0;
    }
}

static uint32_t read_uint(parser *ps)
{
    const char *at = ps->p;
    uint32_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (uint32_t)(*ps->p++ - '0');
        if (v > GBNF_MAX_REPEAT) {
            fail_at(ps, at, "repetition count above %u", GBNF_MAX_REPEAT);
            return 0;
        }
    }
    return v;
}

static void parse_alternates(parser *ps, uint32_t rule, bool nested);

/* One item (with its postfix) appended to rule's alternative alt. */
static void parse_item(parser *ps, uint32_t rule, uint32_t alt)
{
    uint32_t buf[64];
    uint32_t n = 0, *items = buf; /* the item's elements, a literal's characters */
    uint32_t helper = UINT32_MAX;
    const char *at = ps->p;
    char c = *ps->p;
    if (c == '"') {
        ps->p++;
        /* A literal longer than buf goes into a helper rule as it is read. */
        helper = gb_helper_rule(&ps->b, rule);
        uint32_t ha = gb_alt(&ps->b, helper);
        while (!ps->failed && ps->p < ps->end && *ps->p != '"') {
            if (*ps->p == '\n') {
                fail_at(ps, ps->p, "newline inside a literal (write \\n)");
                return;
            }
            gb_push(&ps->b, helper, ha, gb_char(&ps->b, read_char(ps)));
        }
        if (ps->p >= ps->end) {
            fail_at(ps, at, "unterminated literal");
            return;
        }
        ps->p++;
        const gb_seq *seq = &ps->b.rules[helper].alts[ha];
        if (seq->n <= sizeof buf / sizeof buf[0]) { /* inline a short literal; the helper stays unused */
            if (seq->n)
                memcpy(buf, seq->e, seq->n * sizeof *buf);
            n = seq->n;
            helper = UINT32_MAX;
        } else {
            buf[0] = GE_REF | helper;
            n = 1;
        }
    } else if (c == '[') {
        ps->p++;
        bool negated = false;
        if (ps->p < ps->end && *ps->p == '^') {
            negated = true;
            ps->p++;
        }
        grange ranges[256];
        uint32_t nr = 0;
        while (!ps->failed && ps->p < ps->end && *ps->p != ']') {
            if (nr == 256) {
                fail_at(ps, at, "more than 256 ranges in one class");
                return;
            }
            uint32_t lo = read_char(ps), hi = lo;
            if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                ps->p++;
                const char *hat = ps->p;
                hi = read_char(ps);
                if (hi < lo) {
                    fail_at(ps, hat, "range end below its start");
                    return;
                }
            }
            ranges[nr++] = (grange){lo, hi};
        }
        if (ps->p >= ps->end) {
            fail_at(ps, at, "unterminated character class");
            return;
        }
        ps->p++;
        buf[n++] = gb_class(&ps->b, ranges, nr, negated);
    } else if (c == '.') {
        ps->p++;
        buf[n++] = gb_class(&ps->b, NULL, 0, true);
    } else if (c == '(') {
        if (ps->depth == GBNF_MAX_NESTING) {
            fail_at(ps, at, "groups nested more than %u deep", GBNF_MAX_NESTING);
            return;
        }
        ps->p++;
        uint32_t g = gb_helper_rule(&ps->b, rule);
        ps->depth++;
        parse_alternates(ps, g, true);
        ps->depth--;
        if (ps->failed)
            return;
        if (ps->p >= ps->end || *ps->p != ')') {
            fail_at(ps, at, "unclosed '('");
            return;
        }
        ps->p++;
        buf[n++] = GE_REF | g;
    } else if (is_name_char(c)) {
        const char *name = ps->p;
        while (ps->p < ps->end && is_name_char(*ps->p))
            ps->p++;
        /* the offset stands for the line: it is turned into line and column only for a message */
        buf[n++] = GE_REF | gb_named_rule(&ps->b, name, (size_t)(ps->p - name), (uint32_t)(name - ps->s), 0);
    } else {
        fail_at(ps, at, "unexpected '%c'", c);
        return;
    }
    if (ps->failed)
        return;

    uint32_t min = 1, max = 1;
    const char *op = ps->p;
    if (ps->p < ps->end) {
        switch (*ps->p) {
        case '*': min = 0, max = UINT32_MAX, ps->p++; break;
        case '+': min = 1, max = UINT32_MAX, ps->p++; break;
        case '?': min = 0, max = 1, ps->p++; break;
        case '{':
            ps->p++;
            skip_space(ps);
            min = read_uint(ps);
            skip_space(ps);
            max = min;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_space(ps);
                max = ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' ? read_uint(ps) : UINT32_MAX;
                skip_space(ps);
            }
            if (ps->failed)
                return;
            if (ps->p >= ps->end || *ps->p != '}') {
                fail_at(ps, op, "expected '}' to close the repetition");
                return;
            }
            ps->p++;
            if (max < min) {
                fail_at(ps, op, "repetition maximum %u below its minimum %u", max, min);
                return;
            }
            break;
        default: break;
        }
    }
    if (min == 1 && max == 1) {
        for (uint32_t i = 0; i < n; i++)
            gb_push(&ps->b, rule, alt, items[i]);
        return;
    }
    uint32_t x = items[0];
    if (n != 1) { /* a repeated literal of several characters becomes one rule */
        uint32_t h = gb_helper_rule(&ps->b, rule);
        uint32_t ha = gb_alt(&ps->b, h);
        for (uint32_t i = 0; i < n; i++)
            gb_push(&ps->b, h, ha, items[i]);
        x = GE_REF | h;
    }
    if (n == 0) {
        fail_at(ps, op, "repetition of an empty literal");
        return;
    }
    gb_repeat(&ps->b, rule, alt, x, min, max);
}

static void parse_alternates(parser *ps, uint32_t rule, bool nested)
{
    for (;;) {
        uint32_t alt = gb_alt(&ps->b, rule);
        for (;;) {
            skip_space(ps);
            if (ps->failed || ps->p >= ps->end || *ps->p == '|' || *ps->p == ')')
                break;
            if (!nested && at_definition(ps))
                break;
            parse_item(ps, rule, alt);
        }
        if (ps->failed || ps->p >= ps->end || *ps->p != '|')
            return;
        ps->p++;
    }
}

woolly_grammar *woolly_grammar_from_gbnf(const char *text, size_t len, woolly_error *err)
{
    parser ps = {.s = text, .end = text + len, .p = text, .err = err};
    gb_init(&ps.b);
    skip_space(&ps);
    if (ps.p >= ps.end)
        fail_at(&ps, ps.p, "empty grammar (expected `root ::= ...`)");
    while (!ps.failed && ps.p < ps.end) {
        const char *name = ps.p;
        while (ps.p < ps.end && is_name_char(*ps.p))
            ps.p++;
        if (ps.p == name) {
            fail_at(&ps, name, "expected a rule name, found '%c'", *name);
            break;
        }
        size_t nlen = (size_t)(ps.p - name);
        skip_space(&ps);
        if (ps.end - ps.p < 3 || memcmp(ps.p, "::=", 3)) {
            fail_at(&ps, ps.p, "expected '::=' after rule name '%.*s'", (int)nlen, name);
            break;
        }
        ps.p += 3;
        uint32_t r = gb_named_rule(&ps.b, name, nlen, (uint32_t)(name - text), 0);
        if (r == UINT32_MAX)
            break;
        if (ps.b.rules[r].defined) {
            fail_at(&ps, name, "rule '%.*s' is defined twice", (int)nlen, name);
            break;
        }
        ps.b.rules[r].defined = true;
        parse_alternates(&ps, r, false);
        if (!ps.failed && ps.p < ps.end && *ps.p == ')')
            fail_at(&ps, ps.p, "')' without a matching '('");
        skip_space(&ps);
    }
    for (uint32_t r = 0; !ps.failed && r < ps.b.n_rules; r++)
        if (!ps.b.rules[r].defined)
            fail_at(&ps, text + ps.b.rules[r].line, "rule '%s' is used but never defined", ps.b.rules[r].name);
    if (ps.failed) {
        gb_free(&ps.b);
        return NULL;
    }
    return gb_finish(&ps.b, "root", err);
}
