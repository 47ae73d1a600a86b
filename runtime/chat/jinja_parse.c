/* The Jinja parser: tokens to a syntax tree, with Jinja2's operator precedence (lowest first):
 * inline if, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then postfix
 * (attribute, subscript, call) with filters `|` and tests `is`. Statements: if/elif/else, for (with a
 * filter and else), set (plain, tuple, `ns.attr`, block), macro, call, filter, break/continue and
 * generation. Anything else is an error naming the line and the construct. */
#include <string.h>

#include "jinja_int.h"

typedef struct parser {
    jarena *a;
    jtoken *t;
    size_t i, n;
    int depth;
} parser;

void jnodes_push(jarena *a, jnodes *l, jnode *n)
{
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 4;
        jnode **nv = jalloc(a, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static jtoken *cur(parser *P)
{
    return &P->t[P->i];
}
static int line(parser *P)
{
    return cur(P)->line;
}

static _Noreturn void fail(parser *P, const char *what)
{
    const jtoken *t = cur(P);
    const char *got = t->type == T_EOF                                 ? "the end of the template"
                      : t->type == T_VAR_END || t->type == T_BLOCK_END ? "the end of the tag"
                                                                       : NULL;
    if (got || !t->s)
        jthrow(P->a->err, t->line, "expected %s, got %s", what, got ? got : "a literal");
    jthrow(P->a->err, t->line, "expected %s, got '%s'", what, t->s->p);
}

static bool is_op(parser *P, const char *op)
{
    return cur(P)->type == T_OP && !strcmp(cur(P)->s->p, op);
}

static bool is_name(parser *P, const char *name)
{
    return cur(P)->type == T_NAME && !strcmp(cur(P)->s->p, name);
}

static bool accept_op(parser *P, const char *op)
{
    if (!is_op(P, op))
        return false;
    P->i++;
    return true;
}

static bool accept_name(parser *P, const char *name)
{
    if (!is_name(P, name))
        return false;
    P->i++;
    return true;
}

static void expect_op(parser *P, const char *op)
{
    if (!accept_op(P, op)) {
        char what[16];
        strcpy(what, "'");
        strcat(what, op);
        strcat(what, "'");
        fail(P, what);
    }
}

static const char *expect_name(parser *P)
{
    if (cur(P)->type != T_NAME)
        fail(P, "a name");
    return P->t[P->i++].s->p;
}

static jnode *node(parser *P, enum jnode_kind k)
{
    jnode *n = jalloc(P->a, sizeof *n);
    n->kind = k;
    n->line = line(P);
    return n;
}

static void enter(parser *P)
{
    if (++P->depth > JINJA_MAX_DEPTH)
        jthrow(P->a->err, line(P), "the template nests deeper than %d levels", JINJA_MAX_DEPTH);
}

static jnode *expr(parser *P);
static jnode *or_expr(parser *P);
static jnode *unary(parser *P, bool with_filter);

/* (args, name=kwargs); the '(' is consumed. */
static void call_args(parser *P, jnode *n)
{
    while (!accept_op(P, ")")) {
        if (n->args.n + n->kwargs.n)
            expect_op(P, ",");
        if (accept_op(P, ")"))
            break;
        if (cur(P)->type == T_NAME && P->t[P->i + 1].type == T_OP && !strcmp(P->t[P->i + 1].s->p, "=")) {
            const char *name = expect_name(P);
            P->i++;
            const char **kw = jalloc(P->a, (n->kwargs.n + 1) * sizeof *kw);
            if (n->kwargs.n)
                memcpy(kw, n->kwnames, n->kwargs.n * sizeof *kw);
            kw[n->kwargs.n] = name;
            n->kwnames = kw;
            jnodes_push(P->a, &n->kwargs, expr(P));
        } else {
            if (n->kwargs.n)
                fail(P, "a keyword argument (positional arguments come first)");
            jnodes_push(P->a, &n->args, expr(P));
        }
    }
}

static jnode *literal(parser *P, jv v)
{
    jnode *n = node(P, E_LIT);
    n->lit = v;
    return n;
}

static jnode *primary(parser *P)
{
    jtoken *t = cur(P);
    jnode *n;
    switch (t->type) {
    case T_STR: { /* adjacent literals concatenate */
        jbuf b = {.a = P->a};
        while (cur(P)->type == T_STR)
            jbuf_put(&b, P->t[P->i].s->p, P->t[P->i].s->len), P->i++;
        n = literal(P, jv_str(P->a, b.p ? b.p : "", b.len));
        return n;
    }
    case T_INT:
        P->i++;
        return literal(P, jv_int(t->i));
    case T_FLOAT:
        P->i++;
        return literal(P, jv_float(t->f));
    case T_NAME: {
        const char *s = t->s->p;
        P->i++;
        if (!strcmp(s, "true") || !strcmp(s, "True"))
            return literal(P, jv_bool(true));
        if (!strcmp(s, "false") || !strcmp(s, "False"))
            return literal(P, jv_bool(false));
        if (!strcmp(s, "none") || !strcmp(s, "None"))
            return literal(P, jv_none());
        n = node(P, E_NAME);
        n->name = s;
        return n;
    }
    case T_OP:
        if (accept_op(P, "(")) {
            enter(P);
            if (accept_op(P, ")")) { /* the empty tuple */
                P->depth--;
                n = node(P, E_LIST);
                n->op = 1;
                return n;
            }
            jnode *e = expr(P);
            if (is_op(P, ",")) { /* a tuple: a list for our purposes */
                n = node(P, E_LIST);
                n->op = 1; /* a tuple */
                jnodes_push(P->a, &n->args, e);
                while (accept_op(P, ",") && !is_op(P, ")"))
                    jnodes_push(P->a, &n->args, expr(P));
                e = n;
            }
            expect_op(P, ")");
            P->depth--;
            return e;
        }
        if (accept_op(P, "[")) {
            enter(P);
            n = node(P, E_LIST);
            while (!accept_op(P, "]")) {
                if (n->args.n)
                    expect_op(P, ",");
                if (accept_op(P, "]"))
                    break;
                jnodes_push(P->a, &n->args, expr(P));
            }
            P->depth--;
            return n;
        }
        if (accept_op(P, "{")) {
            enter(P);
            n = node(P, E_DICT);
            while (!accept_op(P, "}")) {
                if (n->args.n)
                    expect_op(P, ",");
                if (accept_op(P, "}"))
                    break;
                jnodes_push(P->a, &n->args, expr(P));
                expect_op(P, ":");
                jnodes_push(P->a, &n->args, expr(P));
            }
            P->depth--;
            return n;
        }
        break;
    default:
        break;
    }
    fail(P, "an expression");
}

static jnode *postfix(parser *P, jnode *n)
{
    for (;;) {
        if (accept_op(P, ".")) {
            jnode *a = node(P, E_ATTR);
            a->a = n;
            if (cur(P)->type == T_INT) { /* foo.0 is foo[0] */
                a->kind = E_ITEM;
                a->b = literal(P, jv_int(cur(P)->i));
                P->i++;
            } else {
                a->name = expect_name(P);
            }
            n = a;
        } else if (accept_op(P, "[")) {
            enter(P);
            jnode *a = node(P, E_ITEM);
            a->a = n;
            jnode *parts[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!is_op(P, ":") && !is_op(P, "]"))
                    parts[k] = expr(P);
                if (k < 2 && accept_op(P, ":")) {
                    slice = true;
                    k++;
                    continue;
                }
                break;
            }
            expect_op(P, "]");
            if (slice) {
                a->kind = E_SLICE;
                a->b = parts[0];
                a->c = parts[1];
                jnodes_push(P->a, &a->args, parts[2]);
            } else {
                if (!parts[0])
                    fail(P, "a subscript");
                a->b = parts[0];
            }
            P->depth--;
            n = a;
        } else if (accept_op(P, "(")) {
            enter(P);
            jnode *c = node(P, E_CALL);
            c->a = n;
            call_args(P, c);
            P->depth--;
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *filters_and_tests(parser *P, jnode *n)
{
    for (;;) {
        if (accept_op(P, "|")) {
            jnode *f = node(P, E_FILTER);
            f->a = n;
            f->name = expect_name(P);
            if (accept_op(P, "("))
                call_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            jnode *t = node(P, E_TEST);
            t->a = n;
            t->negate = accept_name(P, "not");
            t->name = expect_name(P);
            if (accept_op(P, "(")) {
                call_args(P, t);
            } else {
                const jtoken *c = cur(P);
                const bool starts =
                    c->type == T_STR || c->type == T_INT || c->type == T_FLOAT ||
                    (c->type == T_NAME && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                     !is_name(P, "if") && !is_name(P, "is") && !is_name(P, "in") && !is_name(P, "not")) ||
                    is_op(P, "[") || is_op(P, "{");
                if (starts) /* `x is divisibleby 3`: one argument without parentheses */
                    jnodes_push(P->a, &t->args, postfix(P, primary(P)));
            }
            n = t;
        } else if (accept_op(P, "(")) {
            jnode *c = node(P, E_CALL);
            c->a = n;
            call_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *unary(parser *P, bool with_filter)
{
    enter(P);
    jnode *n;
    if (accept_op(P, "-")) {
        n = node(P, E_NEG);
        n->a = unary(P, false);
    } else if (accept_op(P, "+")) {
        n = node(P, E_POS);
        n->a = unary(P, false);
    } else {
        n = postfix(P, primary(P));
    }
    if (with_filter)
        n = filters_and_tests(P, n);
    P->depth--;
    return n;
}

static jnode *binary(parser *P, int op, jnode *l, jnode *r)
{
    jnode *n = node(P, E_BINARY);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *power(parser *P)
{
    jnode *l = unary(P, true);
    while (accept_op(P, "**"))
        l = binary(P, OP_POW, l, unary(P, true));
    return l;
}

static jnode *math2(parser *P)
{
    jnode *l = power(P);
    for (;;) {
        int op;
        if (accept_op(P, "*"))
            op = OP_MUL;
        else if (accept_op(P, "/"))
            op = OP_DIV;
        else if (accept_op(P, "//"))
            op = OP_FLOORDIV;
        else if (accept_op(P, "%"))
            op = OP_MOD;
        else
            return l;
        l = binary(P, op, l, power(P));
    }
}

static jnode *concat(parser *P)
{
    jnode *l = math2(P);
    while (accept_op(P, "~"))
        l = binary(P, OP_CONCAT, l, math2(P));
    return l;
}

static jnode *math1(parser *P)
{
    jnode *l = concat(P);
    for (;;) {
        if (accept_op(P, "+"))
            l = binary(P, OP_ADD, l, concat(P));
        else if (accept_op(P, "-"))
            l = binary(P, OP_SUB, l, concat(P));
        else
            return l;
    }
}

/* Comparisons chain as in Python: a < b < c is a < b and b < c (b evaluated twice here: no side
 * effects in an operand of a comparison in practice). */
static jnode *compare(parser *P)
{
    jnode *l = math1(P), *result = NULL;
    for (;;) {
        int op;
        if (accept_op(P, "=="))
            op = OP_EQ;
        else if (accept_op(P, "!="))
            op = OP_NE;
        else if (accept_op(P, "<"))
            op = OP_LT;
        else if (accept_op(P, "<="))
            op = OP_LE;
        else if (accept_op(P, ">"))
            op = OP_GT;
        else if (accept_op(P, ">="))
            op = OP_GE;
        else if (accept_name(P, "in"))
            op = OP_IN;
        else if (is_name(P, "not") && P->t[P->i + 1].type == T_NAME && !strcmp(P->t[P->i + 1].s->p, "in")) {
            P->i += 2;
            op = OP_NOT_IN;
        } else {
            return result ? result : l;
        }
        jnode *r = math1(P), *c = binary(P, op, l, r);
        if (result) {
            jnode *and = node(P, E_AND);
            and->a = result;
            and->b = c;
            result = and;
        } else {
            result = c;
        }
        l = r;
    }
}

static jnode *not_expr(parser *P)
{
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = node(P, E_NOT);
        n->a = not_expr(P);
        P->depth--;
        return n;
    }
    return compare(P);
}

static jnode *and_expr(parser *P)
{
    jnode *l = not_expr(P);
    while (accept_name(P, "and")) {
        jnode *n = node(P, E_AND);
        n->a = l;
        n->b = not_expr(P);
        l = n;
    }
    return l;
}

static jnode *or_expr(parser *P)
{
    jnode *l = and_expr(P);
    while (accept_name(P, "or")) {
        jnode *n = node(P, E_OR);
        n->a = l;
        n->b = and_expr(P);
        l = n;
    }
    return l;
}

/* `a if cond else b` (without else: undefined). */
static jnode *expr(parser *P)
{
    enter(P);
    jnode *l = or_expr(P);
    while (accept_name(P, "if")) {
        jnode *n = node(P, E_COND);
        n->a = or_expr(P);
        n->b = l;
        if (accept_name(P, "else"))
            n->c = expr(P);
        l = n;
    }
    P->depth--;
    return l;
}

/* ---- statements ---- */

static void end_tag(parser *P)
{
    if (cur(P)->type != T_BLOCK_END)
        fail(P, "'%}'");
    P->i++;
}

/* Parses statements up to a {% NAME %} with NAME among `ends` (a NULL-terminated list; none: to the end
 * of the template). Returns the end's name, its tag read up to the name. */
static const char *body(parser *P, jnodes *out, const char *const *ends, const char *opener, int open_line);

static void targets(parser *P, jnode *n)
{
    const char *names[16];
    size_t k = 0;
    const bool paren = accept_op(P, "(");
    do {
        if (k == 16)
            fail(P, "fewer names to unpack");
        names[k++] = expect_name(P);
    } while (accept_op(P, ","));
    if (paren)
        expect_op(P, ")");
    n->targets = jalloc(P->a, k * sizeof *n->targets);
    memcpy(n->targets, names, k * sizeof *names);
    n->n_targets = k;
}

static jnode *stmt_if(parser *P, int ln)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jnode *n = node(P, N_IF);
    n->line = ln;
    n->a = expr(P);
    end_tag(P);
    const char *end = body(P, &n->body, ends, "if", ln);
    if (!strcmp(end, "elif")) { /* the rest of the chain is an if in the else branch */
        enter(P);
        jnodes_push(P->a, &n->else_body, stmt_if(P, line(P)));
        P->depth--;
        return n;
    }
    if (!strcmp(end, "else")) {
        static const char *const endif[] = {"endif", NULL};
        end_tag(P);
        body(P, &n->else_body, endif, "else", line(P));
    }
    end_tag(P);
    return n;
}

static jnode *stmt_for(parser *P, int ln)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    jnode *n = node(P, N_FOR);
    n->line = ln;
    targets(P, n);
    if (!accept_name(P, "in"))
        fail(P, "'in'");
    n->a = or_expr(P); /* no inline if here: a trailing `if` filters the loop */
    if (accept_name(P, "if"))
        n->b = or_expr(P);
    if (accept_name(P, "recursive"))
        jthrow(P->a->err, ln, "recursive for loops are not supported");
    end_tag(P);
    if (!strcmp(body(P, &n->body, ends, "for", ln), "else")) {
        static const char *const endfor[] = {"endfor", NULL};
        end_tag(P);
        body(P, &n->else_body, endfor, "for", ln);
    }
    end_tag(P);
    return n;
}

static jnode *stmt_set(parser *P, int ln)
{
    jnode *n = node(P, N_SET);
    n->line = ln;
    if (cur(P)->type == T_NAME && P->t[P->i + 1].type == T_OP && !strcmp(P->t[P->i + 1].s->p, ".")) {
        n->name = expect_name(P);
        P->i++;
        n->attr = expect_name(P);
    } else {
        targets(P, n);
    }
    if (accept_op(P, "=")) {
        n->a = expr(P);
        if (is_op(P, ",")) { /* set a, b = 1, 2 */
            jnode *l = node(P, E_LIST);
            jnodes_push(P->a, &l->args, n->a);
            while (accept_op(P, ","))
                jnodes_push(P->a, &l->args, expr(P));
            n->a = l;
        }
        end_tag(P);
        return n;
    }
    if (n->attr || n->n_targets != 1)
        fail(P, "'='");
    static const char *const ends[] = {"endset", NULL};
    n->kind = N_SET_BLOCK;
    if (accept_op(P, "|")) { /* {% set x | filter %} */
        n->name = expect_name(P);
        jthrow(P->a->err, ln, "filtered block set is not supported");
    }
    end_tag(P);
    body(P, &n->body, ends, "set", ln);
    end_tag(P);
    return n;
}

/* Parameters of a macro or a call block's caller: names with optional defaults. */
static void params(parser *P, jnode *n)
{
    const char *names[64];
    size_t k = 0;
    expect_op(P, "(");
    while (!accept_op(P, ")")) {
        if (k)
            expect_op(P, ",");
        if (k == 64)
            fail(P, "fewer parameters");
        names[k] = expect_name(P);
        jnodes_push(P->a, &n->kwargs, accept_op(P, "=") ? expr(P) : NULL);
        k++;
    }
    n->targets = jalloc(P->a, (k ? k : 1) * sizeof *n->targets);
    memcpy(n->targets, names, k * sizeof *names);
    n->n_targets = k;
}

static jnode *stmt_macro(parser *P, int ln)
{
    static const char *const ends[] = {"endmacro", NULL};
    jnode *n = node(P, N_MACRO);
    n->line = ln;
    n->name = expect_name(P);
    params(P, n);
    end_tag(P);
    body(P, &n->body, ends, "macro", ln);
    if (cur(P)->type == T_NAME)
        P->i++; /* {% endmacro name %} */
    end_tag(P);
    return n;
}

static jnode *stmt_call(parser *P, int ln)
{
    static const char *const ends[] = {"endcall", NULL};
    jnode *n = node(P, N_CALL_BLOCK);
    n->line = ln;
    jnode *caller = node(P, N_MACRO); /* the body, as the macro caller() */
    caller->name = "caller";
    if (is_op(P, "("))
        params(P, caller);
    n->a = expr(P);
    if (n->a->kind != E_CALL)
        fail(P, "a macro call");
    end_tag(P);
    body(P, &caller->body, ends, "call", ln);
    end_tag(P);
    n->b = caller;
    return n;
}

static jnode *statement(parser *P)
{
    const int ln = line(P);
    const char *kw = expect_name(P);
    enter(P);
    jnode *n;
    if (!strcmp(kw, "if")) {
        n = stmt_if(P, ln);
    } else if (!strcmp(kw, "for")) {
        n = stmt_for(P, ln);
    } else if (!strcmp(kw, "set")) {
        n = stmt_set(P, ln);
    } else if (!strcmp(kw, "macro")) {
        n = stmt_macro(P, ln);
    } else if (!strcmp(kw, "call")) {
        n = stmt_call(P, ln);
    } else if (!strcmp(kw, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        n = node(P, N_FILTER_BLOCK);
        n->line = ln;
        jnode *f = node(P, E_FILTER);
        f->name = expect_name(P);
        if (accept_op(P, "("))
            call_args(P, f);
        n->a = f;
        end_tag(P);
        body(P, &n->body, ends, "filter", ln);
        end_tag(P);
    } else if (!strcmp(kw, "generation")) { /* Hugging Face's marker of assistant text: renders as is */
        static const char *const ends[] = {"endgeneration", NULL};
        n = node(P, N_BLOCK);
        end_tag(P);
        body(P, &n->body, ends, "generation", ln);
        end_tag(P);
    } else if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        n = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        end_tag(P);
    } else {
        P->i--;
        jthrow(P->a->err, ln, "unsupported or unexpected statement '%s'", kw);
    }
    P->depth--;
    return n;
}

static const char *body(parser *P, jnodes *out, const char *const *ends, const char *opener, int open_line)
{
    for (;;) {
        jtoken *t = cur(P);
        switch (t->type) {
        case T_EOF:
            if (ends) {
                const char *const *last = ends;
                while (last[1])
                    last++;
                jthrow(P->a->err, open_line, "'%s' is never closed (expected '%s')", opener, *last);
            }
            return NULL;
        case T_TEXT: {
            jnode *n = node(P, N_TEXT);
            n->lit = (jv){.t = JV_STR, .s = t->s};
            jnodes_push(P->a, out, n);
            P->i++;
            break;
        }
        case T_VAR_BEGIN: {
            P->i++;
            jnode *n = node(P, N_OUTPUT);
            n->a = expr(P);
            if (cur(P)->type != T_VAR_END)
                fail(P, "'}}'");
            P->i++;
            jnodes_push(P->a, out, n);
            break;
        }
        case T_BLOCK_BEGIN: {
            P->i++;
            if (cur(P)->type == T_NAME && ends)
                for (const char *const *e = ends; *e; e++)
                    if (!strcmp(cur(P)->s->p, *e)) {
                        P->i++;
                        return *e;
                    }
            if (cur(P)->type == T_NAME && !strncmp(cur(P)->s->p, "end", 3))
                jthrow(P->a->err, line(P), "unexpected '%s'%s%s%s", cur(P)->s->p, ends ? " (expected '" : "",
                       ends ? ends[0] : "", ends ? "')" : "");
            if (cur(P)->type == T_NAME && (!strcmp(cur(P)->s->p, "elif") || !strcmp(cur(P)->s->p, "else")))
                jthrow(P->a->err, line(P), "unexpected '%s'", cur(P)->s->p);
            jnodes_push(P->a, out, statement(P));
            break;
        }
        default:
            fail(P, "text or a tag");
        }
    }
}

jnodes jparse(jarena *a, jtoken *toks, size_t n)
{
    parser P = {.a = a, .t = toks, .n = n};
    jnodes out = {0};
    body(&P, &out, NULL, NULL, 0);
    return out;
}
