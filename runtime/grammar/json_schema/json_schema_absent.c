/* Builds without jansson (the cross build) have no JSON Schema compiler: a clear error instead. */
#include "grammar.h"

woolly_grammar *woolly_grammar_from_json_schema(const char *json, size_t len, woolly_error *err)
{
    (void)json, (void)len;
    woolly_fail(err, "json_schema: this build has no JSON Schema support (it needs jansson)");
    return NULL;
}

char *woolly_json_schema_to_gbnf(const char *json, size_t len, woolly_error *err)
{
    (void)json, (void)len;
    woolly_fail(err, "json_schema: this build has no JSON Schema support (it needs jansson)");
    return NULL;
}
