/* Values of the Jinja interpreter: the arena they live in, strings, lists, dicts, and Python's
 * semantics for truth, equality, order and str()/repr(), which the templates' output depends on. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

void jthrow(jerr *e, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(e->msg, sizeof e->msg, "line %d: %s", line, msg);
    else
        snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jb, 1);
}

struct jblock {
    jblock *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void *jalloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > JINJA_MAX_MEMORY || a->total + n > JINJA_MAX_MEMORY)
        jthrow(a->err, 0, "the template needs more than %ld MiB of memory", JINJA_MAX_MEMORY >> 20);
    jblock *b = a->head;
    if (!b || b->cap - b->used < n) {
        const size_t cap = n > 65536 - sizeof *b ? n : 65536 - sizeof *b;
        if (!(b = malloc(sizeof *b + cap)))
            jthrow(a->err, 0, "out of memory");
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
        a->total += cap;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(jarena *a)
{
    for (jblock *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->total = 0;
}

jstr *jstr_new(jarena *a, const char *p, size_t len)
{
    jstr *s = jalloc(a, sizeof *s + len + 1);
    s->len = len;
    if (len && p) /* p NULL: the caller fills it */
        memcpy(s->p, p, len);
    return s;
}

jv jv_str(jarena *a, const char *p, size_t len)
{
    return (jv){.t = JV_STR, .s = jstr_new(a, p, len)};
}
jv jv_cstr(jarena *a, const char *s)
{
    return jv_str(a, s, strlen(s));
}
jv jv_list(jarena *a)
{
    return (jv){.t = JV_LIST, .l = jalloc(a, sizeof(jlist))};
}
jv jv_dict(jarena *a)
{
    return (jv){.t = JV_DICT, .d = jalloc(a, sizeof(jdict))};
}

void jlist_push(jarena *a, jlist *l, jv v)
{
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 4;
        jv *nv = jalloc(a, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jv *jdict_find(const jdict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k))
            return &d->v[i];
    return NULL;
}

jv jdict_get_c(const jdict *d, const char *key)
{
    const size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s->len == n && !memcmp(d->k[i].s->p, key, n))
            return d->v[i];
    return jv_undef();
}

void jdict_set(jarena *a, jdict *d, jv k, jv v)
{
    jv *slot = jdict_find(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        const size_t cap = d->cap ? 2 * d->cap : 4;
        jv *nk = jalloc(a, cap * sizeof *nk), *nv = jalloc(a, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

bool jv_truthy(jv v)
{
    switch (v.t) {
    case JV_BOOL:
        return v.b;
    case JV_INT:
        return v.i != 0;
    case JV_FLOAT:
        return v.f != 0;
    case JV_STR:
        return v.s->len > 0;
    case JV_LIST:
        return v.l->n > 0 || v.l->generator;
    case JV_DICT:
        return v.d->n > 0;
    case JV_FUNC:
    case JV_LOOP:
        return true;
    default:
        return false;
    }
}

static bool is_num(jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static double num(jv v)
{
    return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : (double)v.b;
}

bool jv_equal(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return num(a) == num(b) && (a.t == JV_BOOL ? a.b : a.i) == (b.t == JV_BOOL ? b.b : b.i);
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.s->len == b.s->len && !memcmp(a.s->p, b.s->p, a.s->len);
    case JV_LIST:
        if (a.l->generator || b.l->generator) /* a generator equals only itself */
            return a.l == b.l;
        if (a.l->n != b.l->n)
            return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal(a.l->v[i], b.l->v[i]))
                return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n)
            return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jv *o = jdict_find(b.d, a.d->k[i]);
            if (!o || !jv_equal(a.d->v[i], *o))
                return false;
        }
        return true;
    case JV_FUNC:
        return a.fn == b.fn;
    case JV_LOOP:
        return a.loop == b.loop;
    default:
        return false;
    }
}

int jv_compare(jerr *e, int line, jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        const double x = num(a), y = num(b);
        if (a.t == JV_INT && b.t == JV_INT)
            return a.i < b.i ? -1 : a.i > b.i;
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        const size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        const int c = memcmp(a.s->p, b.s->p, n);
        return c ? c : a.s->len < b.s->len ? -1 : a.s->len > b.s->len;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            const int c = jv_compare(e, line, a.l->v[i], b.l->v[i]);
            if (c)
                return c;
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    jthrow(e, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

const jlist *jv_items(jarena *a, jv v)
{
    switch (v.t) {
    case JV_LIST:
        if (v.l->generator) { /* a generator iterates once */
            if (v.l->consumed)
                return jv_list(a).l;
            v.l->consumed = true;
        }
        return v.l;
    case JV_DICT: {
        jlist *l = jv_list(a).l;
        for (size_t i = 0; i < v.d->n; i++)
            jlist_push(a, l, v.d->k[i]);
        return l;
    }
    case JV_STR: {
        jlist *l = jv_list(a).l;
        for (size_t i = 0; i < v.s->len;) {
            size_t e = i + 1;
            while (e < v.s->len && ((unsigned char)v.s->p[e] & 0xc0) == 0x80)
                e++;
            jlist_push(a, l, jv_str(a, v.s->p + i, e - i));
            i = e;
        }
        return l;
    }
    case JV_UNDEF:
    case JV_NONE:
        return jv_list(a).l;
    default:
        return NULL;
    }
}

const char *jv_type_name(jv v)
{
    static const char *const names[] = {"undefined", "none", "boolean", "integer",  "float",
                                        "string",    "list", "dict",    "function", "loop"};
    return jv_is_generator(v) ? "generator" : names[v.t];
}

/* ---- text ---- */

void jbuf_put(jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    if (b->limit && b->len + n > b->limit)
        jthrow(b->a->err, 0, "the rendered text exceeds %zu bytes", b->limit);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = jalloc(b->a, cap);
        if (b->len)
            memcpy(p, b->p, b->len);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jbuf_puts(jbuf *b, const char *s)
{
    jbuf_put(b, s, strlen(s));
}
void jbuf_putc(jbuf *b, char c)
{
    jbuf_put(b, &c, 1);
}

/* Python's repr() of a float: the shortest text that reads back the same, with ".0" for integers. */
void jfmt_float(char *out, size_t cap, double f)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == floor(f) && fabs(f) < 1e16) {
        snprintf(out, cap, "%.1f", f);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, f);
        if (strtod(out, NULL) == f)
            break;
    }
    /* Python writes exponents with at least two digits, as C does, but never a leading zero run
     * beyond that: "1e-05" in both. */
}

