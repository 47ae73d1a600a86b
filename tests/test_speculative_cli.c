/* `woolly run --draft / --lookup` end to end: greedy text is byte for byte the text without speculation
 * at every ISA level this CPU runs (WOOLLY_ISA forced), the summary reports the drafted and accepted
 * tokens; chat's replies over two turns are the plain ones; bench adds its speculative test to the
 * table, JSON and CSV with its counts; bad flags (--draft-max 0 or absurd, --draft-max alone, a draft of
 * another vocabulary, a missing draft file, --context-shift with speculation) are clear errors with a
 * non-zero exit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "testutil.h"

static const char *model(const char *name)
{
    static char path[4][4096];
    static int next;
    char *p = path[next++ % 4];
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    snprintf(p, 4096, "%s", tu_data(rel));
    return p;
}

/* Whether this CPU runs the level (the registry's rule, as in model_logits_check.h). */
static int cpu_runs(const char *isa)
{
    const woolly_cpu *c = woolly_cpu_get();
    const int avx2 = c->avx2 && c->fma && c->f16c;
    if (!strcmp(isa, "avx2"))
        return avx2;
    if (!strcmp(isa, "avx512"))
        return avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni;
    return 1;
}

static char *run_ok(const char *isa, const char *target, const char *extra, char **err_out)
{
    char cmd[8192];
    snprintf(
        cmd, sizeof cmd,
        "env WOOLLY_ISA=%s WOOLLY_TUNE_PROFILE=none %s run -m %s -p 'Once upon a time, there was a little "
        "girl named Lily. She' -n 24 --temp 0 -t 2 -c 128 %s",
        isa, WOOLLY_CLI, target, extra);
    char *out, *err;
    const int st = tu_run_shell(cmd, &out, &err);
    cr_assert_eq(st, 0, "%s: exit %d\n%s", cmd, st, err);
    if (err_out)
        *err_out = err;
    else
        free(err);
    return out;
}

static void check_levels(const char *target, const char *const *extras, size_t n_extras)
{
    static const char *const LEVELS[] = {"scalar", "avx2", "avx512"};
    for (size_t i = 0; i < sizeof LEVELS / sizeof *LEVELS; i++) {
        if (!cpu_runs(LEVELS[i])) {
            fprintf(stderr, "speculative %s WOOLLY_ISA=%s: this CPU cannot run it, not checked\n", target,
                    LEVELS[i]);
            continue;
        }
        char *want = run_ok(LEVELS[i], target, "", NULL);
        for (size_t e = 0; e < n_extras; e++) {
            char *err;
            char *got = run_ok(LEVELS[i], target, extras[e], &err);
            cr_expect_str_eq(got, want, "%s WOOLLY_ISA=%s %s: the text differs from plain greedy decoding",
                             target, LEVELS[i], extras[e]);
            cr_expect(strstr(err, "speculative ") && strstr(err, "drafted") && strstr(err, "tokens per step"),
                      "no speculation summary:\n%s", err);
            free(got);
            free(err);
        }
        free(want);
    }
}

Test(spec_cli, tiny_llama_greedy_text_is_plain_at_every_level)
{
    char draft[4200], draft2[4200];
    snprintf(draft, sizeof draft, "--draft %s --draft-max 4", model("tiny-llama-q4_k_m"));
    snprintf(draft2, sizeof draft2, "--draft %s --draft-max 16 --lookup 1", model("tiny-llama-q6_k"));
    const char *const extras[] = {draft, draft2, "--lookup 1 --draft-max 3"};
    check_levels(model("tiny-llama-q8_0"), extras, 3);
}

Test(spec_cli, stories260K_greedy_text_is_plain_at_every_level)
{
    char draft[4200];
    snprintf(draft, sizeof draft, "--draft %s --draft-max 6", model("stories260K"));
    const char *const extras[] = {draft, "--lookup 2"};
    check_levels(model("stories260K"), extras, 2);
}

static void expect_failure(const char *args, int status, const char *needle)
{
    char *out, *err;
    const int st = tu_run_cli(args, &out, &err);
    cr_expect_eq(st, status, "woolly %s: exit status %d, expected %d\n%s", args, st, status, err);
    cr_expect(strstr(err, needle) != NULL, "woolly %s: stderr does not mention '%s':\n%s", args, needle, err);
    free(out);
    free(err);
}

Test(spec_cli, bad_flags_are_refused)
{
    char args[8400];
    const char *s = model("stories260K");
    snprintf(args, sizeof args, "run -m %s -p hi --lookup 2 --draft-max 0", s);
    expect_failure(args, 2, "--draft-max");
    snprintf(args, sizeof args, "run -m %s -p hi --lookup 2 --draft-max 100000", s);
    expect_failure(args, 2, "--draft-max");
    snprintf(args, sizeof args, "run -m %s -p hi --lookup 0", s);
    expect_failure(args, 2, "--lookup");
    snprintf(args, sizeof args, "run -m %s -p hi --lookup 99", s);
    expect_failure(args, 2, "--lookup");
    snprintf(args, sizeof args, "run -m %s -p hi --draft-max 4", s);
    expect_failure(args, 2, "needs --draft MODEL or --lookup N");
    snprintf(args, sizeof args, "run -m %s -p hi --lookup 2 --context-shift", s);
    expect_failure(args, 2, "--context-shift");
    snprintf(args, sizeof args, "run -m %s -p hi --draft /nonexistent/draft.gguf", s);
    expect_failure(args, 1, "/nonexistent/draft.gguf");
    snprintf(args, sizeof args, "run -m %s -p hi --draft %s", model("tiny-llama-q4_k_m"), s);
    expect_failure(args, 1, "vocabulary");
    snprintf(args, sizeof args, "chat -m %s --draft-max 0 --lookup 1 < /dev/null", s);
    expect_failure(args, 2, "--draft-max");
}

