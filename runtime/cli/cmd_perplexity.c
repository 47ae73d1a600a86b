/* woolly perplexity: how well a model predicts a text, measured the way llama.cpp's perplexity tool
 * measures it (perplexity_stats.h: chunks evaluated from an empty cache, the second half of each scored),
 * and the KL divergence of a run against a saved base run (kl_base.h), so that a quantization, a kernel
 * level or a KV cache type shows what it costs in accuracy. The evaluation uses the public C API only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_progress.h"
#include "commands.h"
#include "kl_base.h"
#include "perplexity_stats.h"

#define DEFAULT_CTX 512

typedef struct ppl_run {
    const char *cmd;
    woolly_context *c;
    const woolly_token *tokens; /* the whole text */
    ppl_chunking ch;
    int32_t n_vocab;
    woolly_token bos; /* replaces the first token of each chunk; -1: the vocabulary adds none */
    FILE *base_out, *base_in;
    bool base_created; /* base_out was created by this run: removed again if the run fails */
    const char *base_out_path, *base_in_path;
    double *scratch;     /* 2 * n_vocab */
    float *base_row;     /* n_vocab */
    woolly_token *chunk; /* n_ctx: the tokens evaluated */
    ppl_moments nll;
    kl_accumulator kl;
    cli_progress progress;
} ppl_run;

static int fail(ppl_run *r, const woolly_error *e)
{
    cli_progress_clear(&r->progress);
    fprintf(stderr, "woolly %s: %s\n", r->cmd, e->msg);
    return -1;
}

/* Scores one position: its logits `row` predict `target`. */
static int score_position(ppl_run *r, const float *row, woolly_token target, int32_t chunk, int32_t pos)
{
    woolly_error e = {{0}};
    if (r->base_in) {
        int32_t base_target;
        if (kl_base_read_record(r->base_in, r->base_in_path, (uint32_t)r->n_vocab, &base_target, r->base_row,
                                &e))
            return fail(r, &e);
        if (base_target != target) {
            woolly_fail(
                &e,
                "%s: chunk %d, position %d: the base predicts token %d where this run's text has token "
                "%d (the two tokenize the text differently)",
                r->base_in_path, chunk + 1, pos, base_target, target);
            return fail(r, &e);
        }
        const kl_position kp = kl_score(r->base_row, row, r->n_vocab, target, r->scratch);
        kl_accumulator_add(&r->kl, &kp);
        ppl_moments_add(&r->nll, kp.nll);
        return 0;
    }
    ppl_log_softmax(row, r->n_vocab, r->scratch);
    ppl_moments_add(&r->nll, -r->scratch[target]);
    if (r->base_out &&
        kl_base_write_record(r->base_out, r->base_out_path, target, row, (uint32_t)r->n_vocab, &e))
        return fail(r, &e);
    return 0;
}

/* Chunk k from an empty cache, in batches; the rows from `first` on are scored as they come. */
static int eval_chunk(ppl_run *r, int32_t k)
{
    const int32_t n_ctx = r->ch.n_ctx, n_batch = woolly_context_n_batch(r->c);
    const woolly_token *text = r->tokens + (int64_t)k * n_ctx;
    memcpy(r->chunk, text, sizeof *r->chunk * (size_t)n_ctx);
    if (r->bos >= 0)
        r->chunk[0] = r->bos;
    if (woolly_context_rewind(r->c, 0)) {
        cli_api_error(r->cmd);
        return -1;
    }
    for (int32_t p0 = 0; p0 < n_ctx; p0 += n_batch) {
        const int32_t n = n_ctx - p0 < n_batch ? n_ctx - p0 : n_batch;
        if (woolly_eval(r->c, r->chunk + p0, n)) {
            cli_progress_clear(&r->progress);
            cli_api_error(r->cmd);
            return -1;
        }
        for (int32_t i = 0; i < n; i++) {
            const int32_t p = p0 + i;
            if (p < r->ch.first || p > n_ctx - 2)
                continue;
            const float *row = woolly_get_logits(r->c, i);
            if (!row) {
                cli_progress_clear(&r->progress);
                cli_api_error(r->cmd);
                return -1;
            }
            if (score_position(r, row, text[p + 1], k, p))
                return -1;
        }
        cli_progress_update(&r->progress, (int64_t)k * n_ctx + p0 + n, "chunk", k + 1, r->ch.n_chunks);
    }
    return 0;
}

