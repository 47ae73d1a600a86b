/* JSON in and out of the interpreter: the render context arrives as JSON text (so the server can hand
 * over the request's messages as they are), and `tojson` writes values as Python's json.dumps does with
 * the arguments Hugging Face's tojson passes (ensure_ascii=False), since templates print tool
 * definitions with it and the model was trained on that exact text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

enum { JSON_MAX_DEPTH = 64 };

typedef struct jp {
    jarena *a;
    const char *p;
    int depth;
} jp;

static _Noreturn void bad(jp *j, const char *what)
{
    jthrow(j->a->err, 0, "the render context is not valid JSON: %s", what);
}

static void ws(jp *j)
{
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
        j->p++;
}

static int hex4(jp *j)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            bad(j, "a bad \\u escape");
    }
    return v;
}

static void put_utf8(jbuf *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    jbuf_put(b, u, n);
}

static jv string(jp *j)
{
    jbuf b = {.a = j->a};
    j->p++;
    for (;;) {
        const char c = *j->p++;
        if (c == '"')
            break;
        if (!c || (unsigned char)c < 0x20)
            bad(j, "an unterminated string");
        if (c != '\\') {
            jbuf_putc(&b, c);
            continue;
        }
        const char e = *j->p++;
        switch (e) {
        case '"':
            jbuf_putc(&b, '"');
            break;
        case '\\':
            jbuf_putc(&b, '\\');
            break;
        case '/':
            jbuf_putc(&b, '/');
            break;
        case 'b':
            jbuf_putc(&b, '\b');
            break;
        case 'f':
            jbuf_putc(&b, '\f');
            break;
        case 'n':
            jbuf_putc(&b, '\n');
            break;
        case 'r':
            jbuf_putc(&b, '\r');
            break;
        case 't':
            jbuf_putc(&b, '\t');
            break;
        case 'u': {
            unsigned cp = (unsigned)hex4(j);
            if (cp >= 0xd800 && cp < 0xdc00 && j->p[0] == '\\' && j->p[1] == 'u') {
                j->p += 2;
                const unsigned lo = (unsigned)hex4(j);
                cp = lo >= 0xdc00 && lo < 0xe000 ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00) : 0xfffd;
            }
            put_utf8(&b, cp);
            break;
        }
        default:
            bad(j, "a bad escape");
        }
    }
    return jv_str(j->a, b.p ? b.p : "", b.len);
}

static jv value(jp *j)
{
    if (++j->depth > JSON_MAX_DEPTH)
        bad(j, "nested too deep");
    ws(j);
    jv v;
    if (*j->p == '{') {
        v = jv_dict(j->a);
        j->p++;
        ws(j);
        if (*j->p == '}')
            j->p++;
        else
            for (;;) {
                ws(j);
                if (*j->p != '"')
                    bad(j, "an object key that is not a string");
                const jv k = string(j);
                ws(j);
                if (*j->p++ != ':')
                    bad(j, "a missing ':'");
                jdict_set(j->a, v.d, k, value(j));
                ws(j);
                if (*j->p == ',') {
                    j->p++;
                    continue;
                }
                if (*j->p++ != '}')
                    bad(j, "a missing '}'");
                break;
            }
    } else if (*j->p == '[') {
        v = jv_list(j->a);
        j->p++;
        ws(j);
        if (*j->p == ']')
            j->p++;
        else
            for (;;) {
                jlist_push(j->a, v.l, value(j));
                ws(j);
                if (*j->p == ',') {
                    j->p++;
                    continue;
                }
                if (*j->p++ != ']')
                    bad(j, "a missing ']'");
                break;
            }
    } else if (*j->p == '"') {
        v = string(j);
    } else if (!strncmp(j->p, "true", 4)) {
        j->p += 4;
        v = jv_bool(true);
    } else if (!strncmp(j->p, "false", 5)) {
        j->p += 5;
        v = jv_bool(false);
    } else if (!strncmp(j->p, "null", 4)) {
        j->p += 4;
        v = jv_none();
    } else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
        const char *s = j->p;
        char *end;
        const size_t n = strspn(s, "-+0123456789");
        if (s[n] == '.' || s[n] == 'e' || s[n] == 'E') {
            v = jv_float(strtod(s, &end));
        } else {
            v = jv_int(strtoll(s, &end, 10));
        }
        if (end == s)
            bad(j, "a bad number");
        j->p = end;
    } else {
        bad(j, "an unexpected character");
    }
    j->depth--;
    return v;
}

jv jjson_parse(jarena *a, const char *text)
{
    jp j = {a, text ? text : "{}", 0};
    const jv v = value(&j);
    ws(&j);
    if (*j.p)
        bad(&j, "text after the value");
    return v;
}

static void json_str(jbuf *b, const char *p, size_t n)
{
    jbuf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        char esc[8];
        switch (c) {
        case '"':
            jbuf_puts(b, "\\\"");
            break;
        case '\\':
            jbuf_puts(b, "\\\\");
            break;
        case '\n':
            jbuf_puts(b, "\\n");
            break;
        case '\r':
            jbuf_puts(b, "\\r");
            break;
        case '\t':
            jbuf_puts(b, "\\t");
            break;
        case '\b':
            jbuf_puts(b, "\\b");
            break;
        case '\f':
            jbuf_puts(b, "\\f");
            break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                jbuf_puts(b, esc);
            } else {
                jbuf_putc(b, (char)c);
            }
        }
    }
    jbuf_putc(b, '"');
}

static void newline(jbuf *b, int indent, int level)
{
    jbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++)
        jbuf_putc(b, ' ');
}

/* Python's sort of string keys (code point order equals UTF-8 byte order). */
static int key_cmp(const void *x, const void *y)
{
    const jv *a = *(const jv *const *)x, *b = *(const jv *const *)y;
    if (a->t != JV_STR || b->t != JV_STR)
        return a->t - b->t;
    const size_t n = a->s->len < b->s->len ? a->s->len : b->s->len;
    const int c = memcmp(a->s->p, b->s->p, n);
    return c ? c : (a->s->len > b->s->len) - (a->s->len < b->s->len);
}

