/* The interpreter's entry points: parse and render, each inside its own error scope (setjmp) and
 * arena. */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

struct jinja_template {
    jarena arena;
    jerr err; /* the arena's error target while parsing */
    jnodes body;
};

static void copy_err(char *err, size_t cap, const char *msg)
{
    if (err && cap)
        snprintf(err, cap, "%s", msg);
}

jinja_template *jinja_parse(const char *src, size_t len, char *err, size_t err_cap)
{
    jinja_template *volatile t = calloc(1, sizeof *t);
    if (!t) {
        copy_err(err, err_cap, "out of memory");
        return NULL;
    }
    t->arena.err = &t->err;
    if (setjmp(t->err.jb)) {
        copy_err(err, err_cap, t->err.msg);
        jarena_free(&t->arena);
        free(t);
        return NULL;
    }
    size_t n;
    jtoken *toks = jlex(&t->arena, src ? src : "", src ? len : 0, &n);
    t->body = jparse(&t->arena, toks, n);
    return t;
}

void jinja_free(jinja_template *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}

char *jinja_render(const jinja_template *t, const char *context_json, size_t *len, char *err, size_t err_cap)
{
    jerr e;
    jarena a = {.err = &e};
    /* volatile: read after a longjmp */
    char *volatile result = NULL;
    if (setjmp(e.jb)) {
        copy_err(err, err_cap, e.msg);
        jarena_free(&a);
        return NULL;
    }
    jstate s = {.a = &a, .err = &e};
    const jv ctx = jjson_parse(&a, context_json);
    if (ctx.t != JV_DICT)
        jthrow(&e, 0, "the render context is not a JSON object");
    s.globals = jframe_globals(&s, ctx);
    jbuf out = {.a = &a, .limit = JINJA_MAX_OUTPUT};
    s.out = &out;
    jeval_render(&s, &t->body, s.globals);
    result = malloc(out.len + 1);
    if (!result)
        jthrow(&e, 0, "out of memory");
    if (out.len)
        memcpy(result, out.p, out.len);
    result[out.len] = 0;
    if (len)
        *len = out.len;
    jarena_free(&a);
    return result;
}
