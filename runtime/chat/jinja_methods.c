/* Python methods templates call on strings, dicts and lists (Jinja2 exposes the Python objects'
 * methods; chat templates use a handful), and the global functions of Jinja2 and of Hugging Face's
 * chat environment (raise_exception, strftime_now). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_int.h"

jv jstr_replace(jstate *s, const jstr *str, const jstr *old, const jstr *new_, int64_t count);

static bool eq(const char *a, const char *b)
{
    return !strcmp(a, b);
}

static const char *const WS = " \t\n\r\v\f";

static jv strip(jstate *s, const jstr *str, jv chars, bool left, bool right)
{
    const char *set = chars.t == JV_STR ? chars.s->p : WS;
    size_t b = 0, e = str->len;
    while (left && b < e && str->p[b] && strchr(set, str->p[b]))
        b++;
    while (right && e > b && str->p[e - 1] && strchr(set, str->p[e - 1]))
        e--;
    return jv_str(s->a, str->p + b, e - b);
}

static bool affix(jv str, jv x, bool prefix)
{
    if (x.t == JV_LIST) { /* startswith(("a", "b")) */
        for (size_t i = 0; i < x.l->n; i++)
            if (affix(str, x.l->v[i], prefix))
                return true;
        return false;
    }
    if (x.t != JV_STR || x.s->len > str.s->len)
        return false;
    return !memcmp(str.s->p + (prefix ? 0 : str.s->len - x.s->len), x.s->p, x.s->len);
}

static jv split(jstate *s, const jstr *str, jv sep, jv maxsplit)
{
    jv out = jv_list(s->a);
    int64_t left = maxsplit.t == JV_INT ? maxsplit.i : -1;
    size_t i = 0;
    if (sep.t != JV_STR) { /* runs of whitespace, none at the ends */
        for (;;) {
            while (i < str->len && strchr(WS, str->p[i]) && str->p[i])
                i++;
            if (i >= str->len)
                break;
            size_t e = i;
            if (left == 0) {
                e = str->len;
                while (e > i && strchr(WS, str->p[e - 1]))
                    e--;
            } else {
                while (e < str->len && !(strchr(WS, str->p[e]) && str->p[e]))
                    e++;
            }
            jlist_push(s->a, out.l, jv_str(s->a, str->p + i, e - i));
            if (left > 0)
                left--;
            i = e;
        }
        return out;
    }
    if (!sep.s->len)
        jthrow(s->err, 0, "split: empty separator");
    size_t st = 0;
    while (i + sep.s->len <= str->len && left != 0) {
        if (!memcmp(str->p + i, sep.s->p, sep.s->len)) {
            jlist_push(s->a, out.l, jv_str(s->a, str->p + st, i - st));
            i += sep.s->len;
            st = i;
            if (left > 0)
                left--;
        } else {
            i++;
        }
    }
    jlist_push(s->a, out.l, jv_str(s->a, str->p + st, str->len - st));
    return out;
}

static int64_t find(const jstr *str, const jstr *x, bool last)
{
    if (x->len > str->len)
        return -1;
    int64_t found = -1;
    for (size_t i = 0; i + x->len <= str->len; i++)
        if (!memcmp(str->p + i, x->p, x->len)) {
            found = (int64_t)jutf8_len(str->p, i);
            if (!last)
                break;
        }
    return found;
}

/* str.format with plain fields: {}, {0}, {name} and {{ }} escapes (no format specs). */
static jv format(jstate *s, int line, const jstr *str, const jargs *a)
{
    jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
    size_t auto_index = 0;
    for (size_t i = 0; i < str->len; i++) {
        const char c = str->p[i];
        if ((c == '{' || c == '}') && i + 1 < str->len && str->p[i + 1] == c) {
            jbuf_putc(&b, c);
            i++;
            continue;
        }
        if (c != '{') {
            jbuf_putc(&b, c);
            continue;
        }
        const char *end = memchr(str->p + i, '}', str->len - i);
        if (!end)
            jthrow(s->err, line, "format: a '{' without '}'");
        const size_t k = (size_t)(end - (str->p + i)) - 1;
        char field[64];
        if (k >= sizeof field || memchr(str->p + i + 1, ':', k) || memchr(str->p + i + 1, '!', k))
            jthrow(s->err, line, "format: only plain {} fields are supported");
        memcpy(field, str->p + i + 1, k);
        field[k] = 0;
        jv v;
        if (!k)
            v = jargs_get(a, auto_index++, NULL, jv_undef());
        else if (field[0] >= '0' && field[0] <= '9')
            v = jargs_get(a, (size_t)strtoul(field, NULL, 10), NULL, jv_undef());
        else
            v = jargs_get(a, (size_t)-1, field, jv_undef());
        if (v.t == JV_UNDEF)
            jthrow(s->err, line, "format: no argument for {%s}", field);
        jv_write_str(&b, v);
        i += k + 1;
    }
    return jv_str(s->a, b.p ? b.p : "", b.len);
}

