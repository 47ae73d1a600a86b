#include "tool_calls.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "json_fields.h"
#include "text.h"
#include "tokenizer.h"

/* The API's limits on tools: at most 128 a request, names of [a-zA-Z0-9_-]{1,64}. */
#define MAX_TOOLS 128
#define MAX_NAME 64

/* The marker before a family's calls, and the character its JSON starts with. */
static const char *marker_of(enum woolly_chat_tool_syntax s)
{
    switch (s) {
    case WOOLLY_TOOLS_LLAMA3:
        return "<|python_tag|>";
    case WOOLLY_TOOLS_MISTRAL:
        return "[TOOL_CALLS]";
    case WOOLLY_TOOLS_GRANITE:
        return "<|tool_call|>";
    case WOOLLY_TOOLS_HERMES:
    default:
        return "<tool_call>";
    }
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *t, size_t len, size_t i)
{
    while (i < len && is_space(t[i]))
        i++;
    return i;
}

/* The first occurrence of needle in t[0 .. len), or len. */
static size_t find(const char *t, size_t len, const char *needle)
{
    const char *p = len ? memmem(t, len, needle, strlen(needle)) : NULL; /* t may be NULL when empty */
    return p ? (size_t)(p - t) : len;
}

static bool at(const char *t, size_t len, size_t i, const char *s)
{
    const size_t n = strlen(s);
    return i + n <= len && !memcmp(t + i, s, n);
}

/* ---- the request's tools ------------------------------------------------------------------------ */

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static bool valid_name(const char *s, size_t n)
{
    if (n == 0 || n > MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(s[i]))
            return false;
    return true;
}

/* tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}. */
static int check_tool(const json_t *tools, size_t i, srv_error *err)
{
    const json_t *t = json_array_get(tools, i);
    if (!json_is_object(t))
        return srv_fail(err, 400, "invalid_type", "tools", "'tools[%zu]' must be an object, not %s", i,
                        srv_json_type_name(t));
    const json_t *type = json_object_get(t, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
        return srv_fail(err, 400, "invalid_value", "tools", "'tools[%zu].type' must be \"function\"", i);
    const json_t *f = json_object_get(t, "function");
    if (!json_is_object(f))
        return srv_fail(err, 400, "missing_field", "tools", "'tools[%zu].function' must be an object", i);
    const json_t *jname = json_object_get(f, "name"), *desc = json_object_get(f, "description");
    if (!json_is_string(jname))
        return srv_fail(err, 400, jname ? "invalid_type" : "missing_field", "tools",
                        "'tools[%zu].function.name' is required, a string", i);
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return srv_fail(err, 400, "invalid_type", "tools",
                        "'tools[%zu].function.description' must be a string", i);
    const char *name = json_string_value(jname);
    if (!valid_name(name, json_string_length(jname)))
        return srv_fail(err, 400, "invalid_value", "tools",
                        "'tools[%zu].function.name' must be 1 to %d letters, digits, '_' or '-'", i,
                        MAX_NAME);
    for (size_t k = 0; k < i; k++)
        if (json_equal(json_object_get(json_object_get(json_array_get(tools, k), "function"), "name"),
                       json_object_get(f, "name")))
            return srv_fail(err, 400, "invalid_value", "tools",
                            "'tools[%zu]' and 'tools[%zu]' are both named '%s'", k, i, name);
    const json_t *p = json_object_get(f, "parameters");
    if (!p || json_is_null(p))
        return 0;
    if (!json_is_object(p))
        return srv_fail(err, 400, "invalid_type", "tools",
                        "'tools[%zu].function.parameters' must be a JSON Schema object, not %s", i,
                        srv_json_type_name(p));
    char *text = json_dumps(p, JSON_COMPACT);
    if (!text)
        return srv_fail(err, 500, NULL, NULL, "out of memory");
    woolly_error e = {0};
    char *gbnf = woolly_json_schema_to_gbnf(text, strlen(text), &e);
    free(text);
    if (!gbnf)
        return srv_fail(err, 400, "invalid_value", "tools",
                        "'tools[%zu].function.parameters' cannot be used: %s", i, e.msg);
    free(gbnf);
    return 0;
}

/* tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}. */
static int parse_choice(const json_t *body, const json_t *tools, srv_tools *out, const char **named,
                        srv_error *err)
{
    const json_t *c = json_object_get(body, "tool_choice");
    *named = NULL;
    out->choice = out->n ? SRV_TOOL_CHOICE_AUTO : SRV_TOOL_CHOICE_NONE;
    if (!c || json_is_null(c))
        return 0;
    if (json_is_string(c)) {
        const char *s = json_string_value(c);
        if (!strcmp(s, "none"))
            out->choice = SRV_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto"))
            ; /* auto without tools: nothing to call, the output is text */
        else if (!strcmp(s, "required"))
            out->choice = SRV_TOOL_CHOICE_REQUIRED;
        else
            return srv_fail(
                err, 400, "invalid_value", "tool_choice",
                "'tool_choice' must be \"none\", \"auto\", \"required\" or an object naming a function, "
                "not \"%s\"",
                s);
    } else if (json_is_object(c)) {
        const json_t *type = json_object_get(c, "type"), *f = json_object_get(c, "function");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_object(f) ||
            !json_is_string(json_object_get(f, "name")))
            return srv_fail(
                err, 400, "invalid_value", "tool_choice",
                "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": "
                "...}}");
        *named = json_string_value(json_object_get(f, "name"));
        out->choice = SRV_TOOL_CHOICE_NAMED;
    } else {
        return srv_fail(err, 400, "invalid_type", "tool_choice",
                        "invalid type for 'tool_choice': expected a string or an object, got %s",
                        srv_json_type_name(c));
    }
    if (out->choice >= SRV_TOOL_CHOICE_REQUIRED && out->n == 0)
        return srv_fail(err, 400, "invalid_value", "tool_choice",
                        "'tool_choice' asks for a tool call, but the request gives no 'tools'");
    if (*named) {
        for (size_t i = 0; i < out->n; i++)
            if (!strcmp(json_string_value(
                            json_object_get(json_object_get(json_array_get(tools, i), "function"), "name")),
                        *named))
                return 0;
        return srv_fail(err, 400, "invalid_value", "tool_choice",
                        "'tool_choice' names the function '%s', which is not one of 'tools'", *named);
    }
    return 0;
}

