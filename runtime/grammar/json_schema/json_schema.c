/* JSON Schema to GBNF: the subset OpenAI's structured outputs document (type, properties, required,
 * additionalProperties, items, minItems, maxItems, enum, const, anyOf, $ref to $defs/definitions), plus
 * annotations that do not constrain (title, description, ...), and an integer's minimum and maximum where
 * its bounded digits already keep them (zod writes the safe-integer range on every integer). Any other
 * keyword, or a tighter bound, is an error naming it, so a schema is never silently loosened.
 *
 * Objects list their properties in the schema's order, each optional one may be left out; properties
 * not listed are never generated (a subset of what additionalProperties allows, so every output still
 * validates). White space between tokens is bounded, and so are the digits of a number and the nesting
 * of values the schema leaves free (JSON_ANY_DEPTH), so that a model cannot stall inside them. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

#define SCHEMA_MAX_DEPTH 64

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void put(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t c = b->cap ? b->cap * 2 : 1024;
        while (c < b->n + (size_t)k + 1)
            c *= 2;
        char *q = realloc(b->s, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = c;
    }
}

/* Bytes as a GBNF literal's contents. */
static void put_literal(sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            put(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            put(b, "\\x%02X", c);
        else
            put(b, "%c", c);
    }
}

typedef struct compiler {
    json_t *root;
    sbuf out;
    uint32_t n_rules;
    json_t *defs_done; /* ref string -> rule number */
    woolly_error *err;
    bool failed;
    bool used_value;
} compiler;

__attribute__((format(printf, 2, 3))) static void cfail(compiler *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = true;
    char msg[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    woolly_fail(c->err, "json_schema: %s", msg);
}

static const char *const PRIMITIVES =
    "ws ::= [ \\t\\n]{0,2}\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,14})\n"
    "number ::= integer (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n";

/* Any JSON value (`value`, `object`, `array`): containers nest at most JSON_ANY_DEPTH deep, so that a
 * model choosing at random (which opens containers about as often as it closes them) still finishes. */
#define JSON_ANY_DEPTH 4

static void put_any_value(sbuf *b)
{
    for (int d = 0; d <= JSON_ANY_DEPTH; d++) {
        char sfx[16] = "", next[16];
        if (d)
            snprintf(sfx, sizeof sfx, "-%d", d);
        snprintf(next, sizeof next, "-%d", d + 1);
        if (d == JSON_ANY_DEPTH) {
            put(b, "value%s ::= string | number | boolean | null\n", sfx);
            continue;
        }
        put(b, "value%s ::= object%s | array%s | string | number | boolean | null\n", sfx, sfx, sfx);
        put(b, "object%s ::= \"{\" ws (member%s (ws \",\" ws member%s)*)? ws \"}\"\n", sfx, sfx, sfx);
        put(b, "member%s ::= string ws \":\" ws value%s\n", sfx, next);
        put(b, "array%s ::= \"[\" ws (value%s (ws \",\" ws value%s)*)? ws \"]\"\n", sfx, next, next);
    }
}

static uint32_t gen(compiler *c, json_t *s, const char *path, int depth);

static uint32_t new_rule(compiler *c)
{
    return c->n_rules++;
}

static void check_keywords(compiler *c, json_t *s, const char *path)
{
    static const char *const known[] = {"type",        "properties", "required",    "additionalProperties",
                                        "items",       "minItems",   "maxItems",    "enum",
                                        "const",       "anyOf",      "$ref",        "$defs",
                                        "definitions", "title",      "description", "$schema",
                                        "$id",         "$comment",   "default",     "examples",
                                        "strict",      "name",       "minimum",     "maximum",
                                        NULL};
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v)
    {
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++)
            ok = !strcmp(key, known[i]);
        if (!ok) {
            cfail(c, "unsupported keyword '%s' at %s", key, path);
            return;
        }
    }
}

/* A JSON value as a literal rule body. */
static void put_json_literal(compiler *c, json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text) {
        c->out.oom = true;
        return;
    }
    put(&c->out, "\"");
    put_literal(&c->out, text, strlen(text));
    put(&c->out, "\"");
    free(text);
}

