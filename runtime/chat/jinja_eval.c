/* The Jinja evaluator: walks the syntax tree with Jinja2's scoping (a for loop and a macro call open a
 * scope, so `set` inside them does not leak out, hence namespace(); if does not), Python's operator
 * semantics, and lenient undefined (a missing variable, key or attribute prints empty and is false). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jinja_int.h"

/* A scope's variables. Names point into the syntax tree or the context (both outlive the render), so
 * setting a variable allocates nothing once the arrays have grown. */
struct jframe {
    jframe *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static jv eval(jstate *s, jframe *f, const jnode *n);
static enum flow exec_body(jstate *s, jframe *f, const jnodes *body);

static void step(jstate *s, int line)
{
    if (++s->steps > JINJA_MAX_STEPS)
        jthrow(s->err, line, "the template runs longer than %ld steps", JINJA_MAX_STEPS);
}

static jframe *frame_new(jstate *s, jframe *parent)
{
    jframe *f = jalloc(s->a, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(jstate *s, jframe *f, const char *name, jv v)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        const size_t cap = f->cap ? 2 * f->cap : 4;
        const char **nn = jalloc(s->a, cap * sizeof *nn);
        jv *nv = jalloc(s->a, cap * sizeof *nv);
        if (f->n) {
            memcpy(nn, f->names, f->n * sizeof *nn);
            memcpy(nv, f->vals, f->n * sizeof *nv);
        }
        f->names = nn;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}

static jv *lookup(jframe *f, const char *name)
{
    for (; f; f = f->parent)
        for (size_t i = 0; i < f->n; i++)
            if (!strcmp(f->names[i], name))
                return &f->vals[i];
    return NULL;
}

jv jargs_get(const jargs *a, size_t pos, const char *kw, jv def)
{
    if (kw)
        for (size_t i = 0; i < a->n_kw; i++)
            if (!strcmp(a->kw[i], kw))
                return a->kwv[i];
    return pos < a->n_pos ? a->pos[pos] : def;
}

static jargs eval_args(jstate *s, jframe *f, const jnode *n)
{
    jargs a = {.n_pos = n->args.n, .n_kw = n->kwargs.n, .kw = n->kwnames};
    a.pos = jalloc(s->a, (a.n_pos + 1) * sizeof *a.pos);
    a.kwv = jalloc(s->a, (a.n_kw + 1) * sizeof *a.kwv);
    for (size_t i = 0; i < a.n_pos; i++)
        a.pos[i] = eval(s, f, n->args.v[i]);
    for (size_t i = 0; i < a.n_kw; i++)
        a.kwv[i] = eval(s, f, n->kwargs.v[i]);
    return a;
}

/* ---- attribute and item access ---- */

static jv loop_attr(jstate *s, const jloop *l, const char *name)
{
    if (!strcmp(name, "index"))
        return jv_int((int64_t)l->index0 + 1);
    if (!strcmp(name, "index0"))
        return jv_int((int64_t)l->index0);
    if (!strcmp(name, "revindex"))
        return jv_int((int64_t)(l->length - l->index0));
    if (!strcmp(name, "revindex0"))
        return jv_int((int64_t)(l->length - l->index0 - 1));
    if (!strcmp(name, "first"))
        return jv_bool(l->index0 == 0);
    if (!strcmp(name, "last"))
        return jv_bool(l->index0 + 1 == l->length);
    if (!strcmp(name, "length"))
        return jv_int((int64_t)l->length);
    if (!strcmp(name, "previtem"))
        return l->has_prev ? l->prev : jv_undef();
    if (!strcmp(name, "nextitem"))
        return l->has_next ? l->next : jv_undef();
    if (!strcmp(name, "depth"))
        return jv_int(1);
    if (!strcmp(name, "depth0"))
        return jv_int(0);
    (void)s;
    return jv_undef();
}

static int64_t norm_index(int64_t i, size_t n)
{
    return i < 0 ? i + (int64_t)n : i;
}

jv jattr(jstate *s, jv obj, jv key)
{
    switch (obj.t) {
    case JV_UNDEF: { /* Jinja2's Undefined raises on any attribute or item: msg.x.y with x missing */
        jbuf kb = {.a = s->a, .limit = 200};
        jv_write_repr(&kb, key);
        jthrow(s->err, 0, "an undefined value has no attribute or item %s", kb.p ? kb.p : "");
    }
    case JV_DICT: {
        jv *v = jdict_find(obj.d, key);
        return v ? *v : jv_undef();
    }
    case JV_LIST:
        if (obj.l->generator) /* a generator has no items to subscript: Jinja2 gives undefined */
            return jv_undef();
        if (key.t == JV_INT || key.t == JV_BOOL) {
            const int64_t i = norm_index(key.t == JV_INT ? key.i : key.b, obj.l->n);
            return i >= 0 && (size_t)i < obj.l->n ? obj.l->v[i] : jv_undef();
        }
        if (obj.l->group && key.t == JV_STR && (!strcmp(key.s->p, "grouper") || !strcmp(key.s->p, "list")))
            return obj.l->v[key.s->p[0] == 'l'];
        return jv_undef();
    case JV_STR:
        if (key.t == JV_INT) {
            const size_t n = jutf8_len(obj.s->p, obj.s->len);
            const int64_t i = norm_index(key.i, n);
            if (i < 0 || (size_t)i >= n)
                return jv_undef();
            const size_t b = jutf8_offset(obj.s->p, obj.s->len, (size_t)i),
                         e = jutf8_offset(obj.s->p, obj.s->len, (size_t)i + 1);
            return jv_str(s->a, obj.s->p + b, e - b);
        }
        return jv_undef();
    case JV_LOOP:
        return key.t == JV_STR ? loop_attr(s, obj.loop, key.s->p) : jv_undef();
    default:
        return jv_undef();
    }
}

/* Python's slice indices for a sequence of n items. */
static void slice_bounds(int64_t n, const jv *start, const jv *stop, int64_t step, int64_t *b, int64_t *e)
{
    const int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    int64_t x;
    if (start->t == JV_INT) {
        x = start->i < 0 ? start->i + n : start->i;
        *b = x < lo ? lo : x > hi ? hi : x;
    } else {
        *b = step < 0 ? hi : lo;
    }
    if (stop->t == JV_INT) {
        x = stop->i < 0 ? stop->i + n : stop->i;
        *e = x < lo ? lo : x > hi ? hi : x;
    } else {
        *e = step < 0 ? lo : hi;
    }
}

static jv eval_slice(jstate *s, jframe *f, const jnode *n)
{
    const jv obj = eval(s, f, n->a);
    const jv start = n->b ? eval(s, f, n->b) : jv_none(), stop = n->c ? eval(s, f, n->c) : jv_none();
    const jv stepv = n->args.v[0] ? eval(s, f, n->args.v[0]) : jv_none();
    if ((start.t != JV_INT && start.t != JV_NONE) || (stop.t != JV_INT && stop.t != JV_NONE) ||
        (stepv.t != JV_INT && stepv.t != JV_NONE))
        jthrow(s->err, n->line, "slice indices must be integers or none");
    const int64_t st = stepv.t == JV_INT ? stepv.i : 1;
    if (st == 0)
        jthrow(s->err, n->line, "slice step cannot be zero");
    int64_t b, e;
    if (obj.t == JV_UNDEF)
        jthrow(s->err, n->line, "cannot slice an undefined value");
    if (obj.t == JV_LIST && !obj.l->generator) {
        slice_bounds((int64_t)obj.l->n, &start, &stop, st, &b, &e);
        jv out = jv_list(s->a);
        for (int64_t i = b; st > 0 ? i < e : i > e; i += st)
            jlist_push(s->a, out.l, obj.l->v[i]);
        return out;
    }
    if (obj.t == JV_STR) {
        const size_t ncp = jutf8_len(obj.s->p, obj.s->len);
        slice_bounds((int64_t)ncp, &start, &stop, st, &b, &e);
        jbuf out = {.a = s->a};
        for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
            const size_t x = jutf8_offset(obj.s->p, obj.s->len, (size_t)i),
                         y = jutf8_offset(obj.s->p, obj.s->len, (size_t)i + 1);
            jbuf_put(&out, obj.s->p + x, y - x);
        }
        return jv_str(s->a, out.p ? out.p : "", out.len);
    }
    if (obj.t == JV_NONE || obj.t == JV_LIST) /* none or a generator: Jinja2 gives undefined */
        return jv_undef();
    jthrow(s->err, n->line, "cannot slice a %s", jv_type_name(obj));
}

/* ---- operators ---- */

static bool numeric(jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static double as_double(jv v)
{
    return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.b;
}
static int64_t as_int(jv v)
{
    return v.t == JV_INT ? v.i : v.b;
}

static _Noreturn void bad_operands(jstate *s, int line, const char *op, jv a, jv b)
{
    jthrow(s->err, line, "unsupported operand types for %s: %s and %s", op, jv_type_name(a), jv_type_name(b));
}

static jv repeat(jstate *s, int line, jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.t == JV_STR) {
        if (seq.s->len && (uint64_t)times > (uint64_t)JINJA_MAX_OUTPUT / seq.s->len)
            jthrow(s->err, line, "string repetition too large");
        jbuf b = {.a = s->a};
        for (int64_t i = 0; i < times; i++)
            jbuf_put(&b, seq.s->p, seq.s->len);
        return jv_str(s->a, b.p ? b.p : "", b.len);
    }
    if (seq.l->n && (uint64_t)times > 1000000u / seq.l->n)
        jthrow(s->err, line, "list repetition too large");
    jv out = jv_list(s->a);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.l->n; k++)
            jlist_push(s->a, out.l, seq.l->v[k]);
    return out;
}

