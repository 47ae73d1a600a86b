/* The official OpenAI JavaScript client (tests/server/openai_client.mjs, the npm package `openai` pinned
 * in tests/server/package.json) drives `woolly serve`: models, completions, chat completions, streamed
 * and whole, errors, the API key. Needs node and the package installed (`.ci/install-deps` runs
 * `npm ci` in tests/server; this test runs it too when node_modules is missing). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"

static void ensure_client_installed(void)
{
    struct stat st;
    if (stat(JS_DIR "/node_modules/openai/package.json", &st) == 0)
        return;
    const int rc = system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2");
    cr_assert_eq(rc, 0, "npm ci in %s failed: install node and npm (.ci/install-deps)", JS_DIR);
}

Test(server_openai_js, the_official_client_drives_the_server)
{
    ensure_client_installed();
    char *model = strdup(tu_data("models/stories260K.gguf"));
    char *expect = th_woolly_run(model, "Once upon a time", 20, NULL);
    th_server s;
    th_start(&s, NULL, "-m %s -c 256 --parallel 2 --api-key js-test-key", model);
    char url[128];
    snprintf(url, sizeof url, "%s/v1", s.base);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", "js-test-key", 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    setenv("WOOLLY_EXPECT", expect, 1);
    const char *out_path = tu_tmp_path("openai_client.out");
    char *cmd = th_fmt("cd '%s' && node openai_client.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "the OpenAI client's checks failed:\n%s", out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    free(out);
    free(cmd);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(expect);
    free(model);
}