static uint32_t gen_object(compiler *c, json_t *s, const char *path, int depth)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        cfail(c, "'properties' at %s must be an object", path);
    if (req && !json_is_array(req))
        cfail(c, "'required' at %s must be an array of names", path);
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        cfail(c, "'additionalProperties' at %s must be a boolean or a schema", path);
    if (c->failed)
        return 0;
    size_t n = props ? json_object_size(props) : 0;
    /* Every name in required must be a property, or no output could satisfy it. */
    size_t i;
    json_t *name;
    json_array_foreach(req, i, name)
    {
        if (!json_is_string(name)) {
            cfail(c, "'required' at %s must list property names (strings)", path);
            return 0;
        }
        if (!json_object_get(props, json_string_value(name))) {
            cfail(c, "required property '%s' at %s is not in 'properties' (it cannot be generated)",
                  json_string_value(name), path);
            return 0;
        }
    }
    const uint32_t r = new_rule(c);
    if (n == 0) {
        if (addl && json_is_false(addl))
            put(&c->out, "r%u ::= \"{\" ws \"}\"\n", r);
        else {
            c->used_value = true;
            put(&c->out, "r%u ::= object\n", r);
        }
        return r;
    }
    uint32_t *kv = malloc(sizeof *kv * n);
    bool *required = calloc(n, sizeof *required);
    if (!kv || !required) {
        free(kv);
        free(required);
        c->out.oom = true;
        return 0;
    }
    const char *key;
    json_t *sub;
    size_t k = 0;
    json_object_foreach(props, key, sub)
    {
        char sub_path[512];
        snprintf(sub_path, sizeof sub_path, "%s/properties/%s", path, key);
        uint32_t v = gen(c, sub, sub_path, depth + 1);
        kv[k] = new_rule(c);
        put(&c->out, "r%u ::= \"", kv[k]);
        json_t *js = json_string(key);
        char *quoted = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        if (!quoted)
            c->out.oom = true;
        else
            put_literal(&c->out, quoted, strlen(quoted));
        free(quoted);
        put(&c->out, "\" ws \":\" ws r%u\n", v);
        json_array_foreach(req, i, name) if (!strcmp(json_string_value(name), key)) required[k] = true;
        k++;
    }
    /* rest_k: the properties from k on, after at least one was written (each behind a comma);
     * first_k: the same when none was written yet. */
    const uint32_t rest0 = c->n_rules, first0 = rest0 + (uint32_t)n + 1;
    c->n_rules += 2 * (uint32_t)n + 1;
    for (k = 0; k < n; k++) {
        if (required[k])
            put(&c->out, "r%u ::= ws \",\" ws r%u r%u\n", rest0 + (uint32_t)k, kv[k], rest0 + (uint32_t)k + 1);
        else
            put(&c->out, "r%u ::= (ws \",\" ws r%u)? r%u\n", rest0 + (uint32_t)k, kv[k], rest0 + (uint32_t)k + 1);
    }
    put(&c->out, "r%u ::= \"\"\n", rest0 + (uint32_t)n);
    bool any_required = false;
    for (k = 0; k < n; k++) {
        put(&c->out, "r%u ::= r%u r%u", first0 + (uint32_t)k, kv[k], rest0 + (uint32_t)k + 1);
        if (!required[k] && k + 1 < n)
            put(&c->out, " | r%u", first0 + (uint32_t)k + 1);
        put(&c->out, "\n");
        any_required |= required[k];
    }
    put(&c->out, "r%u ::= \"{\" ws %sr%u%s ws \"}\"\n", r, any_required ? "" : "(", first0, any_required ? "" : ")?");
    free(kv);
    free(required);
    return r;
}

/* The largest integer the grammar writes: 15 digits (PRIMITIVES' integer rule). */
#define INTEGER_LIMIT 999999999999999.0

/* minimum and maximum are taken where they do not constrain: on integers (their type "integer", or a list
 * of types with it and without "number", whose exponent reaches further), at or beyond the 15 digits the
 * integer rule allows. */
static void check_bounds(compiler *c, json_t *s, const char *path)
{
    static const char *const KEYS[] = {"minimum", "maximum"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(s, KEYS[k]);
        if (!v)
            continue;
        json_t *type = json_object_get(s, "type");
        bool integer = json_is_string(type) && !strcmp(json_string_value(type), "integer");
        if (json_is_array(type)) {
            size_t i;
            json_t *t;
            json_array_foreach(type, i, t)
            {
                if (json_is_string(t) && !strcmp(json_string_value(t), "integer"))
                    integer = true;
                if (json_is_string(t) && !strcmp(json_string_value(t), "number")) {
                    integer = false;
                    break;
                }
            }
        }
        const double x = json_is_number(v) ? json_number_value(v) : 0;
        if (!json_is_number(v) || !integer || (k == 0 ? x > -INTEGER_LIMIT : x < INTEGER_LIMIT)) {
            cfail(c,
                  "unsupported keyword '%s' at %s (a bound is taken only on an integer, %s %.0f or beyond, "
                  "where the grammar's 15 digits keep it)",
                  KEYS[k], path, k == 0 ? "at most" : "at least", k == 0 ? -INTEGER_LIMIT : INTEGER_LIMIT);
            return;
        }
    }
}