int srv_tools_parse(const json_t *body, enum woolly_chat_tool_syntax syntax, bool named, srv_tools *out,
                    woolly_grammar **grammar, srv_error *err)
{
    *out = (srv_tools){.syntax = syntax, .parallel = true};
    *grammar = NULL;
    const int given = srv_json_bool(body, "parallel_tool_calls", &out->parallel, err);
    if (given < 0)
        return -1;
    /* Absent, the API's default lets a turn hold several calls, and they are parsed; but a grammar that
     * lets them repeat is asked for explicitly: held to it, a model that does not know when to stop
     * chains calls (stories260K does, every time). */
    out->parallel_required = given == 1 && out->parallel;
    const json_t *tools = json_object_get(body, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools))
            return srv_fail(err, 400, "invalid_type", "tools",
                            "invalid type for 'tools': expected an array, got %s", srv_json_type_name(tools));
        if (json_array_size(tools) > MAX_TOOLS)
            return srv_fail(err, 400, "invalid_value", "tools",
                            "'tools' has %zu tools; at most %d are allowed", json_array_size(tools),
                            MAX_TOOLS);
        const size_t n = json_array_size(tools);
        if (n && !(out->texts = calloc(n, sizeof *out->texts)))
            return srv_fail(err, 500, NULL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (check_tool(tools, i, err))
                return -1;
            if (!(out->texts[i] = json_dumps(json_array_get(tools, i), JSON_COMPACT)))
                return srv_fail(err, 500, NULL, NULL, "out of memory");
            out->n++;
        }
    }
    const char *only;
    if (parse_choice(body, tools, out, &only, err))
        return -1;
    if (out->choice < SRV_TOOL_CHOICE_REQUIRED)
        return 0;
    char why[512];
    char *gbnf = srv_tool_call_gbnf(syntax, named, tools, only, out->parallel_required, why, sizeof why);
    if (!gbnf)
        return srv_fail(err, 400, "invalid_value", "tools", "the tools cannot be held to a call: %s", why);
    *grammar = woolly_grammar_open_gbnf(gbnf, strlen(gbnf));
    free(gbnf);
    if (!*grammar)
        return srv_fail(err, 400, "invalid_value", "tools", "the tools cannot be held to a call: %s",
                        woolly_last_error());
    return 0;
}

