/* woolly run: generate a continuation of a prompt. The prompt is evaluated in batches (the GEMM
 * path), then tokens are sampled and evaluated one at a time (the GEMV path) until -n tokens, an
 * end-of-generation token or a full context. --grammar-file (GBNF) or --json-schema constrains the
 * continuation; it then ends where the grammar does, --ignore-eos notwithstanding. --draft MODEL and
 * --lookup N decode speculatively (several guessed tokens checked per forward pass, the same output).
 * The text (prompt included) streams to stdout without splitting UTF-8 characters; the timings go to
 * stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_common.h"
#include "cli_spec.h"
#include "commands.h"
#include "model.h"
#include "tokenizer.h"

/* Room for any single token's bytes plus what the stream may hold back. */
static char *detok_buffer(const woolly_tokenizer *tok, size_t *cap)
{
    int64_t longest = 0;
    for (int32_t id = 0; id < woolly_tokenizer_n_vocab(tok); id++) {
        const int64_t n = woolly_token_bytes(tok, id, NULL, 0);
        longest = n > longest ? n : longest;
    }
    *cap = 64 + (size_t)longest;
    return malloc(*cap);
}

static void emit(woolly_detok_stream *ds, woolly_token id, char *buf, size_t cap)
{
    const int64_t n = woolly_detok_stream_feed(ds, id, buf, cap);
    if (n > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
}

static void report(const char *what, int32_t n, double s)
{
    fprintf(stderr, "%-10s %6d tokens in %8.3f s  (%9.2f tokens/s)\n", what, n, s, s > 0 ? n / s : 0.0);
}

int woolly_cmd_run(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *prompt = NULL, *grammar_path = NULL, *schema_path = NULL;
    int32_t n_predict = 128;
    int32_t n_keep_opt = 0;
    bool ignore_eos = false, ctx_shift = false;
    cli_context_opts ctx_opts;
    cli_sampling_opts samp;
    cli_table t = {.synopsis = "-m MODEL -p PROMPT [-n N] [options]"};
    cli_add_model_flag(&t, &model_path);
    cli_add_required(&t, (cli_flag){"-p", "--prompt", CLI_STR, &prompt, 0, 0, "PROMPT", "the prompt", NULL});
    cli_add(&t, (cli_flag){"-n", "--n-predict", CLI_INT, &n_predict, 0, 1 << 30, "N",
                           "tokens to generate at most (default 128)", NULL});
    cli_add(&t, (cli_flag){NULL, "--ignore-eos", CLI_BOOL, &ignore_eos, 0, 0, NULL,
                           "keep generating past end-of-generation tokens", NULL});
    cli_add(&t, (cli_flag){
                    NULL, "--context-shift", CLI_BOOL, &ctx_shift, 0, 0, NULL,
                    "when the context is full, forget the oldest half of the generated text (after --keep) "
                    "and go on instead of stopping",
                    NULL});
    cli_add(&t,
            (cli_flag){NULL, "--keep", CLI_INT, &n_keep_opt, -1, 1 << 30, "N",
                       "with --context-shift: prompt tokens always kept, after BOS (default 0; -1: the whole "
                       "prompt)",
                       NULL});
    cli_add(&t, (cli_flag){NULL, "--grammar-file", CLI_STR, &grammar_path, 0, 0, "FILE",
                           "constrain the continuation to a GBNF grammar (start rule `root`)", NULL});
    cli_add(&t, (cli_flag){NULL, "--json-schema", CLI_STR, &schema_path, 0, 0, "FILE",
                           "constrain the continuation to JSON valid for the JSON Schema in FILE", NULL});
    cli_add_sampling_flags(&t, &samp);
    cli_add_context_flags(&t, &ctx_opts);
    cli_spec_opts spec_opts;
    cli_add_spec_flags(&t, &spec_opts);
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    bool bad_spec;
    const bool speculate = cli_spec_wanted(cmd, &spec_opts, ctx_shift, &bad_spec);
    if (bad_spec)
        return 2;
    if (!*prompt) {
        fprintf(stderr, "woolly %s: the prompt is empty\n", cmd);
        return 2;
    }
    if (cli_sampling_finish(cmd, &samp, true))
        return 2;
    if (grammar_path && schema_path) {
        fprintf(stderr, "woolly %s: --grammar-file and --json-schema exclude each other\n", cmd);
        return 2;
    }
    woolly_grammar *grammar = NULL;
    if (grammar_path || schema_path) { /* before the model loads: a bad grammar fails fast */
        size_t len;
        char *text = cli_read_file(cmd, grammar_path ? grammar_path : schema_path, &len);
        if (!text)
            return 1;
        grammar = grammar_path ? woolly_grammar_open_gbnf(text, len) : woolly_grammar_open_json_schema(text, len);
        free(text);
        if (!grammar) {
            fprintf(stderr, "woolly %s: %s: %s\n", cmd, grammar_path ? grammar_path : schema_path,
                    woolly_last_error());
            return 1;
        }
    }

    double load_s;
    woolly_model *m = cli_open_model(cmd, model_path, &ctx_opts, &load_s);
    if (!m) {
        woolly_grammar_close(grammar);
        return 1;
    }
    int status = 1;
    woolly_token *ids = NULL, *hist = NULL;
    woolly_context *c = NULL, *dc = NULL;
    woolly_model *dm = NULL;
    woolly_spec *spec = NULL;
    woolly_sampler *smp = NULL;
    char *buf = NULL;
    int32_t n_prompt;
    woolly_context_params cp;
    if (!(ids = cli_tokenize(cmd, m, prompt, woolly_model_adds_bos(m), &n_prompt)))
        goto done;
    cli_context_params(cmd, &ctx_opts, m, &cp);
    if (speculate)
        cli_spec_context_params(&spec_opts, &cp);
    if (n_prompt == 0) {
        fprintf(stderr, "woolly %s: the prompt has no tokens\n", cmd);
        goto done;
    }
    if (!(c = woolly_context_open(m, &cp)) || !(smp = cli_open_sampler(m, &samp)) ||
        (grammar && woolly_sampler_set_grammar(smp, m, grammar))) {
        cli_api_error(cmd);
        goto done;
    }
    if (speculate && !(spec = cli_spec_open(cmd, &spec_opts, &ctx_opts, c, &dm, &dc)))
        goto done;
    const int32_t n_ctx = woolly_context_n_ctx(c);
    if (n_prompt > n_ctx) {
        fprintf(stderr,
                "woolly %s: the prompt has %d tokens, more than the context size %d (raise --ctx-size)\n",
                cmd, n_prompt, n_ctx);
        goto done;
    }
    /* With --context-shift: the tokens in the cache, and how many of them a shift keeps. */
    const int32_t bos = n_prompt > 0 && woolly_model_adds_bos(m) && ids[0] == woolly_token_bos(m) ? 1 : 0;
    int32_t n_keep = n_keep_opt < 0 || bos + n_keep_opt > n_prompt ? n_prompt : bos + n_keep_opt;
    if (ctx_shift && n_keep >= n_ctx - 1) {
        fprintf(stderr, "woolly %s: --keep keeps %d tokens, which leaves no room in a context of %d\n", cmd,
                n_keep, n_ctx);
        goto done;
    }
    size_t cap;
    if (ctx_shift && (hist = malloc(sizeof *hist * (size_t)n_ctx)))
        memcpy(hist, ids, sizeof *ids * (size_t)n_prompt);
    if ((ctx_shift && !hist) || !(buf = detok_buffer(m->tok, &cap))) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }

    woolly_detok_stream ds;
    woolly_detok_stream_init(&ds, m->tok);
    for (int32_t i = 0; i < n_prompt; i++) {
        emit(&ds, ids[i], buf, cap);
        woolly_sampler_accept(smp, ids[i]);
    }

    double t0 = cli_now_s();
    if (spec ? woolly_spec_begin(spec, ids, n_prompt) : woolly_eval(c, ids, n_prompt)) {
        fprintf(stderr, "\nwoolly %s: %s\n", cmd, woolly_last_error());
        goto done;
    }
    const double prompt_s = cli_now_s() - t0;

    t0 = cli_now_s();
    int32_t n_gen = 0, n_evaluated = 0;
    bool context_full = false;
    while (spec && n_gen < n_predict) {
        woolly_token step[65];
        const int32_t want = n_predict - n_gen < 65 ? n_predict - n_gen : 65;
        const int32_t k = woolly_spec_step(spec, smp, step, want);
        if (k < 0) {
            fprintf(stderr, "\nwoolly %s: %s\n", cmd, woolly_last_error());
            goto done;
        }
        if (k == 0) {
            context_full = true;
            break;
        }
        bool end = false;
        for (int32_t i = 0; i < k && !end; i++) {
            /* A step ends after an end-of-generation token: the grammar's flag is the last token's. */
            end = (i == k - 1 && woolly_sampler_grammar_done(smp)) ||
                  (!ignore_eos && woolly_token_is_eog(m, step[i]));
            if (!end) {
                emit(&ds, step[i], buf, cap);
                n_gen++;
            }
        }
        if (end)
            break;
    }
    if (spec)
        n_evaluated = (int32_t)woolly_spec_get_stats(spec).n_tokens;
    while (!spec && n_gen < n_predict) {
        const woolly_token tok = woolly_sampler_sample(smp, woolly_get_logits(c, -1));
        if (woolly_sampler_error(smp))
            break; /* reported below */
        woolly_sampler_accept(smp, tok);
        if (woolly_sampler_grammar_done(smp) || (!ignore_eos && woolly_token_is_eog(m, tok)))
            break; /* a grammar's end is the output's, and its last token is not part of it */
        emit(&ds, tok, buf, cap);
        n_gen++;
        if (n_gen == n_predict)
            break;
        int32_t n_past = woolly_context_n_past(c);
        if (n_past == n_ctx) {
            if (!ctx_shift) {
                context_full = true;
                break;
            }
            if ((n_past = woolly_context_shift(c, hist, n_past, n_keep, (n_past - n_keep) / 2)) < 0) {
                fprintf(stderr, "\nwoolly %s: %s\n", cmd, woolly_last_error());
                goto done;
            }
        }
        if (woolly_eval(c, &tok, 1)) {
            fprintf(stderr, "\nwoolly %s: %s\n", cmd, woolly_last_error());
            goto done;
        }
        if (hist)
            hist[n_past] = tok;
        n_evaluated++;
    }
    const double gen_s = cli_now_s() - t0;
    const int64_t tail = woolly_detok_stream_flush(&ds, buf, cap);
    if (tail > 0)
        fwrite(buf, 1, (size_t)tail, stdout);
    fflush(stdout);
    fputc('\n', stderr); /* stdout holds exactly the text; the line break is for the terminal */

    char profile[1200];
    cli_profile_text(m, c, profile, sizeof profile);
    fprintf(stderr, "load       %8.1f ms   tuning profile: %s\n", 1e3 * load_s, profile);
    fprintf(stderr, "weights    %s\n", woolly_model_weights_source(m));
    report("prompt", n_prompt, prompt_s);
    report("generation", n_evaluated, gen_s);
    if (spec)
        cli_spec_report(stderr, spec);
    status = 0;
    if (context_full) {
        fprintf(stderr,
                "woolly %s: stopped after %d of %d tokens: the context of %d positions is full "
                "(raise --ctx-size, or let --context-shift forget old tokens)\n",
                cmd, n_gen, n_predict, n_ctx);
        status = 1;
    }
    if (woolly_sampler_grammar_error(smp)) {
        fprintf(stderr, "woolly %s: the grammar stopped the output after %d tokens: %s\n", cmd, n_gen,
                woolly_sampler_grammar_error(smp));
        status = 1;
    } else if (woolly_sampler_error(smp)) {
        fprintf(stderr, "woolly %s: the output stopped after %d tokens: %s\n", cmd, n_gen,
                woolly_sampler_error(smp));
        status = 1;
    }
done:
    free(hist);
    free(buf);
    woolly_sampler_close(smp);
    woolly_grammar_close(grammar);
    woolly_spec_close(spec);
    woolly_context_close(dc);
    woolly_model_close(dm);
    woolly_context_close(c);
    free(ids);
    woolly_model_close(m);
    return status;
}
