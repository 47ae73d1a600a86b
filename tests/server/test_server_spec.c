/* Speculative decoding in `woolly serve` end to end. tests/server/speculative.mjs sends the same
 * requests (greedy and seeded sampling, chat and completions, streamed, n = 2, logprobs, several at once)
 * to a server without speculation and to one with it, through the official OpenAI client, and wants the
 * same text token for token, timings with the draft counts, and /metrics' totals. The speculating servers
 * guess at every step (WOOLLY_TEST_SPEC_FIXED), so that many guesses are checked, kept and rejected at
 * every depth: stories260K drafting for itself with lookup (most guesses kept), and tiny-llama Q8_0 with
 * its Q4_K_M draft (random weights: most rejected), where the draft model's passes are counted too. Bad
 * flags are refused. Needs node and tests/server's
 * packages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_harness.h"
#include "testutil.h"

#define JS_DIR WOOLLY_SOURCE_DIR "/tests/server"
#define SLOTS 3

static void compare(const char *target, const char *spec_flags, bool draft_only)
{
    if (access(JS_DIR "/node_modules/openai/package.json", R_OK) != 0)
        cr_assert_eq(system("cd '" JS_DIR "' && npm ci --no-audit --no-fund >&2"), 0, "npm ci in %s failed",
                     JS_DIR);
    char *model = th_fmt("models/%s.gguf", target);
    char *path = strdup(tu_data(model));
    th_server plain, spec;
    th_start(&plain, NULL, "-m %s -c 512 -t 1 --parallel %d --api-key spec-key", path, SLOTS);
    th_start(&spec, "WOOLLY_TEST_SPEC_FIXED=1", "-m %s -c 512 -t 1 --parallel %d --api-key spec-key %s", path,
             SLOTS, spec_flags);
    char *url = th_fmt("%s/v1", spec.base), *plain_url = th_fmt("%s/v1", plain.base), *slots = th_fmt("%d", SLOTS);
    setenv("WOOLLY_BASE_URL", url, 1);
    setenv("WOOLLY_PLAIN_URL", plain_url, 1);
    setenv("WOOLLY_API_KEY", "spec-key", 1);
    setenv("WOOLLY_MODEL", target, 1);
    setenv("WOOLLY_SLOTS", slots, 1);
    if (draft_only)
        setenv("WOOLLY_SPEC_DRAFT_ONLY", "1", 1);
    else
        unsetenv("WOOLLY_SPEC_DRAFT_ONLY");
    const char *out_path = tu_tmp_path("speculative.out");
    char *cmd = th_fmt("cd '%s' && node speculative.mjs >'%s' 2>&1", JS_DIR, out_path);
    const int rc = system(cmd);
    char *out = tu_read_file(out_path, NULL);
    remove(out_path);
    cr_expect_eq(rc, 0, "%s with %s:\n%s", target, spec_flags, out);
    cr_expect(strstr(out, " 0 failed") != NULL, "%s", out);
    fprintf(stderr, "[speculative.mjs %s %s] %s", target, spec_flags, out);
    cr_expect(th_wait_idle(&spec, 5000));
    cr_expect(th_wait_idle(&plain, 5000));
    cr_expect_eq(th_stop(&spec, NULL), 0);
    cr_expect_eq(th_stop(&plain, NULL), 0);
    free(out), free(cmd), free(url), free(plain_url), free(slots), free(path), free(model);
}

Test(server_spec, stories260K_self_draft_and_lookup_give_the_plain_text)
{
    char flags[4200];
    snprintf(flags, sizeof flags, "--lookup 2 --draft %s --draft-max 4", tu_data("models/stories260K.gguf"));
    compare("stories260K", flags, false);
}

/* Release build only: under the sanitizers this pair took 65 s of the suite, and the stories260K case above
 * runs the same server paths (a draft model, its batched passes, lookup) with the sanitizers on. */
#if defined(__SANITIZE_ADDRESS__)
#define RELEASE_ONLY true
#else
#define RELEASE_ONLY false
#endif

Test(server_spec, tiny_llama_q4_k_m_draft_gives_the_plain_text, .disabled = RELEASE_ONLY)
{
    char flags[4200];
    snprintf(flags, sizeof flags, "--draft %s --draft-max 5", tu_data("models/tiny-llama-q4_k_m.gguf"));
    compare("tiny-llama-q8_0", flags, true);
}

static void expect_refused(const char *args, int status, const char *needle)
{
    char *out, *err;
    const int st = tu_run_cli(args, &out, &err);
    cr_expect_eq(st, status, "woolly %s: exit %d, expected %d\n%s", args, st, status, err);
    cr_expect(strstr(err, needle) != NULL, "woolly %s: stderr does not mention '%s':\n%s", args, needle, err);
    free(out);
    free(err);
}

Test(server_spec, bad_flags_are_refused)
{
    char args[8400], stories[4096];
    snprintf(stories, sizeof stories, "%s", tu_data("models/stories260K.gguf"));
    snprintf(args, sizeof args, "serve -m %s --port 0 --lookup 2 --draft-max 0", stories);
    expect_refused(args, 2, "--draft-max");
    snprintf(args, sizeof args, "serve -m %s --port 0 --draft-max 4", stories);
    expect_refused(args, 2, "needs --draft MODEL or --lookup N");
    snprintf(args, sizeof args, "serve -m %s --port 0 --lookup 2 --context-shift", stories);
    expect_refused(args, 2, "--context-shift");
    snprintf(args, sizeof args, "serve -m %s --port 0 --draft /nonexistent/draft.gguf", stories);
    expect_refused(args, 1, "/nonexistent/draft.gguf");
    snprintf(args, sizeof args, "serve -m %s --port 0 -t 1 --draft %s", tu_data("models/tiny-llama-q4_k_m.gguf"),
             stories);
    expect_refused(args, 1, "vocabulary");
}
