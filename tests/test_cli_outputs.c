/* A command's output must never be one of its inputs: the input is memory-mapped while the output is
 * written, so writing over it would crash the command or destroy the model. Each case runs on a copy
 * of a shared file and checks the copy is left exactly as it was. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char *copy_of(const char *rel, const char *name, char **bytes, size_t *size)
{
    *bytes = tu_read_file(tu_data(rel), size);
    char *path = strdup(tu_tmp_path(name));
    FILE *f = fopen(path, "wb");
    cr_assert(path && f);
    cr_assert_eq(fwrite(*bytes, 1, *size, f), *size);
    fclose(f);
    return path;
}

static void refused_and_unchanged(const char *args, const char *path, const char *bytes, size_t size)
{
    char *out, *err;
    const int st = tu_run_cli(args, &out, &err);
    cr_assert(st != 0, "woolly %s exited 0", args);
    cr_assert(strstr(err, "refusing to overwrite"), "woolly %s: stderr: %s", args, err);
    size_t now_size;
    char *now = tu_read_file(path, &now_size);
    cr_assert(now_size == size && memcmp(now, bytes, size) == 0, "woolly %s changed %s", args, path);
    free(now), free(out), free(err);
}

Test(cli_outputs, logits_will_not_write_over_its_model)
{
    char *bytes, args[16384];
    size_t size;
    char *model = copy_of("models/stories260K.gguf", "own-logits.gguf", &bytes, &size);
    snprintf(args, sizeof args, "logits -m %s --tokens 1,2,3 -o %s", model, model);
    refused_and_unchanged(args, model, bytes, size);

    /* another name for the same file */
    char *alias = strdup(tu_tmp_path("own-logits-link.gguf"));
    cr_assert_eq(link(model, alias), 0);
    snprintf(args, sizeof args, "logits -m %s --tokens 1,2,3 -o %s", model, alias);
    refused_and_unchanged(args, model, bytes, size);
    remove(alias), remove(model), free(alias), free(model), free(bytes);
}

Test(cli_outputs, quantize_will_not_write_over_its_input)
{
    char *bytes, args[16384];
    size_t size;
    char *model = copy_of("models/tiny-llama-q8_0.gguf", "own-quantize.gguf", &bytes, &size);
    snprintf(args, sizeof args, "quantize -q %s %s Q4_K_M", model, model);
    refused_and_unchanged(args, model, bytes, size);
    remove(model), free(model), free(bytes);
}

Test(cli_outputs, synth_will_not_write_over_its_vocabulary)
{
    char *bytes, args[16384];
    size_t size;
    char *vocab = copy_of("vocab/ggml-vocab-llama-spm.gguf", "own-vocab.gguf", &bytes, &size);
    snprintf(args, sizeof args, "synth -q --vocab %s -o %s", vocab, vocab);
    refused_and_unchanged(args, vocab, bytes, size);
    remove(vocab), free(vocab), free(bytes);
}
