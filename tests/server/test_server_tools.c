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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"
#define SLOTS 4

/* Runs tool_calls.mjs against a server started with the family's built-in forced (NULL: the model's
 * format); quick: the required/named and parallel_tool_calls cases only. */
static void run_cases(const char *family, bool quick)
{
    char flags[64] = "";
    if (family)
        snprintf(flags, sizeof flags, "--chat-template %s", family);
    struct stat st;
    if (stat(JS_DIR "/node_modules/ajv/package.json", &st) != 0)
        cr_assert_eq(system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2"), 0, "npm ci in %s failed",
                     JS_DIR);
    th_server s;
    th_start(&s, NULL, "-m %s -c 2048 -t 2 --parallel %d --api-key tools-key %s",
             tu_data("models/stories260K.gguf"), SLOTS, flags);
    char url[128], slots[8];
    snprintf(url, sizeof url, "%s/v1", s.base);
    snprintf(slots, sizeof slots, "%d", SLOTS);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", "tools-key", 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    setenv("WOOLLY_SLOTS", slots, 1);
    setenv("WOOLLY_TOOLS_QUICK", quick ? "1" : "0", 1);
    setenv("WOOLLY_TOOLS_FAMILY", family ? family : "", 1);
    const char *out_path = tu_tmp_path("tool_calls.out");
    char *cmd = th_fmt("cd '%s' && node tool_calls.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "tool call checks (%s) failed:\n%s", flags, out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    fprintf(stderr, "[%s] %s", flags, out);
    free(out);
    free(cmd);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
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