/* The running estimate after chunk k, on stdout. */
static void print_running(const ppl_run *r, int32_t k)
{
    const ppl_estimate e = ppl_estimate_of(&r->nll);
    if (!r->base_in) {
        printf("[%d] %.4f\n", k + 1, e.ppl);
    } else {
        const ppl_estimate b = ppl_estimate_of(&r->kl.nll_base);
        printf("[%d] PPL %.4f  ln(PPL/PPL base) %+.6f  mean KLD %.6g  same top %.3f %%\n", k + 1, e.ppl,
               e.mean_nll - b.mean_nll, ppl_moments_mean(&r->kl.kl),
               100.0 * (double)r->kl.n_same_top / (double)(r->kl.kl.n ? r->kl.kl.n : 1));
    }
    fflush(stdout);
}

static int print_final(ppl_run *r)
{
    const ppl_estimate e = ppl_estimate_of(&r->nll);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", e.ppl, e.err);
    /* All the digits of a double, so that two runs can be compared bit for bit. */
    printf("Mean NLL: %.17g nats/token over %lld tokens\n", e.mean_nll, (long long)e.n);
    if (!r->base_in)
        return 0;
    kl_summary s;
    woolly_error err = {{0}};
    if (kl_summarize(&r->kl, &s, &err))
        return fail(r, &err);
    printf("\n====== Perplexity against the base ======\n");
    printf("PPL                   : %12.6f +/- %.6f\n", s.ppl.ppl, s.ppl.err);
    printf("PPL base              : %12.6f +/- %.6f\n", s.ppl_base.ppl, s.ppl_base.err);
    printf("ln(PPL/PPL base)      : %12.6f +/- %.6f\n", s.ln_ratio, s.ln_ratio_err);
    printf("PPL/PPL base          : %12.6f +/- %.6f\n", s.ratio, s.ratio_err);
    printf("====== KL divergence (nats per token) ======\n");
    printf("Mean KLD              : %.9g +/- %.3g\n", s.kl_mean, s.kl_err);
    printf("Median KLD            : %.9g\n", s.kl_median);
    printf("99%% KLD               : %.9g\n", s.kl_p99);
    printf("Maximum KLD           : %.9g\n", s.kl_max);
    printf("====== Top token ======\n");
    printf("Same top token        : %.3f +/- %.3f %% of %lld positions\n", 100.0 * s.same_top,
           100.0 * s.same_top_err, (long long)s.n);
    return 0;
}

