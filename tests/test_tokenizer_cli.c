/* `woolly tokenize` and `woolly detokenize` on vocabulary-only GGUF files, through the real command. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "testutil.h"
#include "tokenizer.h"

#define SPM "vocab/ggml-vocab-llama-spm.gguf"
#define STARCODER "vocab/ggml-vocab-starcoder.gguf"

/* Runs `woolly ARGS` (printf-style) and returns the exit status; *out and *err are heap strings. */
static int cli(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cli(char **out, char **err, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return tu_run_cli(args, out, err);
}

static void write_file(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

Test(cli_tokenize, text_with_and_without_bos)
{
    char *out, *err;
    cr_assert_eq(cli(&out, &err, "tokenize -m %s 'Hello world'", tu_data(SPM)), 0, "stderr: %s", err);
    cr_assert_str_eq(out, "1,15043,3186\n");
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, "tokenize -m %s --no-bos 'Hello world'", tu_data(SPM)), 0, "stderr: %s",
                 err);
    cr_assert_str_eq(out, "15043,3186\n");
    free(out);
    free(err);
    /* StarCoder's vocabulary adds no BOS. */
    cr_assert_eq(cli(&out, &err, "tokenize -m %s 'Hello world'", tu_data(STARCODER)), 0, "stderr: %s", err);
    cr_assert_str_eq(out, "8302,5810\n");
    free(out);
    free(err);
}

Test(cli_tokenize, special)
{
    char *out, *err;
    cr_assert_eq(cli(&out, &err, "tokenize -m %s --no-bos --special '<s>Hello'", tu_data(SPM)), 0, "%s", err);
    cr_assert_str_eq(out, "1,15043\n");
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, "tokenize -m %s --no-bos '<s>Hello'", tu_data(SPM)), 0, "%s", err);
    cr_assert(strncmp(out, "1,", 2) != 0 && strchr(out, ','), "without --special <s> is text: %s", out);
    free(out);
    free(err);
}

Test(cli_tokenize, file_is_taken_byte_for_byte)
{
    /* The file ends with a newline, which must be tokenized (<0x0A> is 13), not stripped. */
    const char text[] = "Hello world\n  two spaces\tand a tab\n";
    char path[4096];
    snprintf(path, sizeof path, "%s", tu_tmp_path("text.txt"));
    write_file(path, text, sizeof text - 1);

    woolly_error e = {{0}};
    woolly_tokenizer *t = woolly_tokenizer_open_file(tu_data(SPM), &e);
    cr_assert(t != NULL, "%s", e.msg);
    int32_t ids[64];
    woolly_tokenize_opts opts = {true, false, false};
    int64_t n = woolly_tokenize(t, text, sizeof text - 1, &opts, ids, 64, &e);
    cr_assert(n > 2 && n <= 64);
    cr_assert_eq(ids[n - 1], 13);
    char want[1024] = "";
    for (int64_t i = 0, o = 0; i < n; i++)
        o += snprintf(want + o, sizeof want - (size_t)o, i ? ",%d" : "%d", ids[i]);
    strcat(want, "\n");
    woolly_tokenizer_close(t);

    char *out, *err;
    cr_assert_eq(cli(&out, &err, "tokenize -m %s --file %s", tu_data(SPM), path), 0, "%s", err);
    cr_assert_str_eq(out, want);

    /* And back: detokenize gives the file's bytes exactly, trailing newline included. */
    char *out2, *err2;
    out[strlen(out) - 1] = 0;
    cr_assert_eq(cli(&out2, &err2, "detokenize -m %s %s", tu_data(SPM), out), 0, "%s", err2);
    cr_assert_str_eq(out2, text);
    free(out);
    free(err);
    free(out2);
    free(err2);
    remove(path);
}

Test(cli_detokenize, ids_in_any_separation)
{
    char *out, *err;
    cr_assert_eq(cli(&out, &err, "detokenize -m %s 1,15043,3186", tu_data(SPM)), 0, "%s", err);
    cr_assert_str_eq(out, "Hello world");
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, "detokenize -m %s 15043 3186, 29991", tu_data(SPM)), 0, "%s", err);
    cr_assert_str_eq(out, "Hello world!");
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, "detokenize -m %s 8302,5810", tu_data(STARCODER)), 0, "%s", err);
    cr_assert_str_eq(out, "Hello world");
    free(out);
    free(err);
}

