/* Structured output end to end: tests/server/structured_output.mjs drives `woolly serve` (stories260K, a
 * random-weight model) through the official OpenAI client with JSON schemas, json_object, GBNF grammars
 * and bad ones, and validates every output with ajv. Needs node and tests/server's packages (npm ci). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"

Test(server_structured, every_output_validates_against_its_schema)
{
    struct stat st;
    if (stat(JS_DIR "/node_modules/ajv/package.json", &st) != 0)
        cr_assert_eq(system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2"), 0, "npm ci in %s failed", JS_DIR);
    th_server s;
    th_start(&s, NULL, "-m %s -c 4096 --parallel 2 --api-key structured-key", tu_data("models/stories260K.gguf"));
    char url[128];
    snprintf(url, sizeof url, "%s/v1", s.base);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", "structured-key", 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    const char *out_path = tu_tmp_path("structured_output.out");
    char *cmd = th_fmt("cd '%s' && node structured_output.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "structured output checks failed:\n%s", out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    fprintf(stderr, "%s", out);
    free(out);
    free(cmd);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}
