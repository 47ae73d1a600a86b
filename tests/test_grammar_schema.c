/* The JSON Schema compiler: documents a schema accepts are whole sentences of its grammar, documents it
 * rejects are not, and anything outside the supported subset is an error naming the keyword. */
#include <criterion/criterion.h>
#include <string.h>

#include "grammar.h"

static woolly_grammar *schema(const char *json)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_json_schema(json, strlen(json), &err);
    cr_assert(g, "schema should compile: %s\n%s", err.msg, json);
    return g;
}

static bool accepts(woolly_grammar *g, const char *doc)
{
    woolly_gmatch *m = woolly_gmatch_open(g, NULL);
    cr_assert(m);
    bool ok = woolly_gmatch_accept(m, doc, strlen(doc)) == 0 && woolly_gmatch_can_end(m);
    woolly_gmatch_free(m);
    return ok;
}

static void expect_error(const char *json, const char *needle)
{
    woolly_error err = {{0}};
    woolly_grammar *g = woolly_grammar_from_json_schema(json, strlen(json), &err);
    cr_assert_null(g, "should fail: %s", json);
    cr_assert(strstr(err.msg, needle), "message '%s' should contain '%s'", err.msg, needle);
}

Test(json_schema, any_object)
{
    woolly_grammar *g = schema("{\"type\":\"object\"}");
    cr_expect(accepts(g, "{}"));
    cr_expect(accepts(g, "{\"a\": [1, -2.5e3, \"x\\\"y\\u00e9\", {\"b\": null}], \"c\": true}"));
    cr_expect(accepts(g, "{ \"\xc3\xa9\" : false }"));
    cr_expect(!accepts(g, "[]"));
    cr_expect(!accepts(g, "{\"a\" 1}"));
    cr_expect(!accepts(g, "{\"a\": 01}"));
    cr_expect(!accepts(g, "{\"a\": \"\n\"}"), "a raw control character in a string is not JSON");
    cr_expect(!accepts(g, "{\"a\": tru}"));
    woolly_grammar_free(g);
}

Test(json_schema, properties_required_and_order)
{
    woolly_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                               "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"boolean\"}},"
                               "\"required\":[\"b\"],\"additionalProperties\":false}");
    cr_expect(accepts(g, "{\"b\":\"x\"}"));
    cr_expect(accepts(g, "{\"a\":1,\"b\":\"x\",\"c\":true}"));
    cr_expect(accepts(g, "{ \"a\": -7, \"b\": \"\" }"));
    cr_expect(accepts(g, "{\"b\":\"x\",\"c\":false}"));
    cr_expect(!accepts(g, "{\"a\":1}"), "b is required");
    cr_expect(!accepts(g, "{\"b\":\"x\",\"d\":1}"), "no other property");
    cr_expect(!accepts(g, "{\"a\":1.5,\"b\":\"x\"}"), "a is an integer");
    cr_expect(!accepts(g, "{,\"b\":\"x\"}"));
    cr_expect(!accepts(g, "{\"b\":\"x\",}"));
    woolly_grammar_free(g);
}

Test(json_schema, arrays_enum_const_anyof_ref)
{
    woolly_grammar *g = schema("{\"type\":\"array\",\"items\":{\"enum\":[\"x\",3,null]},\"minItems\":1,\"maxItems\":2}");
    cr_expect(accepts(g, "[\"x\"]"));
    cr_expect(accepts(g, "[3, null]"));
    cr_expect(!accepts(g, "[]"));
    cr_expect(!accepts(g, "[3,3,3]"));
    cr_expect(!accepts(g, "[4]"));
    woolly_grammar_free(g);

    g = schema("{\"const\":{\"k\":[1,\"two\"]}}");
    cr_expect(accepts(g, "{\"k\":[1,\"two\"]}"));
    cr_expect(!accepts(g, "{\"k\":[1]}"));
    woolly_grammar_free(g);

    g = schema("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},"
               "\"next\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/n\"}]}},"
               "\"required\":[\"v\",\"next\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}");
    cr_expect(accepts(g, "{\"v\":1,\"next\":{\"v\":2.5,\"next\":null}}"));
    cr_expect(!accepts(g, "{\"v\":1,\"next\":{\"v\":2}}"));
    woolly_grammar_free(g);

    g = schema("{\"type\":[\"string\",\"null\"]}");
    cr_expect(accepts(g, "\"s\""));
    cr_expect(accepts(g, "null"));
    cr_expect(!accepts(g, "1"));
    woolly_grammar_free(g);
}

Test(json_schema, unsupported_keywords_are_named)
{
    expect_error("{\"type\":\"string\",\"pattern\":\"^a\"}", "unsupported keyword 'pattern' at #");
    expect_error("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\",\"minimum\":3}}}",
                 "unsupported keyword 'minimum' at #/properties/x");
    expect_error("{\"oneOf\":[{\"type\":\"string\"}]}", "unsupported keyword 'oneOf'");
    expect_error("{\"type\":\"strin\"}", "unknown type 'strin'");
    expect_error("{\"$ref\":\"#/$defs/missing\"}", "names no definition");
    expect_error("{\"$ref\":\"http://example.com/s.json\"}", "unsupported $ref");
    expect_error("{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"]}", "required property 'a'");
    expect_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", "maxItems 1 is below minItems 3");
    expect_error("{\"type\":", "not JSON");
    expect_error("[1]", "must be an object");
}

/* zod writes the safe-integer range on every integer: bounds the grammar's 15 digits already keep are
 * taken (the largest 15-digit integers pass, no 16-digit one does), tighter ones and bounds on numbers
 * are errors naming the keyword. */
Test(json_schema, integer_bounds_the_digits_keep)
{
    woolly_grammar *g =
        schema("{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}");
    cr_expect(accepts(g, "999999999999999"));
    cr_expect(accepts(g, "-999999999999999"));
    cr_expect(accepts(g, "0"));
    cr_expect(!accepts(g, "1000000000000000"));
    cr_expect(!accepts(g, "9007199254740992"));
    cr_expect(!accepts(g, "1.5"));
    woolly_grammar_free(g);
    g = schema("{\"type\":[\"integer\",\"null\"],\"maximum\":1e300}");
    cr_expect(accepts(g, "null"));
    cr_expect(accepts(g, "-12"));
    woolly_grammar_free(g);
    expect_error("{\"type\":\"integer\",\"maximum\":100}", "unsupported keyword 'maximum' at #");
    expect_error("{\"type\":\"integer\",\"minimum\":-99999999999999}", "unsupported keyword 'minimum' at #");
    expect_error("{\"type\":\"number\",\"maximum\":9007199254740991}", "unsupported keyword 'maximum'");
    expect_error("{\"type\":[\"integer\",\"number\"],\"maximum\":9007199254740991}", "'maximum'");
    expect_error("{\"maximum\":9007199254740991}", "'maximum'");
    expect_error("{\"type\":\"integer\",\"minimum\":\"low\"}", "'minimum'");
}

Test(json_schema, gbnf_text_is_readable)
{
    woolly_error err = {{0}};
    char *gbnf = woolly_json_schema_to_gbnf("{\"type\":\"boolean\"}", 18, &err);
    cr_assert(gbnf, "%s", err.msg);
    cr_expect(strstr(gbnf, "root ::= ") != NULL);
    woolly_grammar *g = woolly_grammar_from_gbnf(gbnf, strlen(gbnf), &err);
    cr_assert(g, "%s", err.msg);
    woolly_grammar_free(g);
    free(gbnf);
}