void srv_tools_free(srv_tools *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->texts[i]);
    free(t->texts);
    *t = (srv_tools){0};
}

/* ---- the grammar of a call ---------------------------------------------------------------------- */

/* Moves a parameter schema's $defs (and definitions) to the call schema's root, where its "#/$defs/..."
 * references resolve once the schema is nested. A name two tools define differently is an error. */
static int hoist_defs(json_t *root, json_t *params, char *err, size_t err_cap)
{
    static const char *const KEYS[] = {"$defs", "definitions"};
    for (int k = 0; k < 2; k++) {
        json_t *defs = json_object_get(params, KEYS[k]);
        if (!json_is_object(defs))
            continue;
        json_t *into = json_object_get(root, KEYS[k]);
        if (!into) {
            json_object_set_new(root, KEYS[k], json_object());
            into = json_object_get(root, KEYS[k]);
        }
        const char *name;
        json_t *v;
        json_object_foreach(defs, name, v)
        {
            const json_t *had = json_object_get(into, name);
            if (had && !json_equal(had, v)) {
                snprintf(err, err_cap, "two tools define '%s/%s' differently", KEYS[k], name);
                return -1;
            }
            json_object_set(into, name, v);
        }
        json_object_del(params, KEYS[k]);
    }
    return 0;
}

/* The JSON Schema of one call of the tools (the only one when `only`), as the syntax writes it. */
static json_t *call_schema(enum woolly_chat_tool_syntax syntax, const json_t *tools, const char *only,
                           char *err, size_t err_cap)
{
    json_t *root = json_object(), *alts = json_array();
    const char *args_key = syntax == WOOLLY_TOOLS_LLAMA3 ? "parameters" : "arguments";
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *f = json_object_get(json_array_get(tools, i), "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (only && strcmp(name, only))
            continue;
        const json_t *p = json_object_get(f, "parameters");
        json_t *params = json_is_object(p) ? json_deep_copy(p)
                                           : json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                                       "additionalProperties", 0);
        if (!params || hoist_defs(root, params, err, err_cap)) {
            json_decref(params);
            json_decref(root);
            json_decref(alts);
            return NULL;
        }
        json_array_append_new(alts, json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s], s:b}", "type", "object",
                                              "properties", "name", "const", name, args_key, params,
                                              "required", "name", args_key, "additionalProperties", 0));
    }
    if (json_array_size(alts) == 1)
        json_object_update(root, json_array_get(alts, 0));
    else
        json_object_set(root, "anyOf", alts);
    json_decref(alts);
    return root;
}