int woolly_cmd_perplexity(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *text_path = NULL;
    int32_t max_chunks = 0;
    int chunks_given = 0;
    bool quiet = false;
    cli_context_opts ctx_opts;
    ppl_run r = {.cmd = cmd, .bos = -1};
    cli_table t = {
        .synopsis = "-m MODEL -f TEXT [-c 512] [-b 512] [--chunks N] [-t T] [--kl-divergence-base FILE | "
                    "--kl-divergence FILE]",
        .about =
            "Perplexity of MODEL on the text in TEXT, computed as llama.cpp's perplexity tool computes it:\n"
            "the tokens are cut into chunks of -c tokens (default 512 here), each evaluated from an empty\n"
            "cache with BOS first, and the second half of each chunk is scored. Prints the running estimate\n"
            "after each chunk, then the perplexity with its standard error.\n"
            "\n"
            "--kl-divergence-base FILE saves what this run predicts at every scored position; a later run\n"
            "with --kl-divergence FILE (another quantization of the same model, WOOLLY_ISA level or\n"
            "--kv-type) prints its KL divergence from that base, top-token agreement and perplexity ratio.\n"
            "That run takes -c and --chunks from the base; the base must come from the same vocabulary,\n"
            "text and chunking. A base holds the logits of each scored position: about chunks x c/2 x\n"
            "n_vocab x 4 bytes.\n",
    };
    cli_add_model_flag(&t, &model_path);
    cli_add_required(&t, (cli_flag){"-f", "--file", CLI_STR, &text_path, 0, 0, "TEXT",
                                    "the text to score (exactly its bytes)", NULL});
    cli_add(&t, (cli_flag){NULL, "--chunks", CLI_INT, &max_chunks, 1, INT32_MAX, "N",
                           "score at most the first N chunks (default: all the text holds)", &chunks_given});
    cli_add(&t, (cli_flag){NULL, "--kl-divergence-base", CLI_STR, &r.base_out_path, 0, 0, "FILE",
                           "save this run's predictions to FILE, the base of a later --kl-divergence", NULL});
    cli_add(&t,
            (cli_flag){NULL, "--kl-divergence", CLI_STR, &r.base_in_path, 0, 0, "FILE",
                       "compare this run with the base in FILE (KL divergence, top token, PPL ratio)", NULL});
    cli_add(&t, (cli_flag){"-q", "--quiet", CLI_BOOL, &quiet, 0, 0, NULL,
                           "no progress bar and no notes on stderr (results and errors only)", NULL});
    cli_add_context_flags(&t, &ctx_opts);
    for (int i = 0; i < t.n; i++) /* here the context is one chunk, with a default of its own */
        if (!strcmp(t.flags[i].long_name, "--ctx-size"))
            t.flags[i].help = "tokens per chunk (default 512; with --kl-divergence, the base's)";
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (r.base_out_path && r.base_in_path) {
        fprintf(stderr,
                "woolly %s: give either --kl-divergence-base (make a base) or --kl-divergence (compare "
                "with one), not both\n",
                cmd);
        return 2;
    }
    if (ctx_opts.n_ctx_given && ctx_opts.n_ctx < PPL_MIN_CTX) {
        fprintf(stderr,
                "woolly %s: -c %d is too small: a chunk needs at least %d tokens (half of it is context)\n",
                cmd, ctx_opts.n_ctx, PPL_MIN_CTX);
        return 2;
    }
    if (r.base_out_path && (cli_output_is_input(cmd, r.base_out_path, model_path) ||
                            cli_output_is_input(cmd, r.base_out_path, text_path)))
        return 2;

    size_t text_len;
    char *text = cli_read_text(cmd, text_path, &text_len, "score");
    if (!text)
        return 1;
    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, NULL);
    if (!m) {
        free(text);
        return 1;
    }
    int status = 1;
    woolly_error err = {{0}};
    woolly_token *tokens = NULL;
    int32_t n_tokens = 0;
    kl_base_header base = {0}, run;
    if (!(tokens = cli_tokenize_text(cmd, m, text, text_len, &n_tokens)))
        goto done;
    r.tokens = tokens;
    r.n_vocab = woolly_model_n_vocab(m);
    if (woolly_model_adds_bos(m))
        r.bos = woolly_token_bos(m);

    int32_t n_ctx = ctx_opts.n_ctx_given ? ctx_opts.n_ctx : DEFAULT_CTX;
    if (r.base_in_path) {
        if (!(r.base_in = fopen(r.base_in_path, "rb"))) {
            fprintf(stderr, "woolly %s: cannot read '%s': %s\n", cmd, r.base_in_path, strerror(errno));
            goto done;
        }
        if (kl_base_read_header(r.base_in, r.base_in_path, &base, &err)) {
            fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
            goto done;
        }
        if (!ctx_opts.n_ctx_given)
            n_ctx = (int32_t)base.n_ctx;
        if (!chunks_given)
            max_chunks = (int32_t)(base.n_chunks > INT32_MAX ? INT32_MAX : base.n_chunks);
    }
    if (ppl_chunking_plan(n_tokens, n_ctx, max_chunks, &r.ch, &err)) {
        fprintf(stderr, "woolly %s: %s: %s\n", cmd, text_path, err.msg);
        goto done;
    }
    if (r.base_in_path || r.base_out_path)
        kl_base_describe(m, text, text_len, n_tokens, (uint32_t)r.ch.n_ctx, (uint32_t)r.ch.n_chunks,
                         (uint32_t)r.ch.n_scored, &run);
    if (r.base_in_path && kl_base_check(r.base_in_path, &base, &run, &err)) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        goto done;
    }

    ctx_opts.n_ctx = r.ch.n_ctx;
    ctx_opts.n_ctx_given = 1;
    woolly_context_params cp;
    cli_context_params(cmd, &ctx_opts, m, &cp);
    cp.n_batch = ctx_opts.n_batch < r.ch.n_ctx ? ctx_opts.n_batch : r.ch.n_ctx;
    cp.logits_all = true;
    if (!(r.c = woolly_context_open(m, &cp))) {
        cli_api_error(cmd);
        goto done;
    }
    const int64_t n_positions = (int64_t)r.ch.n_chunks * r.ch.n_scored;
    r.scratch = malloc(sizeof(double) * 2 * (size_t)r.n_vocab);
    r.base_row = malloc(sizeof(float) * (size_t)r.n_vocab);
    r.chunk = malloc(sizeof(woolly_token) * (size_t)r.ch.n_ctx);
    if (!r.scratch || !r.base_row || !r.chunk) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }
    if (r.base_in && kl_accumulator_init(&r.kl, n_positions, &err)) {
        fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
        goto done;
    }
    if (r.base_out_path) {
        if (!(r.base_out = fopen(r.base_out_path, "wb"))) {
            fprintf(stderr, "woolly %s: cannot write '%s': %s\n", cmd, r.base_out_path, strerror(errno));
            goto done;
        }
        r.base_created = true;
        if (kl_base_write_header(r.base_out, r.base_out_path, &run, &err)) {
            fprintf(stderr, "woolly %s: %s\n", cmd, err.msg);
            goto done;
        }
    }

    if (!quiet) {
        fprintf(stderr,
                "woolly %s: %d tokens; %d chunks of %d tokens, %d scored in each (%lld in all); batch %d, "
                "%d thread%s\n",
                cmd, n_tokens, r.ch.n_chunks, r.ch.n_ctx, r.ch.n_scored, (long long)n_positions,
                woolly_context_n_batch(r.c), woolly_context_n_threads(r.c),
                woolly_context_n_threads(r.c) == 1 ? "" : "s");
        if (r.base_in)
            fprintf(stderr, "woolly %s: comparing '%s' with the base %s of '%s'\n", cmd, woolly_model_name(m),
                    r.base_in_path, base.model_name);
    }
    cli_progress_start(&r.progress, !quiet, (int64_t)r.ch.n_chunks * r.ch.n_ctx, "tokens");
    for (int32_t k = 0; k < r.ch.n_chunks; k++) {
        if (eval_chunk(&r, k))
            goto done;
        cli_progress_clear(&r.progress);
        print_running(&r, k);
    }
    cli_progress_clear(&r.progress);
    if (r.base_out) {
        FILE *f = r.base_out;
        r.base_out = NULL;
        if (fclose(f)) {
            fprintf(stderr, "woolly %s: cannot write '%s': %s\n", cmd, r.base_out_path, strerror(errno));
            goto done;
        }
        if (!quiet)
            fprintf(stderr, "woolly %s: wrote the base %s (%llu bytes)\n", cmd, r.base_out_path,
                    (unsigned long long)kl_base_file_size(&run));
    }
    if (print_final(&r))
        goto done;
    status = 0;
done:
    if (r.base_out)
        fclose(r.base_out);
    if (status != 0 && r.base_created) /* a base cut short must not pass for a whole one */
        remove(r.base_out_path);
    if (r.base_in)
        fclose(r.base_in);
    kl_accumulator_free(&r.kl);
    free(r.chunk);
    free(r.base_row);
    free(r.scratch);
    woolly_context_close(r.c);
    free(tokens);
    woolly_model_close(m);
    free(text);
    return status;
}