Test(spec_cli, bench_reports_speculative_generation)
{
    char args[8400], *out, *err;
    const char *draft = model("tiny-llama-q4_k_m");
    snprintf(args, sizeof args, "bench -m %s -p 16 -n 24 -r 1 -t 1 --draft %s --draft-max 4",
             model("tiny-llama-q8_0"), draft);
    int st = tu_run_cli(args, &out, &err);
    cr_assert_eq(st, 0, "woolly %s: exit %d\n%s", args, st, err);
    cr_expect(strstr(out, "tg24 |"), "the table keeps its tg row:\n%s", out);
    cr_expect(strstr(out, "tg24 spec |"), "the table has the speculative row:\n%s", out);
    cr_expect(strstr(out, "speculative tg24 spec, 1 thread: greedy after a 16-token prompt, draft ") &&
                  strstr(out, "draft-max 4: ") && strstr(out, "accepted (") && strstr(out, "tokens per step"),
              "the footer has the speculative counts:\n%s", out);
    cr_expect(strstr(err, "speculative tg24 after pp16") && strstr(err, "tokens/s") &&
                  strstr(err, "accepted") && strstr(err, "tokens per step"),
              "no speculative line:\n%s", err);
    free(out);
    free(err);

    /* JSON: one more object, its counts in "speculative"; the plain tests have none. */
    snprintf(args, sizeof args, "bench -m %s -p 16 -n 24 -r 2 -t 1 --lookup 2 --draft %s --format json",
             model("stories260K"), model("stories260K"));
    st = tu_run_cli(args, &out, &err);
    cr_assert_eq(st, 0, "woolly %s: exit %d\n%s", args, st, err);
    const char *o = strstr(out, "\"test\": \"tg24 spec\"");
    cr_assert(o, "no speculative test object:\n%s", out);
    const char *sp = strstr(out, "\"speculative\": {\"prompt\": 16, \"draft\": \"");
    cr_assert(sp && sp > o, "no speculative counts in the test's object:\n%s", out);
    cr_expect(strstr(sp, "\"lookup\": 2, \"draft_max\": 8, \"drafted\": "), "%s", sp);
    long long drafted = -1, accepted = -1, steps = -1, tokens = -1;
    const char *d = strstr(sp, "\"drafted\": ");
    cr_assert(d && sscanf(d, "\"drafted\": %lld, \"accepted\": %lld, \"steps\": %lld, \"tokens\": %lld", &drafted,
                          &accepted, &steps, &tokens) == 4,
              "%s", sp);
    /* Two measured runs of 23 tokens after each first; a model drafting for itself accepts. */
    cr_expect_eq(tokens, 46, "%s", sp);
    cr_expect(drafted > 0 && accepted > 0 && accepted <= drafted && steps >= 1 && steps < tokens, "%s", sp);
    cr_expect(strstr(sp, "\"acceptance\": ") && strstr(sp, "\"tokens_per_step\": "), "%s", sp);
    cr_expect(strstr(sp, "\"steps\"") < strstr(out, "\n]") && !strstr(sp + 1, "\"speculative\""),
              "one speculative object:\n%s", out);
    free(out);
    free(err);

    /* CSV: the spec_ columns, empty for the plain tests. */
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 8 -r 1 -t 1 --lookup 2 --format csv", model("stories260K"));
    st = tu_run_cli(args, &out, &err);
    cr_assert_eq(st, 0, "woolly %s: exit %d\n%s", args, st, err);
    cr_expect(strstr(out, ",spec_prompt,spec_draft,spec_lookup,spec_draft_max,spec_drafted,spec_accepted,"),
              "%s", out);
    cr_expect(strstr(out, "\"tg8\",") && strstr(out, ",,,,,,,,,\n"), "%s", out);
    cr_expect(strstr(out, "\"tg8 spec\",") && strstr(out, ",8,\"\",2,8,"), "%s", out);
    free(out);
    free(err);

    snprintf(args, sizeof args, "bench -m %s -p 16 -n 0 --lookup 2", model("stories260K"));
    expect_failure(args, 2, "-n N > 0");
    snprintf(args, sizeof args, "bench -m %s -p 16 -n 8 --draft-max 0 --lookup 2", model("stories260K"));
    expect_failure(args, 2, "--draft-max");
}

Test(spec_cli, chat_greedy_replies_are_plain_over_turns)
{
    /* The second turn reuses the cached first one through woolly_spec_begin. */
    char cmd[8400], *want, *got, *err;
    const char *s = model("stories260K");
    snprintf(cmd, sizeof cmd,
             "(printf 'Hello there\\nTell me a story\\n' | %s chat -m %s --chat-template chatml -n 30 --temp "
             "0 -t 1)",
             WOOLLY_CLI, s);
    cr_assert_eq(tu_run_shell(cmd, &want, NULL), 0, "%s", cmd);
    cr_assert_gt(strlen(want), 40, "two replies expected:\n%s", want);
    snprintf(cmd, sizeof cmd,
             "(printf 'Hello there\\nTell me a story\\n' | %s chat -m %s --chat-template chatml -n 30 --temp "
             "0 -t 1 "
             "-v --lookup 2 --draft %s --draft-max 5)",
             WOOLLY_CLI, s, s);
    cr_assert_eq(tu_run_shell(cmd, &got, &err), 0, "%s", cmd);
    cr_expect_str_eq(got, want, "chat replies differ with speculation");
    cr_expect(strstr(err, "speculative ") && strstr(err, "accepted"), "no per-turn speculation line:\n%s",
              err);
    free(want);
    free(got);
    free(err);
}
