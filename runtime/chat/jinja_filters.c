/* Jinja's filters and tests, those chat templates use, with Jinja2's behaviour (and Hugging Face's
 * tojson). An unknown filter or test is an error naming it. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

static bool eq(const char *a, const char *b)
{
    return !strcmp(a, b);
}

static jstr *want_str(jstate *s, int line, const char *what, jv v)
{
    if (v.t == JV_STR)
        return v.s;
    if (v.t == JV_UNDEF)
        return jstr_new(s->a, "", 0);
    (void)line;
    (void)what;
    return jv_to_str(s->a, v);
}

static const jlist *want_seq(jstate *s, int line, const char *what, jv v)
{
    const jlist *l = jv_items(s->a, v); /* a dict as a sequence is its keys */
    if (!l)
        jthrow(s->err, line, "%s: a %s is not a sequence", what, jv_type_name(v));
    return l;
}

/* The attribute `attr` of an item, with dotted paths ("function.name") as Jinja2 resolves them. */
static jv item_attr(jstate *s, jv item, jv attr)
{
    if (attr.t != JV_STR)
        return jattr(s, item, attr);
    const char *p = attr.s->p;
    for (;;) {
        const char *dot = strchr(p, '.');
        const size_t n = dot ? (size_t)(dot - p) : strlen(p);
        jv key = jv_str(s->a, p, n);
        if (n && isdigit((unsigned char)p[0]) && item.t == JV_LIST)
            key = jv_int(strtoll(key.s->p, NULL, 10));
        item = jattr(s, item, key);
        if (!dot)
            return item;
        p = dot + 1;
    }
}

static jv strip(jstate *s, jv v, const jargs *a, bool left, bool right)
{
    const jstr *str = want_str(s, 0, "trim", v);
    const jv chars = jargs_get(a, 0, "chars", jv_none());
    const char *set = chars.t == JV_STR ? chars.s->p : " \t\n\r\v\f";
    size_t b = 0, e = str->len;
    while (left && b < e && strchr(set, str->p[b]) && str->p[b])
        b++;
    while (right && e > b && strchr(set, str->p[e - 1]) && str->p[e - 1])
        e--;
    return jv_str(s->a, str->p + b, e - b);
}

static jv change_case(jstate *s, jv v, int mode) /* 0 upper, 1 lower, 2 title, 3 capitalize */
{
    const jstr *str = want_str(s, 0, "case", v);
    jstr *out = jstr_new(s->a, str->p, str->len);
    bool word_start = true;
    for (size_t i = 0; i < out->len; i++) {
        const unsigned char c = (unsigned char)out->p[i];
        char r = (char)c;
        if (mode == 0)
            r = (char)toupper(c);
        else if (mode == 1)
            r = (char)tolower(c);
        else if (mode == 2)
            r = (char)(word_start ? toupper(c) : tolower(c));
        else
            r = (char)(i == 0 ? toupper(c) : tolower(c));
        out->p[i] = r;
        word_start = !isalnum(c) && c < 0x80 && c != '\'';
    }
    return (jv){.t = JV_STR, .s = out};
}

jv jstr_replace(jstate *s, const jstr *str, const jstr *old, const jstr *new_, int64_t count);
jv jstr_replace(jstate *s, const jstr *str, const jstr *old, const jstr *new_, int64_t count)
{
    jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
    size_t i = 0;
    int64_t done = 0;
    if (!old->len) { /* Python inserts the replacement between all characters */
        for (; i <= str->len; i++) {
            if (count < 0 || done < count) {
                jbuf_put(&b, new_->p, new_->len);
                done++;
            }
            if (i < str->len)
                jbuf_putc(&b, str->p[i]);
        }
        return jv_str(s->a, b.p ? b.p : "", b.len);
    }
    while (i < str->len) {
        if ((count < 0 || done < count) && i + old->len <= str->len &&
            !memcmp(str->p + i, old->p, old->len)) {
            jbuf_put(&b, new_->p, new_->len);
            i += old->len;
            done++;
        } else {
            jbuf_putc(&b, str->p[i++]);
        }
    }
    return jv_str(s->a, b.p ? b.p : "", b.len);
}

