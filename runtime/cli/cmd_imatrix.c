/* woolly imatrix: the importance statistics of a model's matrices over a text (woolly.h's
 * woolly_imatrix), in llama.cpp's imatrix GGUF format, so that either tool's quantizer reads either
 * tool's file. The text is cut and evaluated as `woolly perplexity` does (perplexity_stats.h: chunks of -c
 * tokens from an empty cache, BOS first), and every position of every chunk counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_progress.h"
#include "commands.h"
#include "perplexity_stats.h"

#define DEFAULT_CTX 512

/* Chunk k of ch from an empty cache, in batches. */
static int eval_chunk(const char *cmd, woolly_context *c, const woolly_token *tokens, woolly_token bos,
                      const ppl_chunking *ch, int32_t k, woolly_token *chunk, cli_progress *progress)
{
    const int32_t n_ctx = ch->n_ctx, n_batch = woolly_context_n_batch(c);
    memcpy(chunk, tokens + (int64_t)k * n_ctx, sizeof *chunk * (size_t)n_ctx);
    if (bos >= 0)
        chunk[0] = bos;
    if (woolly_context_rewind(c, 0)) {
        cli_api_error(cmd);
        return -1;
    }
    for (int32_t p0 = 0; p0 < n_ctx; p0 += n_batch) {
        const int32_t n = n_ctx - p0 < n_batch ? n_ctx - p0 : n_batch;
        if (woolly_eval(c, chunk + p0, n)) {
            cli_progress_clear(progress);
            cli_api_error(cmd);
            return -1;
        }
        cli_progress_update(progress, (int64_t)k * n_ctx + p0 + n, NULL, 0, 0);
    }
    return 0;
}

int woolly_cmd_imatrix(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *text_path = NULL, *out_path = NULL;
    int32_t max_chunks = 0;
    bool quiet = false;
    cli_context_opts ctx_opts;
    cli_table t = {
        .synopsis = "-m MODEL -f TEXT -o FILE [-c 512] [-b 512] [--chunks N] [-t T]",
        .about =
            "The importance matrix of MODEL over the text in TEXT: per weight matrix, each input column's\n"
            "sum of squares over every token evaluated (per expert for a mixture of experts), and the\n"
            "token counts, written to FILE in llama.cpp's imatrix GGUF format. `woolly quantize\n"
            "--imatrix FILE` and llama.cpp's `llama-quantize --imatrix FILE` read it. The text is cut\n"
            "into chunks of -c tokens, each evaluated from an empty cache with BOS first, as `woolly\n"
            "perplexity` does; the output matrix is left out, as llama.cpp's tool leaves it out.\n",
    };
    cli_add_model_flag(&t, &model_path);
    cli_add_required(&t, (cli_flag){"-f", "--file", CLI_STR, &text_path, 0, 0, "TEXT",
                                    "the text to evaluate (exactly its bytes)", NULL});
    cli_add_required(&t, (cli_flag){"-o", "--output", CLI_STR, &out_path, 0, 0, "FILE",
                                    "the imatrix GGUF file to write", NULL});
    cli_add(&t, (cli_flag){NULL, "--chunks", CLI_INT, &max_chunks, 1, INT32_MAX, "N",
                           "evaluate at most the first N chunks (default: all the text holds)", NULL});
    cli_add(&t, (cli_flag){"-q", "--quiet", CLI_BOOL, &quiet, 0, 0, NULL,
                           "no progress bar and no notes on stderr", NULL});
    cli_add_context_flags(&t, &ctx_opts);
    for (int i = 0; i < t.n; i++) /* here the context is one chunk, with a default of its own */
        if (!strcmp(t.flags[i].long_name, "--ctx-size"))
            t.flags[i].help = "tokens per chunk (default 512)";
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (ctx_opts.n_ctx_given && ctx_opts.n_ctx < PPL_MIN_CTX) {
        fprintf(stderr, "woolly %s: -c %d is too small: a chunk needs at least %d tokens\n", cmd,
                ctx_opts.n_ctx, PPL_MIN_CTX);
        return 2;
    }
    if (cli_output_is_input(cmd, out_path, model_path) || cli_output_is_input(cmd, out_path, text_path))
        return 2;

    size_t text_len;
    char *text = cli_read_text(cmd, text_path, &text_len, "evaluate");
    if (!text)
        return 1;
    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m) {
        free(text);
        return 1;
    }
    int status = 1;
    woolly_error err = {{0}};
    woolly_context *c = NULL;
    woolly_imatrix *im = NULL;
    woolly_token *chunk = NULL;
    cli_progress progress = {0};
    int32_t n_tokens = 0;
    woolly_token *tokens = cli_tokenize_text(cmd, m, text, text_len, &n_tokens);
    if (!tokens)
        goto done;
    ppl_chunking ch;
    if (ppl_chunking_plan(n_tokens, ctx_opts.n_ctx_given ? ctx_opts.n_ctx : DEFAULT_CTX, max_chunks, &ch,
                          &err)) {
        fprintf(stderr, "woolly %s: %s: %s\n", cmd, text_path, err.msg);
        goto done;
    }
    woolly_context_params cp;
    cli_context_params(cmd, &ctx_opts, m, &cp);
    cp.n_ctx = ch.n_ctx;
    cp.n_batch = ctx_opts.n_batch < ch.n_ctx ? ctx_opts.n_batch : ch.n_ctx;
    if (!(c = woolly_context_open(m, &cp)) || !(im = woolly_imatrix_open(m)) ||
        woolly_context_set_imatrix(c, im)) {
        cli_api_error(cmd);
        goto done;
    }
    if (!(chunk = malloc(sizeof *chunk * (size_t)ch.n_ctx))) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }
    if (!quiet)
        fprintf(stderr, "woolly %s: %d tokens; %d chunks of %d tokens; batch %d, %d thread%s\n", cmd,
                n_tokens, ch.n_chunks, ch.n_ctx, woolly_context_n_batch(c), woolly_context_n_threads(c),
                woolly_context_n_threads(c) == 1 ? "" : "s");
    const woolly_token bos = woolly_model_adds_bos(m) ? woolly_token_bos(m) : -1;
    cli_progress_start(&progress, !quiet, (int64_t)ch.n_chunks * ch.n_ctx, "tokens");
    for (int32_t k = 0; k < ch.n_chunks; k++)
        if (eval_chunk(cmd, c, tokens, bos, &ch, k, chunk, &progress))
            goto done;
    cli_progress_clear(&progress);
    if (woolly_imatrix_save(im, out_path, text_path, (uint32_t)ch.n_chunks, (uint32_t)ch.n_ctx)) {
        cli_api_error(cmd);
        goto done;
    }
    if (!quiet)
        fprintf(stderr, "woolly %s: wrote %s (%d chunks of %d tokens)\n", cmd, out_path, ch.n_chunks,
                ch.n_ctx);
    status = 0;
done:
    free(chunk);
    woolly_context_close(c);
    woolly_imatrix_close(im);
    free(tokens);
    woolly_model_close(m);
    free(text);
    return status;
}
