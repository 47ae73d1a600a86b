/* Tool calls end to end. tests/server/tool_calls.mjs drives `woolly serve` (stories260K, a tiny model
 * that never writes a tool call by itself) through the official OpenAI client: required and named
 * tool_choice on several parameter schemas and seeds, whole and streamed, must come back as tool_calls
 * whose arguments validate (ajv); auto, none, a call sent back with its result, n = 2 and the 400s too.
 * The model has no template of its own (the plain built-in, Hermes' call syntax); the required and named
 * cases run again with each family's built-in forced (--chat-template), so that each family's call
 * syntax goes through the grammar, the model and the parser, one call and several (parallel_tool_calls).
 * Needs node and tests/server's packages. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "server_harness.h"
#include "testutil.h"

#define SLOTS 4

/* Runs tool_calls.mjs against a server started with `flags`; quick: the required/named and
 * parallel_tool_calls cases only. */
static void run_cases_with(const char *flags, const char *family, bool quick)
{
    setenv("WOOLLY_TOOLS_QUICK", quick ? "1" : "0", 1);
    setenv("WOOLLY_TOOLS_FAMILY", family ? family : "", 1);
    th_node_checks("tool_calls.mjs", "ajv", "tools-key", SLOTS, flags);
}

/* The same with the family's built-in forced (NULL: the model's format). */
static void run_cases(const char *family, bool quick)
{
    char flags[64] = "";
    if (family)
        snprintf(flags, sizeof flags, "--chat-template %s", family);
    run_cases_with(flags, family, quick);
}

Test(server_tools, every_required_call_validates)
{
    run_cases(NULL, false);
}

Test(server_tools, each_family_syntax_round_trips)
{
    static const char *const FAMILIES[] = {"chatml", "llama3", "mistral-v7", "granite"};
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        run_cases(FAMILIES[i], true);
}

/* Mistral Small 3.2's own template (--chat-template-file): it writes the newer calls, name[ARGS]{...},
 * so a required call is held to `name{...}` and parsed back from it. */
Test(server_tools, mistral_named_calls_round_trip)
{
    char flags[4200];
    snprintf(flags, sizeof flags,
             "--chat-template-file '%s/tests/data/chat/mistral-small-3.2-instruct-2506.jinja'",
             WOOLLY_SOURCE_DIR);
    run_cases_with(flags, "mistral-named", true);
}
