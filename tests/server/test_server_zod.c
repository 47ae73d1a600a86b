/* The official OpenAI client's zod helpers end to end. tests/server/zod_helpers.mjs drives `woolly
 * serve` (stories260K, a tiny model that never writes JSON or a tool call by itself) through
 * zodResponseFormat with client.chat.completions.parse and its stream helper, and zodFunction tools with
 * required and named tool_choice, on several zod schemas and seeds: the helper parses every output with
 * the zod schema (it throws on one that does not validate). parallel_tool_calls too. Needs node and
 * tests/server's packages (npm ci; zod is one of them). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"
#define SLOTS 4

Test(server_zod, the_clients_zod_helpers_parse_every_output)
{
    struct stat st;
    if (stat(JS_DIR "/node_modules/zod/package.json", &st) != 0)
        cr_assert_eq(system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2"), 0, "npm ci in %s failed",
                     JS_DIR);
    th_server s;
    th_start(&s, NULL, "-m %s -c 2048 -t 2 --parallel %d --api-key zod-key",
             tu_data("models/stories260K.gguf"), SLOTS);
    char url[128], slots[8];
    snprintf(url, sizeof url, "%s/v1", s.base);
    snprintf(slots, sizeof slots, "%d", SLOTS);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", "zod-key", 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    setenv("WOOLLY_SLOTS", slots, 1);
    const char *out_path = tu_tmp_path("zod_helpers.out");
    char *cmd = th_fmt("cd '%s' && node zod_helpers.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "zod helper checks failed:\n%s", out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    fprintf(stderr, "%s", out);
    free(out);
    free(cmd);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
}
