/* woolly chat with a template it can neither render nor recognize (a clear error naming --chat-template,
 * nothing guessed), with the model's own template rendered by the Jinja interpreter, with the fallback to
 * a recognized family when the interpreter fails, and with --context-shift carrying a chat through a
 * context it overflows several times. The model is stories260K, copied with the template. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gguf.h"
#include "gguf_check.h"
#include "gguf_write.h"
#include "testutil.h"

/* stories260K with tokenizer.chat_template = tmpl, written to a temporary file. */
static const char *with_template(const char *name, const char *tmpl)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_tmp_path(name));
    gguf_file *src = tu_gguf_open(tu_data("models/stories260K.gguf"));
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    for (uint64_t i = 0; i < src->n_kv; i++)
        if (!gguf_str_eq(src->kv[i].key, "tokenizer.chat_template"))
            gguf_writer_copy_kv(w, &src->kv[i]);
    gguf_writer_set_str(w, "tokenizer.chat_template", tmpl);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *t = &src->tensors[i];
        cr_assert_eq(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne), (int)i);
    }
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < src->n_tensors; i++)
        cr_assert_eq(gguf_writer_write_data(w, src->tensors[i].data, src->tensors[i].nbytes, &err), 0, "%s",
                     err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    gguf_close(src);
    return path;
}

/* Runs `woolly ARGS <input`; returns the exit status and captures the output. */
static int run_with_stdin(const char *args, const char *input, char **out, char **err)
{
    char in[4096], o[4096], e[4096], cmd[16384];
    snprintf(in, sizeof in, "%s", tu_tmp_path("shift.in"));
    snprintf(o, sizeof o, "%s", tu_tmp_path("shift.out"));
    snprintf(e, sizeof e, "%s", tu_tmp_path("shift.err"));
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

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(cli_chat_template, unknown_template_asks_for_chat_template)
{
    /* an unknown filter: the interpreter cannot render it, and no family's markers are in it */
    const char *model =
        with_template("unknown-tmpl.gguf", "{% for m in messages %}### {{ m.content | frobnicate }}{% endfor %}");
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -n 4 --temp 0", model);
    cr_assert_gt(run_with_stdin(args, "Hello\n", &out, &err), 0, "an unknown template must not be guessed");
    cr_expect(strstr(err, "--chat-template") && strstr(err, "tokenizer.chat_template"), "%s", err);
    cr_expect_str_eq(out, "");
    free(out);
    free(err);
    /* Naming a format goes on. */
    snprintf(args, sizeof args, "chat -m %s -n 4 --temp 0 --chat-template chatml", model);
    cr_expect_eq(run_with_stdin(args, "Hello\n", &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "chat template chatml;") != NULL, "%s", err);
    free(out);
    free(err);
    remove(model);
}

Test(cli_chat_template, the_models_own_template_renders)
{
    /* a format no built-in knows: rendered as the template says */
    const char *model = with_template("own-tmpl.gguf", "{% for m in messages %}### {{ m.content }}\n{% endfor %}"
                                                       "{% if add_generation_prompt %}###{% endif %}");
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -n 4 --temp 0", model);
    cr_expect_eq(run_with_stdin(args, "Hello\n", &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "chat template the model's own (Jinja);") != NULL, "%s", err);
    free(out);
    free(err);
    remove(model);
}

/* --chat-template-file: a Jinja template in place of the model's; one that cannot render is an error
 * naming the file (a template given on purpose is not replaced by a built-in); a missing file, an empty
 * one or the two template flags together are usage errors. */
Test(cli_chat_template, a_template_file_replaces_the_models)
{
    static const struct {
        const char *text; /* NULL: no file */
        bool with_name;
        int status;
        const char *says;
    } CASES[] = {
        {"{% for m in messages %}### {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}###{% endif %}",
         false, 0, "chat template the template given (Jinja);"},
        {"{% for message in messages %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% endfor %}"
         "{{ '<|assistant|>\\n' }}",
         false, 0, "chat template the template given (Jinja, recognized as phi3);"},
        {"{% for m in messages %}{{ m.content | frobnicate }}{% endfor %}", false, 1, "cannot be rendered"},
        {"", false, 2, "is empty"},
        {NULL, false, 2, "cannot read"},
        {"{{ messages[0].content }}", true, 2, "exclude each other"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char path[4096], args[8192], *out, *err;
        snprintf(path, sizeof path, "%s", tu_tmp_path("given.jinja"));
        remove(path);
        if (CASES[i].text) {
            FILE *f = fopen(path, "w");
            cr_assert(f != NULL);
            fputs(CASES[i].text, f);
            fclose(f);
        }
        snprintf(args, sizeof args, "chat -m %s -n 3 --temp 0 --chat-template-file %s%s",
                 tu_data("models/stories260K.gguf"), path, CASES[i].with_name ? " --chat-template chatml" : "");
        cr_expect_eq(run_with_stdin(args, "Hello\n", &out, &err), CASES[i].status, "case %zu: %s", i, err);
        cr_expect(strstr(err, CASES[i].says) != NULL, "case %zu: expected '%s' in\n%s", i, CASES[i].says, err);
        if (CASES[i].status == 1)
            cr_expect(strstr(err, path) && strstr(err, "frobnicate"), "case %zu: %s", i, err);
        free(out);
        free(err);
    }
}

/* The families' templates render through the interpreter; one it cannot render (system_prompt is
 * undefined there: a string plus undefined is an error) falls back to the family its markers name. */
Test(cli_chat_template, new_families_recognized_from_the_model)
{
    const char *tmpls[][2] = {
        {"the model's own (Jinja, recognized as gemma)",
         "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
         "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"},
        {"the model's own (Jinja, recognized as phi3)",
         "{% for message in messages %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% endfor %}"
         "{{ '<|assistant|>\\n' }}"},
        {"mistral-v7", "{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{{- '[INST]' }}"},
    };
    for (int i = 0; i < 3; i++) {
        const char *model = with_template("family-tmpl.gguf", tmpls[i][1]);
        char args[8192], *out, *err, want[128];
        snprintf(args, sizeof args, "chat -m %s -n 3 --temp 0", model);
        cr_expect_eq(run_with_stdin(args, "Hello\nAgain\n", &out, &err), 0, "%s: %s", tmpls[i][0], err);
        snprintf(want, sizeof want, "chat template %s;", tmpls[i][0]);
        cr_expect(strstr(err, want) != NULL, "expected '%s' in\n%s", want, err);
        cr_expect_eq(strstr(err, "warning: cannot render the model's chat template") != NULL, i == 2, "%s", err);
        free(out);
        free(err);
        remove(model);
    }
}

#define SHIFT_INPUT "Once upon a time\nThe cat sat\nThe dog ran\nLily was happy\n"

Test(cli_chat_shift, a_full_context_stops_without_context_shift)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -c 64 -n 40 --temp 0 -s \"A story.\"",
             tu_data("models/stories260K.gguf"));
    cr_expect_gt(run_with_stdin(args, SHIFT_INPUT, &out, &err), 0);
    cr_expect(strstr(err, "is full") && strstr(err, "--context-shift"), "%s", err);
    free(out);
    free(err);
}

