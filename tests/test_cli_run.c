/* The model commands end to end: greedy text of the real stories260K model, and every kind of bad input
 * giving a clear message and a non-zero exit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

static const char *stories(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_data("models/stories260K.gguf"));
    return path;
}

/* Runs `woolly ARGS`, expects a failure whose stderr contains `needle`. */
static void expect_failure(const char *args, const char *needle)
{
    char *out, *err;
    const int st = tu_run_cli(args, &out, &err);
    cr_expect(st != 0, "woolly %s: exit status 0, expected failure", args);
    cr_expect(st != -1, "woolly %s: did not exit normally (crash?)", args);
    cr_expect(strstr(err, needle) != NULL, "woolly %s: stderr does not mention '%s':\n%s", args, needle, err);
    free(out);
    free(err);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\n' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

Test(cli_run, stories260K_greedy_200_tokens_match_the_reference)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 200 --temp 0 -t 2", stories());
    const int st = tu_run_cli(args, &out, &err);
    cr_assert_eq(st, 0, "woolly run failed: %s", err);
    char *want = tu_read_file(tu_data("refs/stories260K.greedy200.txt"), NULL);
    /* The reference has the decoder's leading space and llama.cpp's closing line breaks: neither is
     * part of the generated text. */
    cr_expect_str_eq(trim(out), trim(want));
    cr_expect(strstr(err, "generation") && strstr(err, "tokens/s"), "no timing summary on stderr:\n%s", err);
    free(want);
    free(out);
    free(err);
}

Test(cli_run, batch_size_and_threads_do_not_change_greedy_text)
{
    char args[16384], *a, *b;
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time, there was a\" -n 40 --temp 0 -t 1 -b 512",
             stories());
    cr_assert_eq(tu_run_cli(args, &a, NULL), 0);
    snprintf(args, sizeof args,
             "run -m %s -p \"Once upon a time, there was a\" -n 40 --temp 0 -t 2 -b 3 --kv-type f32",
             stories());
    cr_assert_eq(tu_run_cli(args, &b, NULL), 0);
    cr_expect_str_eq(a, b);
    free(a);
    free(b);
}

Test(cli_run, seeded_sampling_is_reproducible)
{
    char args[16384], *a, *b;
    snprintf(args, sizeof args,
             "run -m %s -p \"Once upon a time\" -n 40 --temp 1 --top-k 0 --top-p 0.9 --seed 42", stories());
    cr_assert_eq(tu_run_cli(args, &a, NULL), 0);
    cr_assert_eq(tu_run_cli(args, &b, NULL), 0);
    cr_expect_str_eq(a, b);
    cr_expect_gt(strlen(a), strlen("Once upon a time") + 10);
    free(a);
    free(b);
}

Test(cli_run, n_zero_prints_only_the_prompt)
{
    char args[16384], *out;
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 0", stories());
    cr_assert_eq(tu_run_cli(args, &out, NULL), 0);
    cr_expect_str_eq(trim(out), "Once upon a time");
    free(out);
}

Test(cli_run, a_context_beyond_the_trained_length_is_allowed_with_a_warning)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 4 --temp 0 --ctx-size 4096", stories());
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "warning: --ctx-size 4096 exceeds the 2048 positions") != NULL, "%s", err);
    free(out);
    free(err);
}

/* --logit-bias: +100 on " upon" (id 407: "Once upon a time" is BOS 403 407 261 378) makes it every token;
 * -100 on " a" (261), greedy's fourth token, changes only that one. */
Test(cli_run, logit_bias_steers_the_tokens)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 4 --temp 0", stories());
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_assert_str_eq(trim(out), "Once upon a time, there was a", "the test's premise");
    free(out), free(err);
    snprintf(args, sizeof args,
             "run -m %s -p \"Once upon a time\" -n 4 --temp 0.8 --seed 3 --logit-bias 407+100", stories());
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect_str_eq(trim(out), "Once upon a time upon upon upon upon");
    free(out), free(err);
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 4 --temp 0 --logit-bias 5+0.5,261-100",
             stories());
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    const char *t = trim(out);
    cr_expect(!strncmp(t, "Once upon a time, there was", 27) && strcmp(t, "Once upon a time, there was a"),
              "%s", t);
    free(out), free(err);
}

