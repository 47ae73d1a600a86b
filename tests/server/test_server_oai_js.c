/* The official OpenAI JavaScript client on logprobs, n > 1 and embeddings (tests/server/openai_oai.mjs),
 * against `woolly serve` on stories260K with 2 slots and an API key. Needs node and the package
 * installed (as test_server_openai_js: `npm ci` in tests/server). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"

Test(server_oai_js, the_official_client_on_logprobs_n_and_embeddings)
{
    struct stat st;
    if (stat(JS_DIR "/node_modules/openai/package.json", &st) != 0)
        cr_assert_eq(system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2"), 0,
                     "npm ci in %s failed: install node and npm (.ci/install-deps)", JS_DIR);
    char *model = strdup(tu_data("models/stories260K.gguf"));
    th_server s;
    th_start(&s, NULL, "-m %s -c 256 --parallel 2 -t 1 --api-key js-oai-key", model);
    char url[128];
    snprintf(url, sizeof url, "%s/v1", s.base);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_API_KEY", "js-oai-key", 1);
    setenv("WOOLLY_MODEL", "stories260K", 1);
    const char *out_path = tu_tmp_path("openai_oai.out");
    char *cmd = th_fmt("cd '%s' && node openai_oai.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "the OpenAI client's checks failed:\n%s", out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    free(out);
    free(cmd);
    cr_expect(th_wait_idle(&s, 5000));
    cr_expect_eq(th_stop(&s, NULL), 0);
    free(model);
}