static void expect_failure(const char *args, const char *needle)
{
    char *out, *err;
    int rc = tu_run_cli(args, &out, &err);
    cr_assert(rc > 0, "'woolly %s' exited with %d", args, rc);
    cr_assert(strstr(err, needle), "'woolly %s': stderr '%s' does not mention '%s'", args, err, needle);
    cr_assert_str_eq(out, "", "'woolly %s' printed '%s' on failure", args, out);
    free(out);
    free(err);
}

Test(cli_errors, clear_messages)
{
    char args[8192];
    snprintf(args, sizeof args, "detokenize -m %s 1,32000", tu_data(SPM));
    expect_failure(args, "32000");
    snprintf(args, sizeof args, "detokenize -m %s 1,-5", tu_data(SPM));
    expect_failure(args, "-5");
    snprintf(args, sizeof args, "detokenize -m %s 1,x2", tu_data(SPM));
    expect_failure(args, "'x2'");
    snprintf(args, sizeof args, "detokenize -m %s", tu_data(SPM));
    expect_failure(args, "no token ids");
    snprintf(args, sizeof args, "detokenize -m %s ,", tu_data(SPM));
    expect_failure(args, "no token ids");
    expect_failure("tokenize -m /nonexistent/model.gguf hi", "/nonexistent/model.gguf");
    expect_failure("tokenize hi", "-m MODEL is required");
    snprintf(args, sizeof args, "tokenize -m %s --file /nonexistent/text.txt", tu_data(SPM));
    expect_failure(args, "/nonexistent/text.txt");
    snprintf(args, sizeof args, "tokenize -m %s --bogus hi", tu_data(SPM));
    expect_failure(args, "--bogus");
    /* A full model file works as well as a vocabulary-only one. */
    snprintf(args, sizeof args, "tokenize -m %s hi", tu_data("models/stories260K.gguf"));
    char *out, *err;
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    free(out);
    free(err);
}

Test(cli_errors, unknown_pre_tokenizer)
{
    char path[4096]; /* tu_tmp_path's buffer is reused by tu_run_cli */
    snprintf(path, sizeof path, "%s", tu_tmp_path("pre.gguf"));
    woolly_error e = {{0}};
    gguf_writer *w = gguf_writer_open(path, &e);
    cr_assert(w != NULL, "%s", e.msg);
    const char *toks[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "chameleon");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    cr_assert_eq(gguf_writer_write_header(w, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_writer_close(w, &e), 0, "%s", e.msg);
    char args[8192];
    snprintf(args, sizeof args, "tokenize -m %s ab", path);
    expect_failure(args, "'chameleon'");
    snprintf(args, sizeof args, "detokenize -m %s 0", path);
    expect_failure(args, "'chameleon'");

    /* A file with no tokenizer at all. */
    w = gguf_writer_open(path, &e);
    cr_assert(w != NULL, "%s", e.msg);
    gguf_writer_set_str(w, "general.architecture", "llama");
    cr_assert_eq(gguf_writer_write_header(w, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_writer_close(w, &e), 0, "%s", e.msg);
    snprintf(args, sizeof args, "tokenize -m %s ab", path);
    expect_failure(args, "no tokenizer");
    remove(path);
}

Test(cli_tokenize, text_starting_with_a_dash)
{
    char *out, *err;
    /* "-5 degrees" in GPT-2: "-", "5", " degrees" */
    cr_assert_eq(cli(&out, &err, "tokenize -m %s -- '-5 degrees'", tu_data("vocab/ggml-vocab-gpt-2.gguf")), 0,
                 "%s", err);
    cr_assert_str_eq(out, "12,20,7370\n");
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, "tokenize -m %s '-5 degrees'", tu_data("vocab/ggml-vocab-gpt-2.gguf")), 2);
    cr_assert(strstr(err, "unknown option"), "%s", err);
    free(out);
    free(err);
}