typedef struct sort_ctx {
    jstate *s;
    int line;
    jv attr;
    bool by_value, reverse, icase;
    jv missing; /* groupby's default: the key of an item without the attribute (JV_UNDEF: none) */
} sort_ctx;

/* The item's attribute that sorts it, before case folding. */
static jv sort_attr(const sort_ctx *c, jv v)
{
    if (c->attr.t != JV_UNDEF && c->attr.t != JV_NONE)
        v = item_attr(c->s, v, c->attr);
    return v.t == JV_UNDEF && c->missing.t != JV_UNDEF && c->missing.t != JV_NONE ? c->missing : v;
}

static jv sort_key(const sort_ctx *c, jv v)
{
    v = sort_attr(c, v);
    if (c->icase && v.t == JV_STR)
        v = change_case(c->s, v, 1);
    return v;
}

static int sort_cmp(const sort_ctx *c, const jv *x, const jv *y)
{
    const int r = jv_compare(c->s->err, c->line, sort_key(c, *x), sort_key(c, *y));
    return c->reverse ? -r : r;
}

/* Python's sort is stable, qsort is not: a binary insertion sort (the lists of a chat template are
 * short), its moves counted as steps so that a huge list cannot stall a render. */
static void stable_sort(sort_ctx *c, jv *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        const jv x = v[i];
        size_t lo = 0, hi = i;
        while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (sort_cmp(c, &x, &v[mid]) < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        memmove(&v[lo + 1], &v[lo], (i - lo) * sizeof *v);
        v[lo] = x;
        c->s->steps += (long)(i - lo) / 64 + 1;
        if (c->s->steps > JINJA_MAX_STEPS)
            jthrow(c->s->err, c->line, "the template runs longer than %ld steps", JINJA_MAX_STEPS);
    }
}

static jv copy_list(jstate *s, const jlist *l)
{
    jv out = jv_list(s->a);
    for (size_t i = 0; i < l->n; i++)
        jlist_push(s->a, out.l, l->v[i]);
    return out;
}

/* select/reject/selectattr/rejectattr: keep the items whose test (default: truthiness) passes. */
static jv select_items(jstate *s, int line, jv in, const jargs *a, bool attr, bool keep)
{
    const jlist *l = want_seq(s, line, "select", in);
    const size_t first = attr ? 1 : 0;
    const jv attr_name = attr ? jargs_get(a, 0, NULL, jv_undef()) : jv_undef();
    const jv test = jargs_get(a, first, NULL, jv_undef());
    jargs rest = *a;
    rest.pos = a->n_pos > first + 1 ? a->pos + first + 1 : NULL;
    rest.n_pos = a->n_pos > first + 1 ? a->n_pos - first - 1 : 0;
    jv out = jv_list(s->a);
    for (size_t i = 0; i < l->n; i++) {
        const jv v = attr ? item_attr(s, l->v[i], attr_name) : l->v[i];
        bool pass;
        if (test.t == JV_STR)
            pass = jtest(s, line, test.s->p, v, &rest);
        else
            pass = jv_truthy(v);
        if (pass == keep)
            jlist_push(s->a, out.l, l->v[i]);
    }
    out.l->generator = true;
    return out;
}

static jv indent(jstate *s, jv in, const jargs *a)
{
    const jstr *str = want_str(s, 0, "indent", in);
    const jv w = jargs_get(a, 0, "width", jv_int(4));
    const bool first = jv_truthy(jargs_get(a, 1, "first", jv_bool(false)));
    const bool blank = jv_truthy(jargs_get(a, 2, "blank", jv_bool(false)));
    jbuf pad = {.a = s->a};
    if (w.t == JV_STR)
        jbuf_put(&pad, w.s->p, w.s->len);
    else
        for (int64_t i = 0; i < (w.t == JV_INT ? w.i : 4) && i < 256; i++)
            jbuf_putc(&pad, ' ');
    jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
    if (first)
        jbuf_put(&b, pad.p, pad.len);
    for (size_t i = 0; i < str->len; i++) {
        jbuf_putc(&b, str->p[i]);
        if (str->p[i] == '\n' && i + 1 < str->len && (blank || str->p[i + 1] != '\n'))
            jbuf_put(&b, pad.p, pad.len);
    }
    return jv_str(s->a, b.p ? b.p : "", b.len);
}

