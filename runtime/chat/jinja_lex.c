/* The Jinja lexer: text, {{ }}, {% %} and {# #}, with whitespace control as Hugging Face configures
 * Jinja2 for chat templates: trim_blocks (the newline after a block or comment tag goes), lstrip_blocks
 * (spaces and tabs before a block or comment tag alone on its line go), '-' strips all whitespace on
 * its side, '+' turns lstrip/trim off for that tag; line endings become \n and one trailing newline of
 * the template is dropped (keep_trailing_newline=False). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

typedef struct lexer {
    jarena *a;
    const char *s;
    size_t n, i;
    int line;
    jtoken *v;
    size_t nt, cap;
} lexer;

static jtoken *push(lexer *L, enum jtok type)
{
    if (L->nt == L->cap) {
        const size_t cap = L->cap ? 2 * L->cap : 64;
        jtoken *nv = jalloc(L->a, cap * sizeof *nv);
        if (L->nt)
            memcpy(nv, L->v, L->nt * sizeof *nv);
        L->v = nv;
        L->cap = cap;
    }
    jtoken *t = &L->v[L->nt++];
    *t = (jtoken){.type = type, .line = L->line};
    return t;
}

static void advance(lexer *L, size_t k)
{
    for (size_t j = 0; j < k && L->i < L->n; j++)
        L->line += L->s[L->i++] == '\n';
}

static bool at(const lexer *L, const char *lit)
{
    const size_t k = strlen(lit);
    return L->i + k <= L->n && !memcmp(L->s + L->i, lit, k);
}

static void skip_ws(lexer *L)
{
    while (L->i < L->n && isspace((unsigned char)L->s[L->i]))
        advance(L, 1);
}

/* Python string literal escapes, as Jinja2 decodes them. */
static void string_lit(lexer *L, jtoken *t)
{
    const char q = L->s[L->i];
    const int line = L->line;
    advance(L, 1);
    jbuf b = {.a = L->a};
    for (;;) {
        if (L->i >= L->n)
            jthrow(L->a->err, line, "unterminated string literal");
        const char c = L->s[L->i];
        if (c == q) {
            advance(L, 1);
            break;
        }
        if (c != '\\' || L->i + 1 >= L->n) {
            jbuf_putc(&b, c);
            advance(L, 1);
            continue;
        }
        const char e = L->s[L->i + 1];
        const char *map = strchr("n\nt\tr\r\\\\''\"\"0\0", e);
        if (e && map && (map - "n\nt\tr\r\\\\''\"\"0\0") % 2 == 0) {
            jbuf_putc(&b, map[1]);
            advance(L, 2);
        } else if (e == '\n') { /* a line continuation */
            advance(L, 2);
        } else {
            jbuf_putc(&b, '\\'); /* Python keeps unknown escapes as written */
            advance(L, 1);
        }
    }
    t->s = jstr_new(L->a, b.p ? b.p : "", b.len);
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                  ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", NULL};

/* The tokens inside a tag up to its end marker ("}}" or "%}"); returns the end's whitespace flag: '-',
 * '+' or 0. */
static char inner(lexer *L, const char *end, int open_line)
{
    int depth = 0; /* brackets: an end marker inside them is a closing brace of a dict */
    for (;;) {
        skip_ws(L);
        if (L->i >= L->n)
            jthrow(L->a->err, open_line, "unclosed tag (expected '%s')", end);
        if (depth == 0) {
            for (const char *mod = "-+"; *mod; mod++)
                if (L->s[L->i] == *mod && L->i + 1 + strlen(end) <= L->n &&
                    !memcmp(L->s + L->i + 1, end, strlen(end))) {
                    advance(L, 1 + strlen(end));
                    return *mod;
                }
            if (at(L, end)) {
                advance(L, strlen(end));
                return 0;
            }
        }
        const unsigned char c = (unsigned char)L->s[L->i];
        if (c == '\'' || c == '"') {
            string_lit(L, push(L, T_STR));
        } else if (isdigit(c)) {
            const size_t st = L->i;
            while (L->i < L->n && (isdigit((unsigned char)L->s[L->i]) || L->s[L->i] == '_'))
                L->i++;
            bool is_float = false;
            if (L->i + 1 < L->n && L->s[L->i] == '.' && isdigit((unsigned char)L->s[L->i + 1])) {
                is_float = true;
                L->i++;
                while (L->i < L->n && isdigit((unsigned char)L->s[L->i]))
                    L->i++;
            }
            if (L->i < L->n && (L->s[L->i] == 'e' || L->s[L->i] == 'E')) {
                size_t k = L->i + 1;
                if (k < L->n && (L->s[k] == '+' || L->s[k] == '-'))
                    k++;
                if (k < L->n && isdigit((unsigned char)L->s[k])) {
                    is_float = true;
                    L->i = k;
                    while (L->i < L->n && isdigit((unsigned char)L->s[L->i]))
                        L->i++;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t j = st; j < L->i && k + 1 < sizeof num; j++)
                if (L->s[j] != '_')
                    num[k++] = L->s[j];
            num[k] = 0;
            jtoken *t = push(L, is_float ? T_FLOAT : T_INT);
            if (is_float)
                t->f = strtod(num, NULL);
            else
                t->i = strtoll(num, NULL, 10);
        } else if (isalpha(c) || c == '_') {
            const size_t st = L->i;
            while (L->i < L->n && (isalnum((unsigned char)L->s[L->i]) || L->s[L->i] == '_'))
                L->i++;
            push(L, T_NAME)->s = jstr_new(L->a, L->s + st, L->i - st);
        } else {
            const char *op = NULL;
            for (int k = 0; OPS[k] && !op; k++)
                if (at(L, OPS[k]))
                    op = OPS[k];
            if (!op)
                jthrow(L->a->err, L->line, "unexpected character '%c' in a tag", c);
            if (strchr("([{", op[0]) && !op[1])
                depth++;
            else if (strchr(")]}", op[0]) && !op[1] && depth > 0)
                depth--;
            push(L, T_OP)->s = jstr_new(L->a, op, strlen(op));
            advance(L, strlen(op));
        }
    }
}

/* Adds the text [st, en) of the source as a text token, stripped as the tags around it ask. */
static void text(lexer *L, size_t st, size_t en, int line, char next_tag, char next_mod)
{
    const char *s = L->s;
    if (next_mod == '-') {
        while (en > st && isspace((unsigned char)s[en - 1]))
            en--;
    } else if ((next_tag == '%' || next_tag == '#') && next_mod != '+') {
        /* lstrip_blocks: only spaces/tabs between the line's start and the tag */
        size_t k = en;
        while (k > st && (s[k - 1] == ' ' || s[k - 1] == '\t'))
            k--;
        if ((k > st && s[k - 1] == '\n') || (k == st && (st == 0 || s[st - 1] == '\n')))
            en = k;
    }
    if (en > st) {
        jtoken *t = push(L, T_TEXT);
        t->line = line;
        t->s = jstr_new(L->a, s + st, en - st);
    }
}

jtoken *jlex(jarena *a, const char *src, size_t len, size_t *n)
{
    /* Normalize line endings and drop one trailing newline first, as Jinja2 does. */
    char *s = jalloc(a, len + 1);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m > 0 && s[m - 1] == '\n')
        m--;
    lexer L = {.a = a, .s = s, .n = m, .line = 1};
    bool lstrip_next = false; /* the previous tag ended with '-' */
    while (L.i < L.n) {
        if (lstrip_next)
            skip_ws(&L);
        lstrip_next = false;
        const size_t st = L.i;
        const int line = L.line;
        /* find the next tag opening */
        size_t k = st;
        while (k + 1 < L.n && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')))
            k++;
        if (k + 1 >= L.n) { /* no more tags */
            text(&L, st, L.n, line, 0, 0);
            advance(&L, L.n - st);
            break;
        }
        const char tag = s[k + 1];
        const char mod = k + 2 < L.n && (s[k + 2] == '-' || s[k + 2] == '+') ? s[k + 2] : 0;
        text(&L, st, k, line, tag, mod);
        advance(&L, k - st);
        const int tag_line = L.line;
        advance(&L, 2 + (mod != 0));
        char end_mod;
        if (tag == '#') {
            size_t e = L.i;
            while (e + 1 < L.n && !(s[e] == '#' && s[e + 1] == '}'))
                e++;
            if (e + 1 >= L.n)
                jthrow(a->err, tag_line, "unclosed comment");
            end_mod = e > L.i && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
            advance(&L, e + 2 - L.i);
        } else {
            push(&L, tag == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN)->line = tag_line;
            end_mod = inner(&L, tag == '{' ? "}}" : "%}", tag_line);
            push(&L, tag == '{' ? T_VAR_END : T_BLOCK_END);
        }
        if (end_mod == '-')
            lstrip_next = true;
        else if (tag != '{' && end_mod != '+' && L.i < L.n && s[L.i] == '\n')
            advance(&L, 1); /* trim_blocks */
    }
    push(&L, T_EOF);
    *n = L.nt;
    return L.v;
}