Test(cli_run, bad_input)
{
    char args[16384];
    snprintf(args, sizeof args, "run -m %s -p \"\"", stories());
    expect_failure(args, "empty");
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n -5", stories());
    expect_failure(args, "-n -5 is out of range");
    snprintf(args, sizeof args,
             "run -m %s -p \"Once upon a time there was a girl who liked to play in the park\" --ctx-size 8",
             stories());
    expect_failure(args, "more than the context size 8");
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 50 --ctx-size 16 --temp 0", stories());
    expect_failure(args, "context of 16 positions is full");
    snprintf(args, sizeof args, "run -m %s -p hi --bogus", stories());
    expect_failure(args, "unknown option '--bogus'");
    snprintf(args, sizeof args, "run -m %s -p hi -t 0", stories());
    expect_failure(args, "-t 0 is out of range");
    snprintf(args, sizeof args, "run -m %s -p hi -t 1025", stories());
    expect_failure(args, "-t 1025 is out of range");
    snprintf(args, sizeof args, "run -m %s -p hi -t two", stories());
    expect_failure(args, "-t 'two' is not an integer");
    snprintf(args, sizeof args, "run -m %s -p", stories());
    expect_failure(args, "-p needs a value");
    snprintf(args, sizeof args, "run -m %s -p hi --temp -1", stories());
    expect_failure(args, "--temp -1 is out of range");
    snprintf(args, sizeof args, "run -m %s -p hi --kv-type q8", stories());
    expect_failure(args, "--kv-type 'q8'");
    snprintf(args, sizeof args, "run -m %s -p hi --logit-bias 407+101", stories());
    expect_failure(args, "--logit-bias '407+101': expected ID+B or ID-B items");
    snprintf(args, sizeof args, "run -m %s -p hi --logit-bias 407+1,", stories());
    expect_failure(args, "--logit-bias '407+1,'");
    snprintf(args, sizeof args, "run -m %s -p hi --logit-bias 999+1", stories());
    expect_failure(args, "token id 999 is outside [0, 512)");
    snprintf(args, sizeof args, "run -m %s -p hi --logit-bias 7+1,7-1", stories());
    expect_failure(args, "token 7 is given twice");
    expect_failure("run -p hi", "-m MODEL is required");
    expect_failure("run -m /no/such/model.gguf -p hi", "/no/such/model.gguf");
}

Test(cli_run, logits_that_break_down_are_an_error_not_text)
{
    const char *model = tu_stories_with_a_nan("stories260K-nan.gguf");
    char args[16384];
    const char *const modes[] = {"--temp 0", "--temp 0.8 --seed 3", "--temp 0 --lookup 2"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        snprintf(args, sizeof args, "run -m %s -p \"Once upon a time. Once upon a time\" -n 8 %s", model,
                 modes[i]);
        expect_failure(args, "the model's logits hold NaN (token 0)");
    }
    /* a draft that broke down, sampling: its distribution cannot take part in the acceptance rule */
    snprintf(args, sizeof args, "run -m %s --draft %s -p \"Once upon a time\" -n 16 --temp 0.8 --seed 3",
             stories(), model);
    expect_failure(args, "the draft model: sampler: the model's logits hold NaN");
    remove(model);
}

Test(cli_logits, bad_input)
{
    char args[16384];
    snprintf(args, sizeof args, "logits -m %s --tokens 1,403,512 -o %s", stories(), tu_tmp_path("x.f32"));
    expect_failure(args, "token id 512 (at index 2) is out of range [0, 512)");
    snprintf(args, sizeof args, "logits -m %s --tokens 1,-3 -o %s", stories(), tu_tmp_path("x.f32"));
    expect_failure(args, "token id -3");
    snprintf(args, sizeof args, "logits -m %s --tokens 1,x -o %s", stories(), tu_tmp_path("x.f32"));
    expect_failure(args, "not an integer");
    snprintf(args, sizeof args, "logits -m %s --tokens 1,2", stories());
    expect_failure(args, "-o OUT.f32 is required");
    snprintf(args, sizeof args, "logits -m %s --tokens 1,2,3 --ctx-size 2 -o %s", stories(),
             tu_tmp_path("x.f32"));
    expect_failure(args, "do not fit the context size 2");
    snprintf(args, sizeof args, "logits -m %s --tokens 1,2 -o %s --batch-size 0", stories(),
             tu_tmp_path("x.f32"));
    expect_failure(args, "--batch-size 0 is out of range");
}

Test(cli_logits, writes_n_tokens_by_n_vocab_floats)
{
    char args[16384], out[4096];
    snprintf(out, sizeof out, "%s", tu_tmp_path("l.f32"));
    snprintf(args, sizeof args, "logits -m %s --tokens 1,403,407 -o %s -b 2", stories(), out);
    cr_assert_eq(tu_run_cli(args, NULL, NULL), 0);
    size_t size;
    free(tu_read_file(out, &size));
    remove(out);
    cr_expect_eq(size, 3 * 512 * sizeof(float));
}

Test(cli_bench, prints_a_llama_bench_table)
{
    char args[16384], *out, *err;
    snprintf(args, sizeof args, "bench -m %s -p 16 -n 8 -r 2 -t 2", stories());
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "| model") && strstr(out, "t/s |") && strstr(out, "pp16") && strstr(out, "tg8"),
              "%s", out);
    cr_expect(strstr(out, "±") != NULL, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench -m %s -r 0", stories());
    expect_failure(args, "-r 0 is out of range");
    snprintf(args, sizeof args, "bench -m %s -p 0 -n 0", stories());
    expect_failure(args, "nothing to measure");
}