static jv tojson(jstate *s, jv in, const jargs *a)
{
    const jv ind = jargs_get(a, 0, "indent", jv_none());
    const bool sort_keys = jv_truthy(jargs_get(a, 99, "sort_keys", jv_bool(false)));
    jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
    jv_write_json(s->err, &b, in, ind.t == JV_INT ? (int)(ind.i > 64 ? 64 : ind.i) : -1, sort_keys, 0);
    return jv_str(s->a, b.p ? b.p : "", b.len);
}

static jv to_int(jstate *s, jv in, const jargs *a)
{
    const jv def = jargs_get(a, 0, "default", jv_int(0));
    switch (in.t) {
    case JV_INT:
        return in;
    case JV_BOOL:
        return jv_int(in.b);
    case JV_FLOAT:
        return isfinite(in.f) && fabs(in.f) < 9.2e18 ? jv_int((int64_t)in.f) : def;
    case JV_STR: {
        char *end;
        const long long v = strtoll(in.s->p, &end, 10);
        if (end != in.s->p && !*end)
            return jv_int(v);
        const double d = strtod(in.s->p, &end);
        return end != in.s->p && !*end && fabs(d) < 9.2e18 ? jv_int((int64_t)d) : def;
    }
    default:
        (void)s;
        return def;
    }
}

static jv to_float(jv in, const jargs *a)
{
    const jv def = jargs_get(a, 0, "default", jv_float(0));
    switch (in.t) {
    case JV_INT:
        return jv_float((double)in.i);
    case JV_BOOL:
        return jv_float(in.b);
    case JV_FLOAT:
        return in;
    case JV_STR: {
        char *end;
        const double d = strtod(in.s->p, &end);
        return end != in.s->p && !*end ? jv_float(d) : def;
    }
    default:
        return def;
    }
}

static jv round_filter(jstate *s, int line, jv in, const jargs *a)
{
    if (in.t != JV_INT && in.t != JV_FLOAT && in.t != JV_BOOL)
        jthrow(s->err, line, "round: a %s is not a number", jv_type_name(in));
    const double x = in.t == JV_FLOAT ? in.f : in.t == JV_INT ? (double)in.i : in.b;
    const jv pv = jargs_get(a, 0, "precision", jv_int(0));
    const jv mv = jargs_get(a, 1, "method", jv_undef());
    const int p = pv.t == JV_INT ? (int)(pv.i > 15 ? 15 : pv.i < -15 ? -15 : pv.i) : 0;
    const double k = pow(10, p);
    const char *method = mv.t == JV_STR ? mv.s->p : "common";
    double r;
    if (eq(method, "floor"))
        r = floor(x * k) / k;
    else if (eq(method, "ceil"))
        r = ceil(x * k) / k;
    else /* Python's round(): halves to even */
        r = rint(x * k) / k;
    return jv_float(r);
}