static bool get_count(compiler *c, json_t *s, const char *key, const char *path, uint32_t *out)
{
    json_t *v = json_object_get(s, key);
    if (!v)
        return false;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 10000) {
        cfail(c, "'%s' at %s must be an integer in [0, 10000]", key, path);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static uint32_t gen_array(compiler *c, json_t *s, const char *path, int depth)
{
    json_t *items = json_object_get(s, "items");
    uint32_t min = 0, max = UINT32_MAX;
    get_count(c, s, "minItems", path, &min);
    get_count(c, s, "maxItems", path, &max);
    if (c->failed)
        return 0;
    if (max < min) {
        cfail(c, "maxItems %u is below minItems %u at %s", max, min, path);
        return 0;
    }
    char sub_path[512];
    snprintf(sub_path, sizeof sub_path, "%s/items", path);
    uint32_t item = 0;
    bool any = !items || json_is_true(items);
    if (items && !json_is_object(items) && !json_is_boolean(items)) {
        cfail(c, "'items' at %s must be a schema (tuple arrays are not supported)", path);
        return 0;
    }
    if (!any)
        item = gen(c, items, sub_path, depth + 1);
    else
        c->used_value = true;
    const uint32_t r = new_rule(c);
    char item_name[32];
    snprintf(item_name, sizeof item_name, any ? "value" : "r%u", item);
    if (max == 0) {
        put(&c->out, "r%u ::= \"[\" ws \"]\"\n", r);
        return r;
    }
    put(&c->out, "r%u ::= \"[\" ws %s%s (ws \",\" ws %s)", r, min == 0 ? "(" : "", item_name, item_name);
    const uint32_t lo = min > 0 ? min - 1 : 0;
    if (max == UINT32_MAX)
        put(&c->out, "{%u,}", lo);
    else
        put(&c->out, "{%u,%u}", lo, max - 1);
    put(&c->out, "%s ws \"]\"\n", min == 0 ? ")?" : "");
    return r;
}

static uint32_t gen_type(compiler *c, json_t *s, const char *type, const char *path, int depth)
{
    if (!strcmp(type, "object"))
        return gen_object(c, s, path, depth);
    if (!strcmp(type, "array"))
        return gen_array(c, s, path, depth);
    static const char *const simple[] = {"string", "number", "integer", "boolean", "null"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(type, simple[i])) {
            uint32_t r = new_rule(c);
            put(&c->out, "r%u ::= %s\n", r, type);
            return r;
        }
    cfail(c, "unknown type '%s' at %s", type, path);
    return 0;
}

static uint32_t gen_ref(compiler *c, const char *ref, const char *path, int depth)
{
    json_t *done = json_object_get(c->defs_done, ref);
    if (done)
        return (uint32_t)json_integer_value(done);
    const char *name = NULL;
    json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8))
        defs = json_object_get(c->root, "$defs"), name = ref + 8;
    else if (!strncmp(ref, "#/definitions/", 14))
        defs = json_object_get(c->root, "definitions"), name = ref + 14;
    else if (!strcmp(ref, "#")) {
        name = NULL;
    } else {
        cfail(c, "unsupported $ref '%s' at %s (only #, #/$defs/NAME and #/definitions/NAME)", ref, path);
        return 0;
    }
    json_t *target = name ? json_object_get(defs, name) : c->root;
    if (!target) {
        cfail(c, "$ref '%s' at %s names no definition", ref, path);
        return 0;
    }
    /* The rule number is fixed before its body is generated, so a recursive reference finds it. */
    const uint32_t r = new_rule(c);
    json_object_set_new(c->defs_done, ref, json_integer(r));
    uint32_t body = gen(c, target, ref, depth + 1);
    put(&c->out, "r%u ::= r%u\n", r, body);
    return r;
}