void jv_write_json(jerr *e, jbuf *b, jv v, int indent, bool sort_keys, int depth)
{
    if (depth > JSON_MAX_DEPTH)
        jthrow(e, 0, "tojson: the value is nested too deep");
    char num[64];
    switch (v.t) {
    case JV_UNDEF: /* json.dumps refuses Jinja2's Undefined */
        jthrow(e, 0, "tojson: an undefined value is not JSON serializable");
    case JV_NONE:
        jbuf_puts(b, "null");
        break;
    case JV_BOOL:
        jbuf_puts(b, v.b ? "true" : "false");
        break;
    case JV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.i);
        jbuf_puts(b, num);
        break;
    case JV_FLOAT:
        jfmt_float(num, sizeof num, v.f);
        jbuf_puts(b, !strcmp(num, "nan")    ? "NaN"
                     : !strcmp(num, "inf")  ? "Infinity"
                     : !strcmp(num, "-inf") ? "-Infinity"
                                            : num);
        break;
    case JV_STR:
        json_str(b, v.s->p, v.s->len);
        break;
    case JV_LIST:
        if (v.l->generator)
            jthrow(e, 0,
                   "tojson: a generator (the result of map, select, ...) is not JSON serializable: add "
                   "|list");
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                newline(b, indent, depth + 1);
            jv_write_json(e, b, v.l->v[i], indent, sort_keys, depth + 1);
        }
        if (indent >= 0 && v.l->n)
            newline(b, indent, depth);
        jbuf_putc(b, ']');
        break;
    case JV_DICT: {
        jbuf_putc(b, '{');
        const size_t n = v.d->n;
        jv **keys = jalloc(b->a, (n ? n : 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++)
            keys[i] = &v.d->k[i];
        if (sort_keys)
            qsort(keys, n, sizeof *keys, key_cmp);
        for (size_t i = 0; i < n; i++) {
            if (i)
                jbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                newline(b, indent, depth + 1);
            const jv k = *keys[i];
            if (k.t == JV_STR) {
                json_str(b, k.s->p, k.s->len);
            } else { /* Python converts int, float, bool and None keys to their JSON text in quotes */
                jbuf kb = {.a = b->a};
                jv_write_json(e, &kb, k, -1, false, depth + 1);
                json_str(b, kb.p ? kb.p : "", kb.len);
            }
            jbuf_puts(b, ": ");
            jv_write_json(e, b, v.d->v[keys[i] - v.d->k], indent, sort_keys, depth + 1);
        }
        if (indent >= 0 && n)
            newline(b, indent, depth);
        jbuf_putc(b, '}');
        break;
    }
    default:
        jthrow(e, 0, "tojson: a %s is not JSON serializable", jv_type_name(v));
    }
}