jv jfilter(jstate *s, int line, const char *name, jv in, const jargs *a)
{
    if (eq(name, "length") || eq(name, "count")) {
        if (jv_is_generator(in))
            jthrow(s->err, line, "%s: a generator (the result of map, select, ...) has no length: add |list",
                   name);
        switch (in.t) {
        case JV_STR:
            return jv_int((int64_t)jutf8_len(in.s->p, in.s->len));
        case JV_LIST:
            return jv_int((int64_t)in.l->n);
        case JV_DICT:
            return jv_int((int64_t)in.d->n);
        case JV_UNDEF:
            return jv_int(0);
        default:
            jthrow(s->err, line, "length: a %s has no length", jv_type_name(in));
        }
    }
    if (eq(name, "trim"))
        return strip(s, in, a, true, true);
    if (eq(name, "upper"))
        return change_case(s, in, 0);
    if (eq(name, "lower"))
        return change_case(s, in, 1);
    if (eq(name, "title"))
        return change_case(s, in, 2);
    if (eq(name, "capitalize"))
        return change_case(s, in, 3);
    if (eq(name, "tojson"))
        return tojson(s, in, a);
    if (eq(name, "string"))
        return (jv){.t = JV_STR, .s = jv_to_str(s->a, in)};
    /* without autoescape, output is never escaped, but these make a Markup (jv.safe), and escape and
     * forceescape escape at once, as markupsafe does */
    if (eq(name, "safe"))
        return (jv){.t = JV_STR, .safe = true, .s = jv_to_str(s->a, in)};
    if (eq(name, "e") || eq(name, "escape") || eq(name, "forceescape")) {
        if (in.t == JV_STR && in.safe && name[0] != 'f')
            return in;
        return (jv){.t = JV_STR, .safe = true, .s = jhtml_escape(s->a, jv_to_str(s->a, in))};
    }
    if (eq(name, "int"))
        return to_int(s, in, a);
    if (eq(name, "float"))
        return to_float(in, a);
    if (eq(name, "bool"))
        return jv_bool(jv_truthy(in));
    if (eq(name, "abs")) {
        if (in.t == JV_INT)
            return in.i == INT64_MIN ? jv_float(-(double)in.i) : jv_int(in.i < 0 ? -in.i : in.i);
        if (in.t == JV_FLOAT)
            return jv_float(fabs(in.f));
        jthrow(s->err, line, "abs: a %s is not a number", jv_type_name(in));
    }
    if (eq(name, "round"))
        return round_filter(s, line, in, a);
    if (eq(name, "default") || eq(name, "d")) {
        const bool boolean = jv_truthy(jargs_get(a, 1, "boolean", jv_bool(false)));
        if (in.t == JV_UNDEF || (boolean && !jv_truthy(in)))
            return jargs_get(a, 0, "default_value", jv_str(s->a, "", 0));
        return in;
    }
    if (eq(name, "join")) {
        const jlist *l = want_seq(s, line, "join", in);
        const jv sep = jargs_get(a, 0, "d", jv_str(s->a, "", 0));
        const jv attr = jargs_get(a, 1, "attribute", jv_undef());
        jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jv_write_str(&b, sep);
            jv_write_str(&b, attr.t == JV_UNDEF ? l->v[i] : item_attr(s, l->v[i], attr));
        }
        return jv_str(s->a, b.p ? b.p : "", b.len);
    }
    if (eq(name, "first") || eq(name, "last")) {
        if (name[0] == 'l' && jv_is_generator(in)) /* reversed() of a generator: a TypeError */
            jthrow(s->err, line, "last: a generator (the result of map, select, ...) cannot be reversed");
        const jlist *l = want_seq(s, line, name, in);
        return l->n ? l->v[name[0] == 'f' ? 0 : l->n - 1] : jv_undef();
    }
    if (eq(name, "list"))
        return copy_list(s, want_seq(s, line, "list", in));
    if (eq(name, "items")) {
        jv out = jv_list(s->a);
        out.l->generator = true;
        if (in.t == JV_UNDEF)
            return out;
        if (in.t != JV_DICT)
            jthrow(s->err, line, "items: a %s is not a mapping", jv_type_name(in));
        for (size_t i = 0; i < in.d->n; i++) {
            jv pair = jv_list(s->a);
            pair.l->tuple = true;
            jlist_push(s->a, pair.l, in.d->k[i]);
            jlist_push(s->a, pair.l, in.d->v[i]);
            jlist_push(s->a, out.l, pair);
        }
        return out;
    }
    if (eq(name, "replace")) {
        const jv old = jargs_get(a, 0, "old", jv_undef()), new_ = jargs_get(a, 1, "new", jv_undef());
        const jv count = jargs_get(a, 2, "count", jv_none());
        if (old.t != JV_STR || new_.t != JV_STR)
            jthrow(s->err, line, "replace needs two strings");
        return jstr_replace(s, want_str(s, line, "replace", in), old.s, new_.s,
                            count.t == JV_INT ? count.i : -1);
    }
    if (eq(name, "map")) {
        const jlist *l = want_seq(s, line, "map", in);
        const jv attr = jargs_get(a, 99, "attribute", jv_undef());
        jv out = jv_list(s->a);
        if (attr.t != JV_UNDEF) {
            const jv def = jargs_get(a, 99, "default", jv_undef());
            for (size_t i = 0; i < l->n; i++) {
                const jv v = item_attr(s, l->v[i], attr);
                jlist_push(s->a, out.l, v.t == JV_UNDEF ? def : v);
            }
            out.l->generator = true;
            return out;
        }
        const jv f = jargs_get(a, 0, NULL, jv_undef());
        if (f.t != JV_STR)
            jthrow(s->err, line, "map needs a filter name or attribute=");
        jargs rest = *a;
        rest.pos = a->n_pos > 1 ? a->pos + 1 : NULL;
        rest.n_pos = a->n_pos > 1 ? a->n_pos - 1 : 0;
        for (size_t i = 0; i < l->n; i++)
            jlist_push(s->a, out.l, jfilter(s, line, f.s->p, l->v[i], &rest));
        out.l->generator = true;
        return out;
    }
    if (eq(name, "select") || eq(name, "reject"))
        return select_items(s, line, in, a, false, name[0] == 's');
    if (eq(name, "selectattr") || eq(name, "rejectattr"))
        return select_items(s, line, in, a, true, name[0] == 's');
    if (eq(name, "unique")) {
        const jlist *l = want_seq(s, line, "unique", in);
        jv out = jv_list(s->a);
        for (size_t i = 0; i < l->n; i++) {
            bool seen = false;
            for (size_t k = 0; k < out.l->n && !seen; k++)
                seen = jv_equal(out.l->v[k], l->v[i]);
            if (!seen)
                jlist_push(s->a, out.l, l->v[i]);
            if (++s->steps > JINJA_MAX_STEPS)
                jthrow(s->err, line, "the template runs too long");
        }
        out.l->generator = true;
        return out;
    }
    if (eq(name, "reverse")) {
        if (in.t == JV_STR) {
            jbuf b = {.a = s->a};
            const jlist *l = want_seq(s, line, "reverse", in);
            for (size_t i = l->n; i-- > 0;)
                jbuf_put(&b, l->v[i].s->p, l->v[i].s->len);
            return jv_str(s->a, b.p ? b.p : "", b.len);
        }
        const jlist *l = want_seq(s, line, "reverse", in);
        jv out = jv_list(s->a);
        for (size_t i = l->n; i-- > 0;)
            jlist_push(s->a, out.l, l->v[i]);
        out.l->generator = true; /* reversed(): an iterator */
        return out;
    }
    if (eq(name, "sort")) {
        jv out = copy_list(s, want_seq(s, line, "sort", in));
        sort_ctx c = {s,
                      line,
                      jargs_get(a, 2, "attribute", jv_undef()),
                      false,
                      jv_truthy(jargs_get(a, 0, "reverse", jv_bool(false))),
                      !jv_truthy(jargs_get(a, 1, "case_sensitive", jv_bool(false))),
                      jv_undef()};
        stable_sort(&c, out.l->v, out.l->n);
        return out;
    }
    if (eq(name, "groupby")) { /* sorted by the attribute, then runs of equal keys: (grouper, list) */
        sort_ctx c = {s,
                      line,
                      jargs_get(a, 0, "attribute", jv_undef()),
                      false,
                      false,
                      !jv_truthy(jargs_get(a, 2, "case_sensitive", jv_bool(false))),
                      jargs_get(a, 1, "default", jv_none())};
        if (c.attr.t != JV_STR && c.attr.t != JV_INT)
            jthrow(s->err, line, "groupby needs the attribute to group by");
        const jv sorted = copy_list(s, want_seq(s, line, "groupby", in));
        stable_sort(&c, sorted.l->v, sorted.l->n);
        jv out = jv_list(s->a), key = jv_undef(), group = jv_undef();
        for (size_t i = 0; i < sorted.l->n; i++) {
            const jv k = sort_key(&c, sorted.l->v[i]);
            if (!i || !jv_equal(k, key)) { /* the grouper is the first item's own value, not its folded key */
                jv pair = jv_list(s->a);
                pair.l->tuple = pair.l->group = true;
                group = jv_list(s->a);
                jlist_push(s->a, pair.l, sort_attr(&c, sorted.l->v[i]));
                jlist_push(s->a, pair.l, group);
                jlist_push(s->a, out.l, pair);
                key = k;
            }
            jlist_push(s->a, group.l, sorted.l->v[i]);
        }
        return out;
    }
    if (eq(name, "dictsort")) {
        if (in.t != JV_DICT)
            jthrow(s->err, line, "dictsort: a %s is not a mapping", jv_type_name(in));
        const jv by = jargs_get(a, 1, "by", jv_undef());
        sort_ctx c = {s,
                      line,
                      jv_int(by.t == JV_STR && eq(by.s->p, "value") ? 1 : 0),
                      false,
                      jv_truthy(jargs_get(a, 2, "reverse", jv_bool(false))),
                      !jv_truthy(jargs_get(a, 0, "case_sensitive", jv_bool(false))),
                      jv_undef()};
        const jargs none = {0};
        jv out = jfilter(s, line, "items", in, &none);
        out.l->generator = false; /* sorted(): a list */
        stable_sort(&c, out.l->v, out.l->n);
        return out;
    }
    if (eq(name, "indent"))
        return indent(s, in, a);
    if (eq(name, "wordcount")) {
        const jstr *str = want_str(s, line, "wordcount", in);
        int64_t words = 0;
        bool in_word = false;
        for (size_t i = 0; i < str->len; i++) {
            const bool w = !isspace((unsigned char)str->p[i]);
            words += w && !in_word;
            in_word = w;
        }
        return jv_int(words);
    }
    if (eq(name, "min") || eq(name, "max")) {
        const jlist *l = want_seq(s, line, name, in);
        if (!l->n)
            return jv_undef();
        jv best = l->v[0];
        for (size_t i = 1; i < l->n; i++) {
            const int c = jv_compare(s->err, line, l->v[i], best);
            if (name[1] == 'i' ? c < 0 : c > 0)
                best = l->v[i];
        }
        return best;
    }
    if (eq(name, "sum")) {
        const jlist *l = want_seq(s, line, "sum", in);
        const jv attr = jargs_get(a, 99, "attribute", jv_undef());
        jv total = jargs_get(a, 99, "start", jv_int(0));
        for (size_t i = 0; i < l->n; i++) {
            const jv v = attr.t == JV_UNDEF ? l->v[i] : item_attr(s, l->v[i], attr);
            if (total.t == JV_INT && v.t == JV_INT && !__builtin_add_overflow(total.i, v.i, &total.i))
                continue;
            if ((total.t != JV_INT && total.t != JV_FLOAT) || (v.t != JV_INT && v.t != JV_FLOAT))
                jthrow(s->err, line, "sum: a %s is not a number", jv_type_name(v));
            total = jv_float((total.t == JV_INT ? (double)total.i : total.f) +
                             (v.t == JV_INT ? (double)v.i : v.f));
        }
        return total;
    }
    if (eq(name, "center") || eq(name, "truncate") || eq(name, "wordwrap") || eq(name, "batch") ||
        eq(name, "slice") || eq(name, "groupby") || eq(name, "format") || eq(name, "urlize") ||
        eq(name, "xmlattr") || eq(name, "striptags") || eq(name, "filesizeformat") || eq(name, "pprint") ||
        eq(name, "random") || eq(name, "attr") || eq(name, "urlencode"))
        jthrow(s->err, line, "the filter '%s' is not supported", name);
    jthrow(s->err, line, "unknown filter '%s'", name);
}