static void write_repr_str(jbuf *b, const jstr *s)
{
    const bool dq = memchr(s->p, '\'', s->len) && !memchr(s->p, '"', s->len);
    const char q = dq ? '"' : '\'';
    jbuf_putc(b, q);
    for (size_t i = 0; i < s->len; i++) {
        const unsigned char c = (unsigned char)s->p[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)q) {
            jbuf_putc(b, '\\');
            jbuf_putc(b, (char)c);
        } else if (c == '\n') {
            jbuf_puts(b, "\\n");
        } else if (c == '\r') {
            jbuf_puts(b, "\\r");
        } else if (c == '\t') {
            jbuf_puts(b, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            jbuf_puts(b, esc);
        } else {
            jbuf_putc(b, (char)c);
        }
    }
    jbuf_putc(b, q);
}

static void write_value(jbuf *b, jv v, bool repr)
{
    char num[64];
    switch (v.t) {
    case JV_UNDEF:
        break;
    case JV_NONE:
        jbuf_puts(b, "None");
        break;
    case JV_BOOL:
        jbuf_puts(b, v.b ? "True" : "False");
        break;
    case JV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.i);
        jbuf_puts(b, num);
        break;
    case JV_FLOAT:
        jfmt_float(num, sizeof num, v.f);
        jbuf_puts(b, num);
        break;
    case JV_STR:
        if (repr)
            write_repr_str(b, v.s);
        else
            jbuf_put(b, v.s->p, v.s->len);
        break;
    case JV_LIST:
        if (v.l->generator) /* Jinja2 prints "<generator object ... at 0x...>": no text to match */
            jthrow(b->a->err, 0,
                   "cannot print a generator (the result of map, select, reject, "
                   "selectattr, rejectattr, unique, items or reverse): add |list");
        jbuf_putc(b, v.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jbuf_puts(b, ", ");
            write_value(b, v.l->v[i], true);
        }
        jbuf_puts(b, !v.l->tuple ? "]" : v.l->n == 1 ? ",)" : ")");
        break;
    case JV_DICT:
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i)
                jbuf_puts(b, ", ");
            write_value(b, v.d->k[i], true);
            jbuf_puts(b, ": ");
            write_value(b, v.d->v[i], true);
        }
        jbuf_putc(b, '}');
        break;
    case JV_FUNC:
        jbuf_puts(b, "<function>");
        break;
    case JV_LOOP:
        jbuf_puts(b, "<loop>");
        break;
    }
}

void jv_write_str(jbuf *b, jv v)
{
    write_value(b, v, false);
}
void jv_write_repr(jbuf *b, jv v)
{
    write_value(b, v, true);
}

jstr *jv_to_str(jarena *a, jv v)
{
    if (v.t == JV_STR)
        return v.s;
    jbuf b = {.a = a, .limit = JINJA_MAX_OUTPUT};
    jv_write_str(&b, v);
    return jstr_new(a, b.p ? b.p : "", b.len);
}

jstr *jhtml_escape(jarena *a, const jstr *s)
{
    jbuf b = {.a = a, .limit = JINJA_MAX_OUTPUT};
    for (size_t i = 0; i < s->len; i++) {
        switch (s->p[i]) {
        case '&':
            jbuf_puts(&b, "&amp;");
            break;
        case '<':
            jbuf_puts(&b, "&lt;");
            break;
        case '>':
            jbuf_puts(&b, "&gt;");
            break;
        case '\'':
            jbuf_puts(&b, "&#39;");
            break;
        case '"':
            jbuf_puts(&b, "&#34;");
            break;
        default:
            jbuf_putc(&b, s->p[i]);
        }
    }
    return jstr_new(a, b.p ? b.p : "", b.len);
}

/* ---- UTF-8 ---- */

size_t jutf8_len(const char *p, size_t n)
{
    size_t cps = 0;
    for (size_t i = 0; i < n; i++)
        cps += ((unsigned char)p[i] & 0xc0) != 0x80;
    return cps;
}

size_t jutf8_offset(const char *p, size_t n, size_t cp)
{
    size_t i = 0;
    for (size_t k = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xc0) != 0x80 && k++ == cp)
            return i;
    return n;
}