static jv string_method(jstate *s, int line, jv obj, const char *name, const jargs *a)
{
    const jstr *str = obj.s;
    const jv a0 = jargs_get(a, 0, NULL, jv_none()), a1 = jargs_get(a, 1, NULL, jv_none());
    if (eq(name, "strip"))
        return strip(s, str, a0, true, true);
    if (eq(name, "lstrip"))
        return strip(s, str, a0, true, false);
    if (eq(name, "rstrip"))
        return strip(s, str, a0, false, true);
    if (eq(name, "startswith") || eq(name, "endswith"))
        return jv_bool(affix(obj, a0, name[0] == 's'));
    if (eq(name, "split"))
        return split(s, str, jargs_get(a, 0, "sep", jv_none()), jargs_get(a, 1, "maxsplit", jv_none()));
    if (eq(name, "upper") || eq(name, "lower") || eq(name, "title") || eq(name, "capitalize")) {
        const jargs none = {0};
        return jfilter(s, line, name, obj, &none);
    }
    if (eq(name, "replace")) {
        if (a0.t != JV_STR || a1.t != JV_STR)
            jthrow(s->err, line, "replace needs two strings");
        const jv count = jargs_get(a, 2, "count", jv_none());
        return jstr_replace(s, str, a0.s, a1.s, count.t == JV_INT ? count.i : -1);
    }
    if (eq(name, "find") || eq(name, "rfind") || eq(name, "count") || eq(name, "index")) {
        if (a0.t != JV_STR)
            jthrow(s->err, line, "%s needs a string", name);
        if (eq(name, "count")) {
            int64_t n = 0;
            if (!a0.s->len)
                return jv_int((int64_t)jutf8_len(str->p, str->len) + 1);
            for (size_t i = 0; i + a0.s->len <= str->len;)
                if (!memcmp(str->p + i, a0.s->p, a0.s->len)) {
                    n++;
                    i += a0.s->len;
                } else {
                    i++;
                }
            return jv_int(n);
        }
        const int64_t at = find(str, a0.s, name[0] == 'r');
        if (at < 0 && eq(name, "index"))
            jthrow(s->err, line, "substring not found");
        return jv_int(at);
    }
    if (eq(name, "isdigit") || eq(name, "isspace") || eq(name, "isalpha") || eq(name, "isalnum")) {
        bool ok = str->len > 0;
        for (size_t i = 0; i < str->len && ok; i++) {
            const char c = str->p[i];
            ok = name[2] == 'd'   ? (c >= '0' && c <= '9')
                 : name[2] == 's' ? strchr(WS, c) && c
                 : name[4] == 'a' && name[5] == 0
                     ? ((c | 32) >= 'a' && (c | 32) <= 'z')
                     : ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9');
        }
        return jv_bool(ok);
    }
    if (eq(name, "format"))
        return format(s, line, str, a);
    if (eq(name, "join")) {
        jbuf b = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
        if (a0.t != JV_LIST)
            jthrow(s->err, line, "join needs a list");
        for (size_t i = 0; i < a0.l->n; i++) {
            if (i)
                jbuf_put(&b, str->p, str->len);
            jv_write_str(&b, a0.l->v[i]);
        }
        return jv_str(s->a, b.p ? b.p : "", b.len);
    }
    jthrow(s->err, line, "strings have no method '%s' here", name);
}

static jv dict_method(jstate *s, int line, jv obj, const char *name, const jargs *a)
{
    if (eq(name, "get")) {
        const jv *v = jdict_find(obj.d, jargs_get(a, 0, NULL, jv_undef()));
        return v ? *v : jargs_get(a, 1, NULL, jv_none());
    }
    if (eq(name, "items")) { /* a view, not a generator: it has a length */
        const jargs none = {0};
        jv out = jfilter(s, line, "items", obj, &none);
        out.l->generator = false;
        return out;
    }
    if (eq(name, "keys") || eq(name, "values")) {
        jv out = jv_list(s->a);
        for (size_t i = 0; i < obj.d->n; i++)
            jlist_push(s->a, out.l, name[0] == 'k' ? obj.d->k[i] : obj.d->v[i]);
        return out;
    }
    jthrow(s->err, line, "dicts have no method '%s' here", name);
}

