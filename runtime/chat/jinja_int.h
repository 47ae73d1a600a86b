/* The Jinja interpreter's inside: errors, the arena, values, tokens and the syntax tree. */
#ifndef WOOLLY_JINJA_INT_H
#define WOOLLY_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits that keep a hostile template finite. A chat prompt is at most a few MiB of text. */
enum {
    JINJA_MAX_DEPTH = 96,       /* nesting of expressions and statements while parsing */
    JINJA_MAX_CALL_DEPTH = 48,  /* macro calls within macro calls */
    JINJA_MAX_OUTPUT = 16 << 20 /* bytes of rendered text (and of any one string) */
};
#define JINJA_MAX_STEPS 5000000L      /* nodes evaluated in one render: well under a second */
#define JINJA_MAX_MEMORY (256L << 20) /* bytes an arena may hold */

/* An error unwinds to the entry point (parse or render) by longjmp; the arena frees everything. */
typedef struct jerr {
    jmp_buf jb;
    char msg[512];
} jerr;
_Noreturn void jthrow(jerr *e, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct jblock jblock;
typedef struct jarena {
    jblock *head;
    size_t total;
    jerr *err;
} jarena;
void *jalloc(jarena *a, size_t n); /* zeroed; throws when the arena is over its limit */
void jarena_free(jarena *a);

/* ---- values ---- */
enum jtype { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC, JV_LOOP };

typedef struct jstr {
    size_t len;
    char p[]; /* NUL-terminated */
} jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jv {
    enum jtype t;
    bool safe; /* JV_STR: a Markup (`|safe`, `|escape`): adding a plain string to it HTML-escapes that */
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jfunc *fn;
        jloop *loop;
    };
} jv;

struct jlist { /* lists are shared and mutable, as in Python (list.append) */
    size_t n, cap;
    jv *v;
    bool tuple; /* printed as a Python tuple: (a, b) (dict items, tuple literals) */
    bool group; /* a tuple of groupby: (grouper, list), its items also named so */
    /* What Jinja2's map, select, reject, selectattr, rejectattr, unique, items and reverse return: a
     * Python generator or iterator, not a list. It iterates once (then it is empty), is always true, and
     * has no length, no JSON and no printable text (Jinja2 prints its address). */
    bool generator, consumed;
};
struct jdict { /* insertion-ordered */
    size_t n, cap;
    jv *k, *v;
};
struct jloop { /* the `loop` variable of a for loop */
    size_t index0, length;
    jv prev, next;
    bool has_prev, has_next;
};

static inline jv jv_undef(void)
{
    return (jv){.t = JV_UNDEF};
}
static inline jv jv_none(void)
{
    return (jv){.t = JV_NONE};
}
static inline jv jv_bool(bool b)
{
    return (jv){.t = JV_BOOL, .b = b};
}
static inline jv jv_int(int64_t i)
{
    return (jv){.t = JV_INT, .i = i};
}
static inline jv jv_float(double f)
{
    return (jv){.t = JV_FLOAT, .f = f};
}

jstr *jstr_new(jarena *a, const char *p, size_t len); /* p NULL: len bytes for the caller to fill */
jv jv_str(jarena *a, const char *p, size_t len);
jv jv_cstr(jarena *a, const char *s);
jv jv_list(jarena *a);
jv jv_dict(jarena *a);
void jlist_push(jarena *a, jlist *l, jv v);
void jdict_set(jarena *a, jdict *d, jv k, jv v);
jv *jdict_find(const jdict *d, jv k); /* NULL when absent */
jv jdict_get_c(const jdict *d, const char *key);

bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);
int jv_compare(jerr *e, int line, jv a, jv b); /* <0, 0, >0; throws for values without an order */
const char *jv_type_name(jv v);
static inline bool jv_is_generator(jv v)
{
    return v.t == JV_LIST && v.l->generator;
}
/* Hugging Face's ImmutableSandboxedEnvironment refuses the methods that change a list or a dict
 * (list.append, dict.update, ...): true for those names. */
bool jsandbox_unsafe_method(jv obj, const char *name);
/* The items a loop or a sequence filter walks: a list's items, a dict's keys, a string's characters
 * (UTF-8 sequences), none for undefined and none; NULL for a value that is not iterable. */
const jlist *jv_items(jarena *a, jv v);