static uint32_t gen(compiler *c, json_t *s, const char *path, int depth)
{
    if (c->failed)
        return 0;
    if (depth > SCHEMA_MAX_DEPTH) {
        cfail(c, "schema nested deeper than %d at %s", SCHEMA_MAX_DEPTH, path);
        return 0;
    }
    if (json_is_true(s)) {
        c->used_value = true;
        uint32_t r = new_rule(c);
        put(&c->out, "r%u ::= value\n", r);
        return r;
    }
    if (!json_is_object(s)) {
        cfail(c, "the schema at %s must be an object or true", path);
        return 0;
    }
    check_keywords(c, s, path);
    check_bounds(c, s, path);
    if (c->failed)
        return 0;
    json_t *ref = json_object_get(s, "$ref"), *cst = json_object_get(s, "const");
    json_t *en = json_object_get(s, "enum"), *any = json_object_get(s, "anyOf"), *type = json_object_get(s, "type");
    if (ref) {
        if (!json_is_string(ref)) {
            cfail(c, "'$ref' at %s must be a string", path);
            return 0;
        }
        return gen_ref(c, json_string_value(ref), path, depth);
    }
    uint32_t r;
    if (cst) {
        r = new_rule(c);
        put(&c->out, "r%u ::= ", r);
        put_json_literal(c, cst);
        put(&c->out, "\n");
        return r;
    }
    if (en) {
        if (!json_is_array(en) || json_array_size(en) == 0) {
            cfail(c, "'enum' at %s must be a non-empty array", path);
            return 0;
        }
        r = new_rule(c);
        put(&c->out, "r%u ::= ", r);
        size_t i;
        json_t *v;
        json_array_foreach(en, i, v)
        {
            if (i)
                put(&c->out, " | ");
            put_json_literal(c, v);
        }
        put(&c->out, "\n");
        return r;
    }
    if (any) {
        if (!json_is_array(any) || json_array_size(any) == 0) {
            cfail(c, "'anyOf' at %s must be a non-empty array of schemas", path);
            return 0;
        }
        size_t n = json_array_size(any);
        uint32_t *alts = malloc(sizeof *alts * n);
        if (!alts) {
            c->out.oom = true;
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            char sub_path[512];
            snprintf(sub_path, sizeof sub_path, "%s/anyOf/%zu", path, i);
            alts[i] = gen(c, json_array_get(any, i), sub_path, depth + 1);
        }
        r = new_rule(c);
        put(&c->out, "r%u ::= ", r);
        for (size_t i = 0; i < n; i++)
            put(&c->out, "%sr%u", i ? " | " : "", alts[i]);
        put(&c->out, "\n");
        free(alts);
        return r;
    }
    if (json_is_string(type))
        return gen_type(c, s, json_string_value(type), path, depth);
    if (json_is_array(type) && json_array_size(type) > 0) {
        size_t n = json_array_size(type);
        uint32_t *alts = malloc(sizeof *alts * n);
        if (!alts) {
            c->out.oom = true;
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(type, i);
            if (!json_is_string(t)) {
                cfail(c, "'type' at %s must list type names", path);
                free(alts);
                return 0;
            }
            alts[i] = gen_type(c, s, json_string_value(t), path, depth);
        }
        r = new_rule(c);
        put(&c->out, "r%u ::= ", r);
        for (size_t i = 0; i < n; i++)
            put(&c->out, "%sr%u", i ? " | " : "", alts[i]);
        put(&c->out, "\n");
        free(alts);
        return r;
    }
    if (type) {
        cfail(c, "'type' at %s must be a type name or a list of them", path);
        return 0;
    }
    if (json_object_get(s, "properties"))
        return gen_object(c, s, path, depth);
    if (json_object_get(s, "items"))
        return gen_array(c, s, path, depth);
    c->used_value = true;
    r = new_rule(c);
    put(&c->out, "r%u ::= value\n", r);
    return r;
}

char *woolly_json_schema_to_gbnf(const char *json, size_t len, woolly_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
    if (!root) {
        woolly_fail(err, "json_schema: not JSON (line %d, column %d: %s)", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    compiler c = {.root = root, .defs_done = json_object(), .err = err};
    if (!c.defs_done) {
        json_decref(root);
        woolly_fail(err, "json_schema: out of memory");
        return NULL;
    }
    put(&c.out, "%s", PRIMITIVES);
    put_any_value(&c.out);
    uint32_t top = gen(&c, root, "#", 0);
    put(&c.out, "root ::= r%u\n", top);
    json_decref(c.defs_done);
    json_decref(root);
    if (c.out.oom && !c.failed)
        cfail(&c, "out of memory");
    if (c.failed) {
        free(c.out.s);
        return NULL;
    }
    return c.out.s;
}

woolly_grammar *woolly_grammar_from_json_schema(const char *json, size_t len, woolly_error *err)
{
    char *gbnf = woolly_json_schema_to_gbnf(json, len, err);
    if (!gbnf)
        return NULL;
    woolly_grammar *g = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), err);
    free(gbnf);
    return g;
}