static bool is_lower_or_upper(jv v, bool upper)
{
    if (v.t != JV_STR)
        return false;
    bool cased = false;
    for (size_t i = 0; i < v.s->len; i++) {
        const unsigned char c = (unsigned char)v.s->p[i];
        if (upper ? islower(c) : isupper(c))
            return false;
        cased |= isalpha(c) != 0;
    }
    return cased;
}

bool jtest(jstate *s, int line, const char *name, jv in, const jargs *a)
{
    const jv arg = jargs_get(a, 0, NULL, jv_undef());
    if (eq(name, "defined"))
        return in.t != JV_UNDEF;
    if (eq(name, "undefined"))
        return in.t == JV_UNDEF;
    if (eq(name, "none"))
        return in.t == JV_NONE;
    if (eq(name, "string"))
        return in.t == JV_STR;
    if (eq(name, "mapping"))
        return in.t == JV_DICT;
    if (eq(name, "iterable"))
        return in.t == JV_LIST || in.t == JV_DICT || in.t == JV_STR;
    if (eq(name, "sequence")) /* a generator has no length: not a sequence */
        return (in.t == JV_LIST && !in.l->generator) || in.t == JV_DICT || in.t == JV_STR;
    if (eq(name, "number"))
        return in.t == JV_INT || in.t == JV_FLOAT || in.t == JV_BOOL;
    if (eq(name, "integer"))
        return in.t == JV_INT;
    if (eq(name, "float"))
        return in.t == JV_FLOAT;
    if (eq(name, "boolean"))
        return in.t == JV_BOOL;
    if (eq(name, "true"))
        return in.t == JV_BOOL && in.b;
    if (eq(name, "false"))
        return in.t == JV_BOOL && !in.b;
    if (eq(name, "callable"))
        return in.t == JV_FUNC;
    if (eq(name, "lower") || eq(name, "upper"))
        return is_lower_or_upper(in, name[0] == 'u');
    if (eq(name, "odd") || eq(name, "even") || eq(name, "divisibleby")) {
        if (in.t != JV_INT && in.t != JV_BOOL)
            jthrow(s->err, line, "the test '%s' needs an integer, not a %s", name, jv_type_name(in));
        const int64_t x = in.t == JV_INT ? in.i : in.b;
        if (name[0] == 'o')
            return x % 2 != 0;
        if (name[0] == 'e')
            return x % 2 == 0;
        if (arg.t != JV_INT || arg.i == 0)
            jthrow(s->err, line, "divisibleby needs a non-zero integer");
        return arg.i == -1 || x % arg.i == 0;
    }
    if (eq(name, "equalto") || eq(name, "eq") || eq(name, "==") || eq(name, "sameas"))
        return jv_equal(in, arg);
    if (eq(name, "ne") || eq(name, "!="))
        return !jv_equal(in, arg);
    if (eq(name, "lt") || eq(name, "lessthan"))
        return jv_compare(s->err, line, in, arg) < 0;
    if (eq(name, "le"))
        return jv_compare(s->err, line, in, arg) <= 0;
    if (eq(name, "gt") || eq(name, "greaterthan"))
        return jv_compare(s->err, line, in, arg) > 0;
    if (eq(name, "ge"))
        return jv_compare(s->err, line, in, arg) >= 0;
    if (eq(name, "in")) {
        if (arg.t == JV_STR)
            return in.t == JV_STR && strstr(arg.s->p, in.s->p) != NULL;
        if (arg.t == JV_LIST) {
            for (size_t i = 0; i < arg.l->n; i++)
                if (jv_equal(arg.l->v[i], in))
                    return true;
            return false;
        }
        return arg.t == JV_DICT && jdict_find(arg.d, in);
    }
    jthrow(s->err, line, "unknown test '%s'", name);
}