/* Four turns of up to 40 tokens in 64 positions: the context overflows within turns and between them;
 * each shift keeps the system prompt's tokens, and every turn gets its reply. */
Test(cli_chat_shift, shifts_keep_the_system_prompt_and_the_chat_goes_on)
{
    char args[8192], *out, *err;
    snprintf(args, sizeof args, "chat -m %s -c 64 -n 40 --temp 0 -v --context-shift -s \"A story.\"",
             tu_data("models/stories260K.gguf"));
    cr_assert_eq(run_with_stdin(args, SHIFT_INPUT, &out, &err), 0, "%s", err);
    const int shifts = count(err, "[context shift: ");
    cr_expect_geq(shifts, 4, "%d shifts:\n%s", shifts, err);
    /* The kept count is the system prompt's tokens (BOS + "A story.\n\n"), the same at every shift. */
    int keep_first = -1;
    for (const char *p = err; (p = strstr(p, "[context shift: ")); p++) {
        int keep, gone, moved;
        cr_assert_eq(
            sscanf(p, "[context shift: %d tokens kept, %d forgotten, %d moved]", &keep, &gone, &moved), 3);
        if (keep_first < 0)
            keep_first = keep;
        cr_expect_eq(keep, keep_first);
        cr_expect_gt(gone, 0);
        cr_expect_leq(keep + moved, 64);
    }
    cr_expect_geq(keep_first, 3, "the system prompt is kept (%d tokens)", keep_first);
    cr_expect_eq(count(err, "[turn "), 4, "%s", err);
    int lines = count(out, "\n");
    cr_expect_eq(lines, 4, "one reply per turn:\n%s", out);
    free(out);
    free(err);
}

/* woolly run --context-shift generates past the context; until the first shift its text is the text of a
 * run without it. */
Test(cli_run_shift, generates_past_the_context)
{
    char args[8192], *out, *err, *out_plain, *err_plain;
    const char *model = tu_data("models/stories260K.gguf");
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 200 -c 48 --temp 0 --context-shift",
             model);
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "generation    199 tokens") != NULL, "%s", err);
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 200 -c 48 --temp 0", model);
    cr_expect_eq(tu_run_cli(args, &out_plain, &err_plain), 1, "stops when the context is full");
    cr_expect(strstr(err_plain, "--context-shift") != NULL, "%s", err_plain);
    const size_t n = strlen(out_plain);
    cr_expect_gt(strlen(out), n + 100, "the shifted run goes on:\n%s", out);
    cr_expect(n > 20 && !strncmp(out, out_plain, n), "the same text until the context is full:\n%s\n---\n%s",
              out, out_plain);
    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 20 -c 6 --context-shift --keep -1",
             model);
    free(err);
    cr_expect_eq(tu_run_cli(args, NULL, &err), 1, "a --keep that leaves no room is refused");
    cr_expect(strstr(err, "--keep") != NULL, "%s", err);
    free(out);
    free(err);
    free(out_plain);
    free(err_plain);
}