/* Growable text in the arena. */
typedef struct jbuf {
    jarena *a;
    char *p;
    size_t len, cap, limit;
} jbuf;
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);
/* Python's str() of a value (what {{ }} prints), and repr() (inside lists and dicts). */
void jv_write_str(jbuf *b, jv v);
void jv_write_repr(jbuf *b, jv v);
jstr *jv_to_str(jarena *a, jv v);
/* markupsafe's escape(): & < > ' " as HTML entities. */
jstr *jhtml_escape(jarena *a, const jstr *s);
/* Python's json.dumps(v, ensure_ascii=False, indent=indent (<0: none), sort_keys=sort_keys). */
void jv_write_json(jerr *e, jbuf *b, jv v, int indent, bool sort_keys, int depth);
void jfmt_float(char *out, size_t cap, double f);
/* Parses JSON text into values; throws on malformed text. */
jv jjson_parse(jarena *a, const char *text);

/* ---- tokens ---- */
enum jtok {
    T_EOF,
    T_TEXT,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STR,
    T_INT,
    T_FLOAT,
    T_OP,
};
typedef struct jtoken {
    enum jtok type;
    int line;
    jstr *s; /* text, name, string literal (decoded), operator */
    int64_t i;
    double f;
} jtoken;
/* Splits the source into tokens, applying whitespace control; the array ends with T_EOF. */
jtoken *jlex(jarena *a, const char *src, size_t len, size_t *n);

/* ---- syntax tree ---- */
enum jnode_kind {
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SET_BLOCK,
    N_MACRO,
    N_CALL_BLOCK,
    N_FILTER_BLOCK,
    N_BREAK,
    N_CONTINUE,
    N_BLOCK, /* a body run as is ({% generation %}) */
    /* expressions */
    E_LIT,
    E_NAME,
    E_LIST,
    E_DICT,
    E_ATTR,
    E_ITEM,
    E_SLICE,
    E_CALL,
    E_FILTER,
    E_TEST,
    E_NEG,
    E_POS,
    E_NOT,
    E_BINARY,
    E_AND,
    E_OR,
    E_COND,
};
/* Binary operators (E_BINARY's op). */
enum {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_CONCAT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOT_IN
};

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    size_t n, cap;
} jnodes;
struct jnode {
    enum jnode_kind kind;
    int line, op;
    bool negate;      /* E_TEST: `is not` */
    const char *name; /* E_NAME, E_ATTR, E_FILTER, E_TEST, N_MACRO, N_SET(_BLOCK) target, N_FILTER_BLOCK */
    const char *attr; /* N_SET: `ns.attr` target */
    jv lit;           /* E_LIT, N_TEXT */
    jnode *a, *b, *c; /* operands; N_IF/N_FOR: a the condition or iterable, b the loop filter */
    jnodes args;      /* call/filter/test arguments, list and dict items (key, value pairs), body */
    jnodes kwargs;    /* keyword argument values (names in kwnames); N_MACRO: parameter defaults */
    const char **kwnames;
    jnodes body, else_body;
    const char **targets; /* N_FOR, N_SET: the names assigned (tuple unpacking: several); N_MACRO: params */
    size_t n_targets;
};
void jnodes_push(jarena *a, jnodes *l, jnode *n);

jnodes jparse(jarena *a, jtoken *toks, size_t n);

/* ---- evaluation ---- */
typedef struct jframe jframe;
typedef struct jstate {
    jarena *a;
    jerr *err;
    jbuf *out;
    long steps;
    int call_depth;
    jframe *globals;
} jstate;

struct jfunc {
    enum { F_MACRO, F_BUILTIN } kind;
    const char *name;
    const jnode *macro;
    jframe *closure;
    const jnode *caller_body; /* the {% call %} body this macro invocation sees as caller() */
    jframe *caller_frame;
};

/* A call's arguments, evaluated. */
typedef struct jargs {
    jv *pos;
    size_t n_pos;
    const char **kw;
    jv *kwv;
    size_t n_kw;
} jargs;
jv jargs_get(const jargs *a, size_t pos, const char *kw, jv def); /* positional `pos` or keyword `kw` */

jv jeval_render(jstate *s, const jnodes *body, jframe *globals);
jframe *jframe_globals(jstate *s, jv ctx); /* the variables of the render context */
jv jcall_value(jstate *s, int line, jv fn, const jargs *args);
jv jattr(jstate *s, jv obj, jv key); /* obj.key / obj[key]: undefined when absent */

/* Built-ins (jinja_builtins.c, jinja_methods.c): all throw on bad arguments. */
jv jfilter(jstate *s, int line, const char *name, jv in, const jargs *args);
bool jtest(jstate *s, int line, const char *name, jv in, const jargs *args);
jv jmethod(jstate *s, int line, jv obj, const char *name, const jargs *args);
jv jglobal_call(jstate *s, int line, const char *name, const jargs *args);
bool jglobal_exists(const char *name);

/* UTF-8 helpers for Python's code-point semantics (len, slicing). */
size_t jutf8_len(const char *p, size_t n);
size_t jutf8_offset(const char *p, size_t n, size_t cp); /* byte offset of code point cp (clamped) */

#endif