static jv list_method(jstate *s, int line, jv obj, const char *name, const jargs *a)
{
    const jlist *l = obj.l;
    if (eq(name, "index")) {
        const jv x = jargs_get(a, 0, NULL, jv_undef());
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(l->v[i], x))
                return jv_int((int64_t)i);
        jthrow(s->err, line, "the value is not in the list");
    }
    if (eq(name, "count")) {
        const jv x = jargs_get(a, 0, NULL, jv_undef());
        int64_t n = 0;
        for (size_t i = 0; i < l->n; i++)
            n += jv_equal(l->v[i], x);
        return jv_int(n);
    }
    jthrow(s->err, line, "lists have no method '%s' here", name);
}

bool jsandbox_unsafe_method(jv obj, const char *name)
{
    static const char *const list_unsafe[] = {"append",  "extend", "insert", "pop", "remove",
                                              "reverse", "sort",   "clear",  NULL};
    static const char *const dict_unsafe[] = {"update", "pop", "popitem", "setdefault", "clear", NULL};
    const char *const *unsafe = obj.t == JV_LIST ? list_unsafe : obj.t == JV_DICT ? dict_unsafe : NULL;
    for (; unsafe && *unsafe; unsafe++)
        if (eq(*unsafe, name))
            return true;
    return false;
}

jv jmethod(jstate *s, int line, jv obj, const char *name, const jargs *a)
{
    if (jsandbox_unsafe_method(obj, name)) /* as Hugging Face's ImmutableSandboxedEnvironment */
        jthrow(
            s->err, line,
            "access to attribute '%s' of '%s' object is unsafe (the sandbox keeps lists and dicts unchanged)",
            name, jv_type_name(obj));
    if (jv_is_generator(obj))
        jthrow(s->err, line, "a generator (the result of map, select, ...) has no method '%s'", name);
    switch (obj.t) {
    case JV_STR:
        return string_method(s, line, obj, name, a);
    case JV_DICT:
        return dict_method(s, line, obj, name, a);
    case JV_LIST:
        return list_method(s, line, obj, name, a);
    default:
        jthrow(s->err, line, "cannot call '%s' on a %s", name, jv_type_name(obj));
    }
}

static const char *const GLOBALS[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

bool jglobal_exists(const char *name)
{
    for (int i = 0; GLOBALS[i]; i++)
        if (eq(GLOBALS[i], name))
            return true;
    return false;
}

static jv range(jstate *s, int line, const jargs *a)
{
    int64_t start = 0, stop, step = 1;
    for (size_t i = 0; i < a->n_pos; i++)
        if (a->pos[i].t != JV_INT)
            jthrow(s->err, line, "range needs integers");
    if (a->n_pos == 1) {
        stop = a->pos[0].i;
    } else if (a->n_pos == 2 || a->n_pos == 3) {
        start = a->pos[0].i;
        stop = a->pos[1].i;
        if (a->n_pos == 3)
            step = a->pos[2].i;
    } else {
        jthrow(s->err, line, "range takes 1 to 3 arguments");
    }
    if (step == 0)
        jthrow(s->err, line, "range step cannot be zero");
    jv out = jv_list(s->a);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.l->n >= 1000000)
            jthrow(s->err, line, "range too large (over a million items)");
        jlist_push(s->a, out.l, jv_int(i));
        if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step)
            break;
    }
    return out;
}

jv jglobal_call(jstate *s, int line, const char *name, const jargs *a)
{
    if (eq(name, "range"))
        return range(s, line, a);
    if (eq(name, "namespace") || eq(name, "dict")) {
        jv d = jv_dict(s->a);
        const jv init = jargs_get(a, 0, NULL, jv_undef());
        if (init.t == JV_DICT)
            for (size_t i = 0; i < init.d->n; i++)
                jdict_set(s->a, d.d, init.d->k[i], init.d->v[i]);
        for (size_t i = 0; i < a->n_kw; i++)
            jdict_set(s->a, d.d, jv_cstr(s->a, a->kw[i]), a->kwv[i]);
        return d;
    }
    if (eq(name, "raise_exception")) {
        const jstr *msg = jv_to_str(s->a, jargs_get(a, 0, "message", jv_cstr(s->a, "")));
        jthrow(s->err, line, "the template raised an exception: \"%s\"", msg->p);
    }
    if (eq(name, "strftime_now")) { /* Hugging Face: datetime.now().strftime(format), local time */
        const jv fmt = jargs_get(a, 0, NULL, jv_undef());
        if (fmt.t != JV_STR)
            jthrow(s->err, line, "strftime_now needs a format string");
        const time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char out[256];
        const size_t n = fmt.s->len && fmt.s->len < 128 ? strftime(out, sizeof out, fmt.s->p, &tm) : 0;
        return jv_str(s->a, out, n);
    }
    jthrow(s->err, line, "unknown function '%s'", name);
}
