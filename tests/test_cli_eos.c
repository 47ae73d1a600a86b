/* End of generation: `woolly run` stops at EOS, and --ignore-eos goes on. No shared model emits EOS in
 * a short greedy run, so the test makes one that does: stories260K with the output row of EOS set to
 * 1.01x the row of ',' — the greedy choice after "Once upon a time" — so EOS wins right there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "testutil.h"

enum { EOS = 2, COMMA = 432, N_EMBD = 64 };

static char *make_eos_model(void)
{
    size_t size;
    char *buf = tu_read_file(tu_data("models/stories260K.gguf"), &size);
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(buf, size, &err);
    cr_assert(g != NULL, "%s", err.msg);
    const gguf_tensor *out = gguf_find_tensor(g, "output.weight");
    cr_assert(out && out->type == WOOLLY_TYPE_F32 && out->ne[0] == N_EMBD);
    float *w = (float *)(buf + ((const char *)out->data - buf)); /* our own heap copy */
    for (int i = 0; i < N_EMBD; i++)
        w[EOS * N_EMBD + i] = 1.01f * w[COMMA * N_EMBD + i];
    gguf_close(g);

    char *path = strdup(tu_tmp_path("stories-eos.gguf"));
    FILE *f = fopen(path, "wb");
    cr_assert(f && path);
    cr_assert_eq(fwrite(buf, 1, size, f), size);
    fclose(f);
    free(buf);
    return path;
}

/* The count in the "generation N tokens" line of the timing summary. */
static int generated(const char *err)
{
    const char *p = strstr(err, "generation");
    cr_assert(p, "no timing summary in: %s", err);
    return atoi(p + strlen("generation"));
}

Test(run, stops_at_eos_unless_told_to_ignore_it)
{
    char *model = make_eos_model(), args[8192], *out, *err;

    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 8 --temp 0", model);
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_assert_str_eq(out, "Once upon a time", "stdout: '%s'", out);
    cr_assert_eq(generated(err), 0, "%s", err);
    free(out), free(err);

    snprintf(args, sizeof args, "run -m %s -p \"Once upon a time\" -n 8 --temp 0 --ignore-eos", model);
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_assert_eq(generated(err), 7, "8 tokens sampled, 7 of them evaluated: %s", err);
    free(out), free(err);

    remove(model);
    free(model);
}
