/* woolly logits: the logits of every position of a token sequence, as little-endian float32,
 * row-major [n_tokens][n_vocab] (the format of the reference files in the shared test data). The
 * tokens are evaluated as one sequence, in batches of --batch-size. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_common.h"
#include "commands.h"

int woolly_cmd_logits(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *tokens = NULL, *out_path = NULL;
    cli_context_opts ctx_opts;
    cli_table t = {.synopsis = "-m MODEL --tokens 1,2,3 -o OUT.f32 [options]"};
    cli_add_model_flag(&t, &model_path);
    cli_add_required(&t, (cli_flag){NULL, "--tokens", CLI_STR, &tokens, 0, 0, "IDS",
                                    "comma-separated token ids, evaluated as one sequence (e.g. 1,403,407)",
                                    NULL});
    cli_add_required(&t, (cli_flag){"-o", "--output", CLI_STR, &out_path, 0, 0, "OUT.f32",
                                    "where to write the logits: float32 LE [n_tokens][n_vocab]", NULL});
    cli_add_context_flags(&t, &ctx_opts);
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (cli_output_is_input(cmd, out_path, model_path))
        return 2;

    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m)
        return 1;
    int status = 1;
    woolly_token *ids = NULL;
    woolly_context *c = NULL;
    FILE *f = NULL;
    const int32_t n = cli_parse_tokens(cmd, tokens, woolly_model_n_vocab(m), &ids);
    if (n < 0)
        goto done;
    woolly_context_params cp;
    cli_context_params(cmd, &ctx_opts, m, &cp);
    if (!ctx_opts.n_ctx_given)
        cp.n_ctx = n; /* exactly the sequence */
    else if (n > cp.n_ctx) {
        fprintf(stderr, "woolly %s: %d tokens do not fit the context size %d\n", cmd, n, cp.n_ctx);
        goto done;
    }
    cp.logits_all = true;
    if (!(c = woolly_context_open(m, &cp))) {
        cli_api_error(cmd);
        goto done;
    }
    if (!(f = fopen(out_path, "wb"))) {
        fprintf(stderr, "woolly %s: cannot write %s\n", cmd, out_path);
        goto done;
    }
    const int32_t nb = woolly_context_n_batch(c), nv = woolly_model_n_vocab(m);
    for (int32_t done = 0; done < n;) {
        const int32_t chunk = n - done < nb ? n - done : nb;
        if (woolly_eval(c, ids + done, chunk)) {
            cli_api_error(cmd);
            goto done;
        }
        for (int32_t i = 0; i < chunk; i++) {
            const float *row = woolly_get_logits(c, i);
            /* float32 in memory is the file format on the little-endian machines we build for. */
            if (!row || fwrite(row, sizeof(float), (size_t)nv, f) != (size_t)nv) {
                fprintf(stderr, "woolly %s: cannot write %s\n", cmd, out_path);
                goto done;
            }
        }
        done += chunk;
    }
    if (fclose(f)) {
        f = NULL;
        fprintf(stderr, "woolly %s: cannot write %s\n", cmd, out_path);
        goto done;
    }
    f = NULL;
    status = 0;
done:
    if (f)
        fclose(f);
    woolly_context_close(c);
    free(ids);
    woolly_model_close(m);
    return status;
}
