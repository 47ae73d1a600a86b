/* `woolly run --grammar-file` and `--json-schema` on stories260K: the continuation is a sentence of the
 * grammar (through context shifts too), a grammar no token can continue ends the output cleanly, and a
 * malformed grammar or an unsupported schema keyword is a clear error with a non-zero exit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *write_file(const char *name, const char *text)
{
    const char *path = tu_tmp_path(name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

/* woolly run with a grammar flag; the exit status, stdout and stderr. */
static int run(const char *flag, const char *path, const char *extra, char **out, char **err)
{
    char args[4096];
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 400 -t 1 --temp 1 --seed 5 %s %s %s",
             tu_data("models/stories260K.gguf"), flag, path, extra);
    return tu_run_cli(args, out, err);
}

Test(grammar_cli, the_continuation_is_a_sentence_of_the_grammar)
{
    const char *path = write_file("animal.gbnf", "# a comment\nroot ::= \" the \" animal \" slept.\"\n"
                                                 "animal ::= \"cat\" | \"dog\" | \"bird\"\n");
    char *out, *err;
    cr_assert_eq(run("--grammar-file", path, "", &out, &err), 0, "%s", err);
    cr_expect(!strcmp(out, "Once upon a time the cat slept.") || !strcmp(out, "Once upon a time the dog slept.") ||
                  !strcmp(out, "Once upon a time the bird slept."),
              "stdout: '%s'", out);
    free(out), free(err);
    remove(path);
}

Test(grammar_cli, a_context_shift_keeps_the_grammar_state)
{
    /* 12 x 16 characters through a context of 32 positions: several shifts; --ignore-eos does not keep a
     * finished grammar going. */
    const char *path = write_file("long.gbnf", "root ::= (\" a b c d e f g h\"){12} \" end.\"\n");
    char *out, *err;
    cr_assert_eq(run("--grammar-file", path, "-c 32 --context-shift --ignore-eos", &out, &err), 0, "%s", err);
    char want[256] = "Once upon a time";
    for (int i = 0; i < 12; i++)
        strcat(want, " a b c d e f g h");
    strcat(want, " end.");
    cr_expect_str_eq(out, want);
    free(out), free(err);
    remove(path);
}

Test(grammar_cli, a_json_schema_gives_json_of_its_shape)
{
    const char *path = write_file("schema.json", "{\"type\": \"array\", \"items\": {\"enum\": [\"x\", 1, null]}, "
                                                 "\"minItems\": 2, \"maxItems\": 2}");
    char *out, *err;
    cr_assert_eq(run("--json-schema", path, "", &out, &err), 0, "%s", err);
    const char *p = out + strlen("Once upon a time");
    cr_assert(!strncmp(out, "Once upon a time", strlen("Once upon a time")), "stdout: '%s'", out);
    /* two items of the enum, a comma between, white space anywhere between tokens */
    int items = 0;
    p += strspn(p, " \t\n");
    cr_assert_eq(*p, '[', "stdout: '%s'", out);
    for (p++;; p++) {
        p += strspn(p, " \t\n");
        if (!strncmp(p, "\"x\"", 3))
            p += 3;
        else if (!strncmp(p, "1", 1))
            p += 1;
        else if (!strncmp(p, "null", 4))
            p += 4;
        else
            cr_assert_fail("not an item at '%s' of '%s'", p, out);
        items++;
        p += strspn(p, " \t\n");
        if (*p != ',')
            break;
    }
    cr_expect_eq(*p, ']', "stdout: '%s'", out);
    cr_expect_str_eq(p + 1, "", "stdout: '%s'", out);
    cr_expect_eq(items, 2, "stdout: '%s'", out);
    free(out), free(err);
    remove(path);
}

Test(grammar_cli, a_grammar_no_token_can_continue_ends_the_output)
{
    const char *path = write_file("dead.gbnf", "root ::= \" x\" []\n");
    char *out, *err;
    cr_assert_eq(run("--grammar-file", path, "--ignore-eos", &out, &err), 0, "%s", err);
    cr_expect_str_eq(out, "Once upon a time x");
    free(out), free(err);
    remove(path);
}

Test(grammar_cli, bad_grammars_and_schemas_are_clear_errors)
{
    char *out, *err;
    const char *path = write_file("bad.gbnf", "root ::= \"a\" |\n  [b-");
    int rc = run("--grammar-file", path, "", &out, &err);
    cr_expect_neq(rc, 0, "a malformed grammar was accepted: %s", out);
    cr_expect(strstr(err, "bad.gbnf") && strstr(err, "line 2, column 3"), "stderr: %s", err);
    cr_expect_str_eq(out, "", "nothing is generated");
    free(out), free(err);
    remove(path);

    path = write_file("undefined.gbnf", "root ::= thing\n");
    rc = run("--grammar-file", path, "", &out, &err);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err, "thing") != NULL, "stderr: %s", err);
    free(out), free(err);
    remove(path);

    path = write_file("pattern.json", "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
                                      "\"pattern\": \"^a\"}}}");
    rc = run("--json-schema", path, "", &out, &err);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err, "unsupported keyword 'pattern'") != NULL, "stderr: %s", err);
    free(out), free(err);
    remove(path);

    rc = run("--grammar-file", tu_tmp_path("missing.gbnf"), "", &out, &err);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err, "missing.gbnf") != NULL, "stderr: %s", err);
    free(out), free(err);

    path = write_file("ok.gbnf", "root ::= \"a\"\n");
    rc = run("--grammar-file", path, "--json-schema x.json", &out, &err);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err, "exclude") != NULL, "stderr: %s", err);
    free(out), free(err);
    remove(path);
}