static bool contains(jstate *s, int line, jv item, jv seq)
{
    switch (seq.t) {
    case JV_STR:
        if (item.t != JV_STR)
            jthrow(s->err, line, "'in <string>' needs a string on the left, not a %s", jv_type_name(item));
        if (!item.s->len)
            return true;
        for (size_t i = 0; i + item.s->len <= seq.s->len; i++)
            if (!memcmp(seq.s->p + i, item.s->p, item.s->len))
                return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < seq.l->n; i++)
            if (jv_equal(seq.l->v[i], item))
                return true;
        return false;
    case JV_DICT:
        return jdict_find(seq.d, item) != NULL;
    case JV_UNDEF:
    case JV_NONE:
        return false;
    default:
        jthrow(s->err, line, "a %s is not a container ('in')", jv_type_name(seq));
    }
}

static jv arith(jstate *s, int line, int op, jv a, jv b)
{
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (numeric(a) && numeric(b)) {
        const bool ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
        const int64_t x = as_int(a), y = as_int(b);
        const double fx = as_double(a), fy = as_double(b);
        int64_t r;
        switch (op) {
        case OP_ADD:
            if (ints && !__builtin_add_overflow(x, y, &r))
                return jv_int(r);
            return jv_float(fx + fy);
        case OP_SUB:
            if (ints && !__builtin_sub_overflow(x, y, &r))
                return jv_int(r);
            return jv_float(fx - fy);
        case OP_MUL:
            if (ints && !__builtin_mul_overflow(x, y, &r))
                return jv_int(r);
            return jv_float(fx * fy);
        case OP_DIV:
            if (fy == 0)
                jthrow(s->err, line, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (fy == 0)
                jthrow(s->err, line, "division by zero");
            if (ints && !(x == INT64_MIN && y == -1)) {
                int64_t q = x / y, m = x % y;
                if (m && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jv_int(op == OP_MOD ? m : q);
            }
            if (op == OP_FLOORDIV)
                return jv_float(floor(fx / fy));
            {
                double m = fmod(fx, fy);
                if (m && ((m < 0) != (fy < 0)))
                    m += fy;
                return jv_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t p = 1;
                bool ok = true;
                for (int64_t k = 0; k < y && ok; k++)
                    ok = !__builtin_mul_overflow(p, x, &p) && k < 64;
                if (ok)
                    return jv_int(p);
            }
            return jv_float(pow(fx, fy));
        default:
            break;
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        /* Markup + str and str + Markup escape the plain side (markupsafe), and give Markup */
        const bool safe = a.safe || b.safe;
        const jstr *x = safe && !a.safe ? jhtml_escape(s->a, a.s) : a.s;
        const jstr *y = safe && !b.safe ? jhtml_escape(s->a, b.s) : b.s;
        if (x->len + y->len > JINJA_MAX_OUTPUT)
            jthrow(s->err, line, "a string exceeds %d bytes", JINJA_MAX_OUTPUT);
        jstr *r = jstr_new(s->a, NULL, x->len + y->len);
        memcpy(r->p, x->p, x->len);
        memcpy(r->p + x->len, y->p, y->len);
        return (jv){.t = JV_STR, .safe = safe, .s = r};
    }
    if (jv_is_generator(a) || jv_is_generator(b))
        bad_operands(s, line, names[op], a, b);
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        jv out = jv_list(s->a);
        for (size_t i = 0; i < a.l->n; i++)
            jlist_push(s->a, out.l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++)
            jlist_push(s->a, out.l, b.l->v[i]);
        return out;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) {
        jv r = repeat(s, line, a, as_int(b));
        r.safe = a.safe;
        return r;
    }
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) {
        jv r = repeat(s, line, b, as_int(a));
        r.safe = b.safe;
        return r;
    }
    bad_operands(s, line, names[op], a, b);
}

static jv binary(jstate *s, jframe *f, const jnode *n)
{
    const jv a = eval(s, f, n->a), b = eval(s, f, n->b);
    switch (n->op) {
    case OP_CONCAT: {
        jbuf out = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
        jv_write_str(&out, a);
        jv_write_str(&out, b);
        return jv_str(s->a, out.p ? out.p : "", out.len);
    }
    case OP_EQ:
        return jv_bool(jv_equal(a, b));
    case OP_NE:
        return jv_bool(!jv_equal(a, b));
    case OP_LT:
        return jv_bool(jv_compare(s->err, n->line, a, b) < 0);
    case OP_LE:
        return jv_bool(jv_compare(s->err, n->line, a, b) <= 0);
    case OP_GT:
        return jv_bool(jv_compare(s->err, n->line, a, b) > 0);
    case OP_GE:
        return jv_bool(jv_compare(s->err, n->line, a, b) >= 0);
    case OP_IN:
        return jv_bool(contains(s, n->line, a, b));
    case OP_NOT_IN:
        return jv_bool(!contains(s, n->line, a, b));
    default:
        return arith(s, n->line, n->op, a, b);
    }
}

/* ---- calls ---- */

static jv call_macro(jstate *s, int line, const jfunc *fn, const jargs *args, jv caller)
{
    const jnode *m = fn->macro;
    if (s->call_depth >= JINJA_MAX_CALL_DEPTH)
        jthrow(s->err, line, "macro calls nest deeper than %d (recursion?)", JINJA_MAX_CALL_DEPTH);
    if (args->n_pos > m->n_targets)
        jthrow(s->err, line, "macro '%s' takes %zu arguments, %zu given", fn->name, m->n_targets,
               args->n_pos);
    jframe *f = frame_new(s, fn->closure);
    for (size_t k = 0; k < args->n_kw; k++) {
        bool known = false;
        for (size_t i = 0; i < m->n_targets; i++)
            known |= !strcmp(m->targets[i], args->kw[k]);
        if (!known)
            jthrow(s->err, line, "macro '%s' has no parameter '%s'", fn->name, args->kw[k]);
    }
    for (size_t i = 0; i < m->n_targets; i++) {
        jv v = jargs_get(args, i, m->targets[i], jv_undef());
        if (i >= args->n_pos && v.t == JV_UNDEF && m->kwargs.v[i]) {
            bool given = false;
            for (size_t k = 0; k < args->n_kw; k++)
                given |= !strcmp(args->kw[k], m->targets[i]);
            if (!given)
                v = eval(s, f, m->kwargs.v[i]);
        }
        frame_set(s, f, m->targets[i], v);
    }
    if (caller.t == JV_FUNC)
        frame_set(s, f, "caller", caller);
    jbuf out = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
    jbuf *saved = s->out;
    s->out = &out;
    s->call_depth++;
    exec_body(s, f, &m->body);
    s->call_depth--;
    s->out = saved;
    return jv_str(s->a, out.p ? out.p : "", out.len);
}

jv jcall_value(jstate *s, int line, jv fn, const jargs *args)
{
    if (fn.t != JV_FUNC)
        jthrow(s->err, line, "a %s is not callable", jv_type_name(fn));
    if (fn.fn->kind == F_BUILTIN)
        return jglobal_call(s, line, fn.fn->name, args);
    return call_macro(s, line, fn.fn, args, jv_undef());
}

static jv eval_call(jstate *s, jframe *f, const jnode *n, jv caller)
{
    const jnode *callee = n->a;
    if (callee->kind == E_ATTR) { /* obj.method(...) */
        const jv obj = eval(s, f, callee->a);
        const jargs args = eval_args(s, f, n);
        if (obj.t == JV_DICT) {
            const jv member = jdict_get_c(obj.d, callee->name);
            if (member.t == JV_FUNC)
                return jcall_value(s, n->line, member, &args);
        }
        return jmethod(s, n->line, obj, callee->name, &args);
    }
    jv fn;
    if (callee->kind == E_NAME) {
        const jv *v = lookup(f, callee->name);
        if (!v) {
            if (!jglobal_exists(callee->name))
                jthrow(s->err, n->line, "'%s' is undefined (not a known function)", callee->name);
            const jargs args = eval_args(s, f, n);
            return jglobal_call(s, n->line, callee->name, &args);
        }
        fn = *v;
    } else {
        fn = eval(s, f, callee);
    }
    const jargs args = eval_args(s, f, n);
    if (fn.t == JV_FUNC && fn.fn->kind == F_MACRO)
        return call_macro(s, n->line, fn.fn, &args, caller);
    return jcall_value(s, n->line, fn, &args);
}

/* ---- expressions ---- */

static jv eval(jstate *s, jframe *f, const jnode *n)
{
    step(s, n->line);
    switch (n->kind) {
    case E_LIT:
        return n->lit;
    case E_NAME: {
        const jv *v = lookup(f, n->name);
        if (v)
            return *v;
        if (jglobal_exists(n->name)) {
            jfunc *fn = jalloc(s->a, sizeof *fn);
            fn->kind = F_BUILTIN;
            fn->name = n->name;
            return (jv){.t = JV_FUNC, .fn = fn};
        }
        return jv_undef();
    }
    case E_LIST: {
        jv l = jv_list(s->a);
        l.l->tuple = n->op == 1;
        for (size_t i = 0; i < n->args.n; i++)
            jlist_push(s->a, l.l, eval(s, f, n->args.v[i]));
        return l;
    }
    case E_DICT: {
        jv d = jv_dict(s->a);
        for (size_t i = 0; i + 1 < n->args.n; i += 2) {
            const jv k = eval(s, f, n->args.v[i]);
            jdict_set(s->a, d.d, k, eval(s, f, n->args.v[i + 1]));
        }
        return d;
    }
    case E_ATTR:
    case E_ITEM: {
        const jv obj = eval(s, f, n->a), key = n->kind == E_ATTR ? jv_cstr(s->a, n->name) : eval(s, f, n->b);
        if (obj.t == JV_UNDEF) { /* Jinja2 raises here (x.y.z with y missing), with the line */
            jbuf kb = {.a = s->a, .limit = 200};
            jv_write_repr(&kb, key);
            const bool named = n->a->kind == E_NAME || n->a->kind == E_ATTR;
            jthrow(s->err, n->line, "%s%s%s is undefined: it has no attribute or item %s", named ? "'" : "",
                   named ? n->a->name : "the value", named ? "'" : "", kb.p ? kb.p : "");
        }
        return jattr(s, obj, key);
    }
    case E_SLICE:
        return eval_slice(s, f, n);
    case E_CALL:
        return eval_call(s, f, n, jv_undef());
    case E_FILTER: {
        const jv in = eval(s, f, n->a);
        const jargs args = eval_args(s, f, n);
        return jfilter(s, n->line, n->name, in, &args);
    }
    case E_TEST: {
        const jv in = eval(s, f, n->a);
        const jargs args = eval_args(s, f, n);
        return jv_bool(jtest(s, n->line, n->name, in, &args) != n->negate);
    }
    case E_NEG:
    case E_POS: {
        const jv v = eval(s, f, n->a);
        if (v.t == JV_INT || v.t == JV_BOOL)
            return n->kind == E_POS         ? jv_int(as_int(v))
                   : as_int(v) == INT64_MIN ? jv_float(-(double)INT64_MIN)
                                            : jv_int(-as_int(v));
        if (v.t == JV_FLOAT)
            return jv_float(n->kind == E_NEG ? -v.f : v.f);
        jthrow(s->err, n->line, "bad operand type for unary %c: %s", n->kind == E_NEG ? '-' : '+',
               jv_type_name(v));
    }
    case E_NOT:
        return jv_bool(!jv_truthy(eval(s, f, n->a)));
    case E_AND: {
        const jv a = eval(s, f, n->a);
        return jv_truthy(a) ? eval(s, f, n->b) : a;
    }
    case E_OR: {
        const jv a = eval(s, f, n->a);
        return jv_truthy(a) ? a : eval(s, f, n->b);
    }
    case E_COND:
        if (jv_truthy(eval(s, f, n->a)))
            return eval(s, f, n->b);
        return n->c ? eval(s, f, n->c) : jv_undef();
    case E_BINARY:
        return binary(s, f, n);
    default:
        jthrow(s->err, n->line, "internal error: a statement where an expression belongs");
    }
}

/* ---- statements ---- */

/* The items a for loop walks (jv_items). */
static const jlist *iterable(jstate *s, int line, jv v)
{
    const jlist *l = jv_items(s->a, v);
    if (!l)
        jthrow(s->err, line, "a %s is not iterable", jv_type_name(v));
    return l;
}

static void bind_targets(jstate *s, jframe *f, const jnode *n, jv v)
{
    if (n->n_targets == 1) {
        frame_set(s, f, n->targets[0], v);
        return;
    }
    if (v.t != JV_LIST || v.l->n != n->n_targets)
        jthrow(s->err, n->line, "cannot unpack a %s into %zu names", jv_type_name(v), n->n_targets);
    for (size_t i = 0; i < n->n_targets; i++)
        frame_set(s, f, n->targets[i], v.l->v[i]);
}

static void exec_for(jstate *s, jframe *f, const jnode *n)
{
    const jlist *all = iterable(s, n->line, eval(s, f, n->a));
    /* a filter selects the items first (loop.length counts those); the loop's scope is one frame
     * reset per item, so that a long loop allocates nothing per item */
    jframe *inner = frame_new(s, f);
    const jlist *items = all;
    if (n->b) {
        jlist *kept = jv_list(s->a).l;
        for (size_t i = 0; i < all->n; i++) {
            step(s, n->line);
            inner->n = 0;
            bind_targets(s, inner, n, all->v[i]);
            if (jv_truthy(eval(s, inner, n->b)))
                jlist_push(s->a, kept, all->v[i]);
        }
        items = kept;
    }
    const size_t length = items->n; /* the body may append to the list: the loop walks what it had */
    if (!length) {
        exec_body(s, f, &n->else_body);
        return;
    }
    jloop *loop = jalloc(s->a, sizeof *loop);
    loop->length = length;
    for (size_t i = 0; i < length; i++) {
        step(s, n->line);
        inner->n = 0;
        loop->index0 = i;
        loop->has_prev = i > 0;
        loop->prev = i > 0 ? items->v[i - 1] : jv_undef();
        loop->has_next = i + 1 < length;
        loop->next = i + 1 < length ? items->v[i + 1] : jv_undef();
        bind_targets(s, inner, n, items->v[i]);
        frame_set(s, inner, "loop", (jv){.t = JV_LOOP, .loop = loop});
        if (exec_body(s, inner, &n->body) == FLOW_BREAK)
            break;
    }
}

static void exec_set(jstate *s, jframe *f, const jnode *n)
{
    if (n->kind == N_SET_BLOCK) {
        jbuf out = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
        jbuf *saved = s->out;
        s->out = &out;
        exec_body(s, f, &n->body);
        s->out = saved;
        frame_set(s, f, n->targets[0], jv_str(s->a, out.p ? out.p : "", out.len));
        return;
    }
    const jv v = eval(s, f, n->a);
    if (n->attr) {
        jv *obj = lookup(f, n->name);
        if (!obj || obj->t != JV_DICT)
            jthrow(s->err, n->line, "cannot set attribute '%s' of '%s': it is not a namespace", n->attr,
                   n->name);
        jdict_set(s->a, obj->d, jv_cstr(s->a, n->attr), v);
        return;
    }
    bind_targets(s, f, n, v);
}

static enum flow exec_body(jstate *s, jframe *f, const jnodes *body)
{
    for (size_t i = 0; i < body->n; i++) {
        const jnode *n = body->v[i];
        step(s, n->line);
        switch (n->kind) {
        case N_TEXT:
            jbuf_put(s->out, n->lit.s->p, n->lit.s->len);
            break;
        case N_OUTPUT:
            jv_write_str(s->out, eval(s, f, n->a));
            break;
        case N_IF: {
            const enum flow fl = exec_body(s, f, jv_truthy(eval(s, f, n->a)) ? &n->body : &n->else_body);
            if (fl != FLOW_NEXT)
                return fl;
            break;
        }
        case N_FOR:
            exec_for(s, f, n);
            break;
        case N_SET:
        case N_SET_BLOCK:
            exec_set(s, f, n);
            break;
        case N_MACRO: {
            jfunc *fn = jalloc(s->a, sizeof *fn);
            fn->kind = F_MACRO;
            fn->name = n->name;
            fn->macro = n;
            fn->closure = f;
            frame_set(s, f, n->name, (jv){.t = JV_FUNC, .fn = fn});
            break;
        }
        case N_CALL_BLOCK: {
            jfunc *caller = jalloc(s->a, sizeof *caller);
            caller->kind = F_MACRO;
            caller->name = "caller";
            caller->macro = n->b;
            caller->closure = f;
            jv_write_str(s->out, eval_call(s, f, n->a, (jv){.t = JV_FUNC, .fn = caller}));
            break;
        }
        case N_FILTER_BLOCK: {
            jbuf out = {.a = s->a, .limit = JINJA_MAX_OUTPUT};
            jbuf *saved = s->out;
            s->out = &out;
            exec_body(s, f, &n->body);
            s->out = saved;
            const jargs args = eval_args(s, f, n->a);
            jv_write_str(s->out,
                         jfilter(s, n->line, n->a->name, jv_str(s->a, out.p ? out.p : "", out.len), &args));
            break;
        }
        case N_BLOCK: {
            const enum flow fl = exec_body(s, f, &n->body);
            if (fl != FLOW_NEXT)
                return fl;
            break;
        }
        case N_BREAK:
            return FLOW_BREAK;
        case N_CONTINUE:
            return FLOW_CONTINUE;
        default:
            jthrow(s->err, n->line, "internal error: an expression where a statement belongs");
        }
    }
    return FLOW_NEXT;
}

jv jeval_render(jstate *s, const jnodes *body, jframe *globals)
{
    (void)globals;
    jframe *root = frame_new(s, s->globals);
    exec_body(s, root, body);
    return jv_undef();
}

/* The globals frame: the render context's variables. */
jframe *jframe_globals(jstate *s, jv ctx)
{
    jframe *g = frame_new(s, NULL);
    if (ctx.t == JV_DICT)
        for (size_t i = 0; i < ctx.d->n; i++)
            if (ctx.d->k[i].t == JV_STR)
                frame_set(s, g, ctx.d->k[i].s->p, ctx.d->v[i]);
    return g;
}