/* Runs `woolly ARGS <in` (tu_run_cli feeds /dev/null); returns the exit status, captures the output. */
static int run_with_stdin(const char *args, const char *input, char **out, char **err)
{
    char in[4096], o[4096], e[4096], cmd[16384];
    snprintf(in, sizeof in, "%s", tu_tmp_path("chat.in"));
    snprintf(o, sizeof o, "%s", tu_tmp_path("chat.out"));
    snprintf(e, sizeof e, "%s", tu_tmp_path("chat.err"));
    FILE *f = fopen(in, "w");
    cr_assert(f != NULL);
    fputs(input, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s %s <%s >%s 2>%s", WOOLLY_CLI, args, in, o, e);
    const int st = system(cmd);
    *out = tu_read_file(o, NULL);
    *err = tu_read_file(e, NULL);
    remove(in);
    remove(o);
    remove(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(cli_chat, two_turns_from_stdin)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -n 12 --temp 0 --chat-template plain", stories());
    const int st =
        run_with_stdin(args, "Once upon a time\nThe girl saw a dog\n/exit\nnot read\n", &out, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(err, "chat template plain") != NULL, "%s", err);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    cr_expect_eq(lines, 2, "two replies, one line each, expected:\n%s", out);
    cr_expect_gt(strlen(out), 10);
    free(out);
    free(err);
}

Test(cli_chat, end_of_input_ends_the_chat_and_bad_template_names_fail)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -n 4 --temp 0", stories());
    cr_expect_eq(run_with_stdin(args, "Hello", &out, &err), 0, "%s", err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "chat -m %s --chat-template vicuna", stories());
    expect_failure(args, "--chat-template 'vicuna'");
}

Test(cli_chat, later_turns_reuse_the_cache)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -n 20 --temp 0 -v", stories());
    cr_assert_eq(run_with_stdin(args, "Hello there\nAgain\n", &out, &err), 0, "%s", err);
    int reused1, new1, reused2, new2;
    const char *t1 = strstr(err, "[turn 1:"), *t2 = strstr(err, "[turn 2:");
    cr_assert(t1 && t2, "%s", err);
    cr_assert_eq(sscanf(t1, "[turn 1: %d tokens reused from the cache, %d evaluated]", &reused1, &new1), 2,
                 "%s", err);
    cr_assert_eq(sscanf(t2, "[turn 2: %d tokens reused from the cache, %d evaluated]", &reused2, &new2), 2,
                 "%s", err);
    cr_expect_eq(reused1, 0);
    /* The first turn's prompt and reply are in the cache: only the new user line is evaluated. */
    cr_expect_geq(reused2, new1 + 10, "turn 2 reused %d tokens; turn 1 evaluated %d and generated up to 20",
                  reused2, new1);
    cr_expect_lt(new2, new1 + 10, "turn 2 evaluated %d tokens", new2);
    free(out);
    free(err);
}

Test(cli_chat, recognizes_the_template_stored_in_the_model)
{
    const char *families[] = {"granite", "llama2", "llama3", "chatml"};
    for (int i = 0; i < 4; i++) {
        char path[4096], args[16384], *out, *err;
        snprintf(path, sizeof path, "%s", tu_tmp_path("chat.gguf"));
        snprintf(args, sizeof args,
                 "synth --n-layer 1 --n-embd 64 --n-ff 128 --n-head 2 --n-head-kv 1 --type F32 -q "
                 "--chat-template %s -o %s",
                 families[i], path);
        cr_assert_eq(tu_run_cli(args, NULL, &err), 0, "synth: %s", err);
        free(err);
        snprintf(args, sizeof args, "chat -m %s -n 3 --temp 0", path);
        const int st = run_with_stdin(args, "Hello\nAgain\n", &out, &err);
        remove(path);
        cr_expect_eq(st, 0, "%s: %s", families[i], err);
        char want[128];
        snprintf(want, sizeof want, "chat template the model's own (Jinja, recognized as %s);", families[i]);
        cr_expect(strstr(err, want) != NULL, "expected '%s' in:\n%s", want, err);
        free(out);
        free(err);
    }
}

Test(cli_help, every_model_command_has_help)
{
    const char *cmds[] = {"run", "chat", "logits", "bench"};
    for (int i = 0; i < 4; i++) {
        char args[64], *out;
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        cr_expect_eq(tu_run_cli(args, &out, NULL), 0, "%s", args);
        cr_expect(strstr(out, "usage: woolly") && strstr(out, "--threads"), "%s:\n%s", args, out);
        free(out);
    }
}