/* The GBNF of the JSON Schema `schema`, or NULL with a message in err. */
static char *schema_gbnf(const json_t *schema, char *err, size_t err_cap)
{
    char *text = json_dumps(schema, JSON_COMPACT);
    if (!text) {
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    woolly_error e = {0};
    char *gbnf = woolly_json_schema_to_gbnf(text, strlen(text), &e);
    free(text);
    if (!gbnf)
        snprintf(err, err_cap, "%s", e.msg);
    return gbnf;
}

static bool is_rule_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Appends gbnf with `prefix` before every rule name, where it is defined and where it is used (quoted
 * strings, character classes and comments as they are; a repetition's {m,n} holds no name): the
 * grammars of several schemas side by side in one, their rules apart. 0 or -1 (out of memory). */
static int put_prefixed(srv_buf *b, const char *gbnf, const char *prefix)
{
    for (const char *p = gbnf; *p;) {
        const char *from = p;
        if (*p == '"' || *p == '[') { /* to the closing quote or bracket, past escapes */
            const char close = *p == '"' ? '"' : ']';
            for (p++; *p && *p != close; p++)
                if (*p == '\\' && p[1])
                    p++;
            p += *p != 0;
        } else if (*p == '#') {
            while (*p && *p != '\n')
                p++;
        } else if (*p == '{') {
            while (*p && *p != '}')
                p++;
            p += *p != 0;
        } else if (is_rule_char(*p)) {
            while (is_rule_char(*p))
                p++;
            if (srv_buf_append(b, prefix, strlen(prefix)))
                return -1;
        } else {
            p++;
        }
        if (srv_buf_append(b, from, (size_t)(p - from)))
            return -1;
    }
    return 0;
}

/* Mistral's newer calls: `name{...}`, a tool's name and then its arguments, each tool's parameter schema
 * compiled on its own (rules prefixed t<i>-) and chosen by the name. */
static char *named_call_gbnf(const json_t *tools, const char *only, bool parallel, char *err, size_t err_cap)
{
    srv_buf b = {0}, call = {0};
    bool ok = !srv_buf_printf(&call, "call ::= ");
    size_t n = 0;
    for (size_t i = 0; ok && i < json_array_size(tools); i++) {
        const json_t *f = json_object_get(json_array_get(tools, i), "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (only && strcmp(name, only))
            continue;
        const json_t *p = json_object_get(f, "parameters");
        json_t *empty = json_is_object(p) ? NULL
                                          : json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                                      "additionalProperties", 0);
        char *gbnf = schema_gbnf(empty ? empty : p, err, err_cap), prefix[32];
        json_decref(empty);
        if (!gbnf) {
            srv_buf_free(&b);
            srv_buf_free(&call);
            return NULL;
        }
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        /* names are [a-zA-Z0-9_-]: nothing to escape in the literal */
        ok = !put_prefixed(&b, gbnf, prefix) &&
             !srv_buf_printf(&call, "%s\"%s\" %sroot", n++ ? " | " : "", name, prefix);
        free(gbnf);
    }
    ok = ok && !srv_buf_printf(&call, "\n") && !srv_buf_append(&b, call.p, call.len) &&
         !srv_buf_printf(&b, parallel ? "root ::= call{1,%d}\n" : "root ::= call\n", SRV_MAX_PARALLEL_CALLS);
    srv_buf_free(&call);
    if (!ok) {
        srv_buf_free(&b);
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    return b.p;
}

char *srv_tool_call_gbnf(enum woolly_chat_tool_syntax syntax, bool named, const json_t *tools,
                         const char *only, bool parallel, char *err, size_t err_cap)
{
    if (named && syntax == WOOLLY_TOOLS_MISTRAL)
        return named_call_gbnf(tools, only, parallel, err, err_cap);
    json_t *schema = call_schema(syntax, tools, only, err, err_cap);
    if (!schema)
        return NULL;
    char *gbnf = schema_gbnf(schema, err, err_cap);
    json_decref(schema);
    if (!gbnf)
        return NULL;
    /* The compiler's start rule comes last ("root ::= rN"): it becomes the call inside the syntax's
     * frame. The markers that are control tokens are left out: a grammar spells text, and the parser
     * takes the calls without them. */
    const size_t len = strlen(gbnf);
    char *last = NULL;
    for (char *p = strstr(gbnf, "root ::= "); p; p = strstr(p + 1, "root ::= "))
        if (p == gbnf || p[-1] == '\n')
            last = p;
    static const char *const FRAMES[2][4] = {
        {
            [WOOLLY_TOOLS_HERMES] = "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n",
            [WOOLLY_TOOLS_LLAMA3] = "root ::= call\n",
            [WOOLLY_TOOLS_MISTRAL] = "root ::= \"[\" call \"]\"\n",
            [WOOLLY_TOOLS_GRANITE] = "root ::= \"[\" call \"]\"\n",
        },
        {
            /* parallel: the blocks or array items repeat (SRV_MAX_PARALLEL_CALLS in all); Llama 3's
             * templates document one call a turn */
            [WOOLLY_TOOLS_HERMES] = "root ::= tagged (\"\\n\" tagged){0,7}\n"
                                    "tagged ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n",
            [WOOLLY_TOOLS_LLAMA3] = "root ::= call\n",
            [WOOLLY_TOOLS_MISTRAL] = "root ::= \"[\" call (\", \" call){0,7} \"]\"\n",
            [WOOLLY_TOOLS_GRANITE] = "root ::= \"[\" call (\", \" call){0,7} \"]\"\n",
        },
    };
    _Static_assert(SRV_MAX_PARALLEL_CALLS == 8, "the frames repeat a call {0,7} times after the first");
    const char *frame = FRAMES[parallel][(unsigned)syntax < 4 ? syntax : 0];
    char *out = last ? malloc(len + strlen(frame) + 1) : NULL;
    if (!out) {
        free(gbnf);
        snprintf(err, err_cap, last ? "out of memory" : "the schema compiler wrote no start rule");
        return NULL;
    }
    memcpy(out, gbnf, len + 1);
    memcpy(out + (last - gbnf), "call", 4);
    strcat(out, frame);
    free(gbnf);
    return out;
}

/* ---- parsing calls back ------------------------------------------------------------------------- */

/* "call_" and 24 hex digits, unique in this process and unlikely to repeat across restarts; for Mistral,
 * whose templates refuse any other id when the call comes back in a conversation, 9 letters and digits. */
static json_t *fresh_id(enum woolly_chat_tool_syntax syntax)
{
    static atomic_ullong counter;
    const unsigned long long n = atomic_fetch_add(&counter, 1) + 1;
    unsigned long long x = (unsigned long long)time(NULL) * 0x9E3779B97F4A7C15ull ^ n;
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
    char id[40];
    if (syntax == WOOLLY_TOOLS_MISTRAL) {
        static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        unsigned long long y = x ^ (n << 40); /* the counter's low bits decide the last characters */
        for (int i = 8; i >= 0; i--, y /= 62)
            id[i] = ALNUM[y % 62];
        id[9] = 0;
    } else {
        snprintf(id, sizeof id, "call_%016llx%08llx", x, n & 0xFFFFFFFFull);
    }
    return json_string(id);
}

static bool is_json_text(const char *s, size_t n)
{
    json_t *v = memchr(s, 0, n) ? NULL : json_loadb(s, n, JSON_DECODE_ANY, NULL);
    json_decref(v);
    return v != NULL;
}

/* One call object {"name", "arguments" | "parameters"} as the API's tool call; NULL if it is not one. */
static json_t *api_call(enum woolly_chat_tool_syntax syntax, const json_t *o)
{
    const json_t *name = json_object_get(o, "name");
    if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0)
        return NULL;
    const json_t *args = json_object_get(o, "arguments");
    if (!args)
        args = json_object_get(o, "parameters");
    /* Some models write the arguments as a string holding their JSON text: that text, as written. A string
     * that holds none stays the string, written as JSON: arguments are a JSON text, as clients parse them. */
    char *text;
    if (!args)
        text = strdup("{}");
    else if (json_is_string(args) && is_json_text(json_string_value(args), json_string_length(args)))
        text = strdup(json_string_value(args));
    else
        text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return NULL;
    json_t *c = json_pack("{s:o, s:s, s:{s:O, s:s}}", "id", fresh_id(syntax), "type", "function", "function",
                          "name", name, "arguments", text);
    free(text);
    return c;
}

/* The JSON value at t[*i ..): advances *i past it; NULL if none parses there. */
static json_t *value_at(const char *t, size_t len, size_t *i)
{
    json_error_t e;
    json_t *v = json_loadb(t + *i, len - *i, JSON_DISABLE_EOF_CHECK, &e);
    if (v)
        *i += (size_t)e.position;
    return v;
}

static bool append_call(enum woolly_chat_tool_syntax syntax, json_t *calls, const json_t *o)
{
    json_t *c = api_call(syntax, o);
    return c && !json_array_append_new(calls, c);
}

/* Hermes: one or more <tool_call>{...}</tool_call>, space between them; the last close tag may be
 * missing (the output ended there). */
static bool parse_tagged(const char *t, size_t len, size_t i, json_t *calls)
{
    while ((i = skip_space(t, len, i)) < len) {
        if (!at(t, len, i, "<tool_call>"))
            return false;
        i = skip_space(t, len, i + strlen("<tool_call>"));
        json_t *o = value_at(t, len, &i);
        const bool ok = o && append_call(WOOLLY_TOOLS_HERMES, calls, o);
        json_decref(o);
        if (!ok)
            return false;
        i = skip_space(t, len, i);
        if (at(t, len, i, "</tool_call>"))
            i += strlen("</tool_call>");
        else if (i < len)
            return false;
    }
    return true;
}

/* Llama 3: JSON objects, separated by space or ';'. */
static bool parse_objects(const char *t, size_t len, size_t i, json_t *calls)
{
    while (i < len) {
        if (is_space(t[i]) || t[i] == ';') {
            i++;
            continue;
        }
        if (t[i] != '{')
            return false;
        json_t *o = value_at(t, len, &i);
        const bool ok = o && append_call(WOOLLY_TOOLS_LLAMA3, calls, o);
        json_decref(o);
        if (!ok)
            return false;
    }
    return true;
}

/* Mistral and Granite: one JSON array of call objects. */
static bool parse_array(enum woolly_chat_tool_syntax syntax, const char *t, size_t len, size_t i,
                        json_t *calls)
{
    i = skip_space(t, len, i);
    if (i >= len || t[i] != '[')
        return false;
    json_t *a = value_at(t, len, &i);
    bool ok = json_is_array(a) && json_array_size(a) > 0;
    for (size_t k = 0; ok && k < json_array_size(a); k++)
        ok = append_call(syntax, calls, json_array_get(a, k));
    json_decref(a);
    return ok && skip_space(t, len, i) == len;
}

/* Mistral's newer templates (v11 and on): each call its name, then optionally [CALL_ID] and an id, then
 * [ARGS] and the arguments object; [TOOL_CALLS] before each. Those markers are control tokens: the
 * engine writes them out (srv_tool_marker_tokens), but a vocabulary without them as tokens leaves
 * `name{...}` alone, which is taken too. The whole rest of the output must be calls. */
static bool parse_named(const char *t, size_t len, size_t i, json_t *calls)
{
    while ((i = skip_space(t, len, i)) < len) {
        if (at(t, len, i, "[TOOL_CALLS]"))
            i = skip_space(t, len, i + strlen("[TOOL_CALLS]"));
        const size_t name = i;
        while (i < len && is_name_char(t[i]))
            i++;
        if (!valid_name(t + name, i - name))
            return false;
        const size_t name_len = i - name;
        if (at(t, len, i, "[CALL_ID]")) /* the model's own id: the API's ids are the server's */
            for (i += strlen("[CALL_ID]"); i < len && is_name_char(t[i]);)
                i++;
        if (at(t, len, i, "[ARGS]"))
            i += strlen("[ARGS]");
        if (i >= len || t[i] != '{')
            return false;
        json_t *args = value_at(t, len, &i);
        json_t *o = args ? json_pack("{s:s%, s:o}", "name", t + name, name_len, "arguments", args) : NULL;
        const bool ok = o && append_call(WOOLLY_TOOLS_MISTRAL, calls, o);
        json_decref(o);
        if (!ok)
            return false;
    }
    return true;
}

/* Mistral: the v3 array, or the newer named calls. */
static bool parse_mistral(const char *t, size_t len, size_t i, json_t *calls)
{
    i = skip_space(t, len, i);
    if (i < len && t[i] == '[' && !at(t, len, i, "[TOOL_CALLS]"))
        return parse_array(WOOLLY_TOOLS_MISTRAL, t, len, i, calls);
    return parse_named(t, len, i, calls);
}

/* Whether a syntax's calls may start at t[i] without their marker (it decoded to no text): Llama 3's
 * object, the arrays of Mistral and Granite, Mistral's named calls. */
static bool unmarked_start(enum woolly_chat_tool_syntax syntax, const char *t, size_t len, size_t i)
{
    if (i >= len)
        return false;
    if (syntax == WOOLLY_TOOLS_LLAMA3)
        return t[i] == '{';
    return t[i] == '[' || (syntax == WOOLLY_TOOLS_MISTRAL && is_name_char(t[i]));
}

json_t *srv_tool_calls_parse(enum woolly_chat_tool_syntax syntax, const char *text, size_t len, bool parallel,
                             size_t *content_end)
{
    const char *marker = marker_of(syntax);
    size_t start = find(text, len, marker), from;
    if (start < len) {
        from = syntax == WOOLLY_TOOLS_HERMES ? start : start + strlen(marker);
    } else if (syntax == WOOLLY_TOOLS_HERMES) {
        return NULL;
    } else { /* no marker (a control token that decoded to nothing): the whole output is the calls */
        start = from = skip_space(text, len, 0);
        if (!unmarked_start(syntax, text, len, from))
            return NULL;
    }
    json_t *calls = json_array();
    if (!calls)
        return NULL;
    bool ok;
    if (syntax == WOOLLY_TOOLS_HERMES)
        ok = parse_tagged(text, len, from, calls);
    else if (syntax == WOOLLY_TOOLS_LLAMA3)
        ok = parse_objects(text, len, from, calls);
    else if (syntax == WOOLLY_TOOLS_MISTRAL)
        ok = parse_mistral(text, len, from, calls);
    else
        ok = parse_array(syntax, text, len, from, calls);
    if (!ok || json_array_size(calls) == 0) {
        json_decref(calls);
        return NULL;
    }
    if (!parallel) /* the model wrote several anyway: the request asked for one */
        while (json_array_size(calls) > 1)
            json_array_remove(calls, json_array_size(calls) - 1);
    while (start > 0 && is_space(text[start - 1]))
        start--;
    *content_end = start;
    return calls;
}

/* Whether t[i ..) is a prefix of s or begins with s. */
static bool at_or_cut(const char *t, size_t len, size_t i, const char *s)
{
    const size_t n = strlen(s), m = len - i < n ? len - i : n;
    return !memcmp(t + i, s, m);
}

size_t srv_tool_calls_content_prefix(enum woolly_chat_tool_syntax syntax, const char *text, size_t len)
{
    if (syntax != WOOLLY_TOOLS_HERMES) { /* calls without their marker are the whole output */
        size_t i = skip_space(text, len, 0);
        if (i == len || (syntax == WOOLLY_TOOLS_LLAMA3 ? text[i] == '{' : text[i] == '['))
            return 0;
        if (syntax == WOOLLY_TOOLS_MISTRAL) { /* a name, held until what follows it shows it is not a call */
            while (i < len && is_name_char(text[i]))
                i++;
            if (i == len || text[i] == '{' || at_or_cut(text, len, i, "[ARGS]") ||
                at_or_cut(text, len, i, "[CALL_ID]"))
                return 0;
        }
    }
    const char *marker = marker_of(syntax);
    const size_t m = strlen(marker), at_marker = find(text, len, marker);
    if (at_marker < len)
        return at_marker;
    for (size_t k = m - 1 < len ? m - 1 : len; k > 0; k--) /* the output ends with the marker's beginning */
        if (!memcmp(text + len - k, marker, k))
            return len - k;
    return len;
}

int srv_tool_marker_tokens(enum woolly_chat_tool_syntax syntax, const woolly_tokenizer *t, int32_t *ids,
                           int cap)
{
    static const char *const MARKERS[][4] = {
        [WOOLLY_TOOLS_HERMES] = {"<tool_call>", "</tool_call>"},
        [WOOLLY_TOOLS_LLAMA3] = {"<|python_tag|>"},
        [WOOLLY_TOOLS_MISTRAL] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"},
        [WOOLLY_TOOLS_GRANITE] = {"<|tool_call|>"},
    };
    int n = 0;
    if (!t || (unsigned)syntax >= sizeof MARKERS / sizeof MARKERS[0])
        return 0;
    for (int k = 0; k < 4 && MARKERS[syntax][k] && n < cap; k++) {
        const int32_t id = woolly_tokenizer_find(t, MARKERS[syntax][k]);
        if (id >= 0 && woolly_token_bytes(t, id, NULL, 0) == 0) /* a control token: it decodes to nothing */
            ids[n++] = id;
    }
    return n;
}
