#include "cli_spec.h"

void cli_add_spec_flags(cli_table *t, cli_spec_opts *o)
{
    *o = (cli_spec_opts){.draft = NULL, .draft_max = woolly_spec_default_params().draft_max, .lookup = 0};
    cli_add(t, (cli_flag){NULL, "--draft", CLI_STR, &o->draft, 0, 0, "MODEL",
                          "speculative decoding: a smaller model of the same vocabulary guesses tokens the "
                          "model checks several at a time (same output)",
                          NULL});
    cli_add(t, (cli_flag){NULL, "--draft-max", CLI_INT, &o->draft_max, 1, 64, "N",
                          "with --draft or --lookup: guesses per step at most, fewer while few are accepted "
                          "(default 8)",
                          &o->draft_max_given});
    cli_add(t, (cli_flag){NULL, "--lookup", CLI_INT, &o->lookup, 1, 16, "N",
                          "speculative decoding by prompt lookup: guess the tokens that followed the last "
                          "earlier occurrence of the last N tokens",
                          NULL});
}

bool cli_spec_wanted(const char *cmd, const cli_spec_opts *o, bool ctx_shift, bool *bad)
{
    *bad = false;
    if (o->draft || o->lookup > 0) {
        if (ctx_shift) {
            fprintf(stderr, "woolly %s: --context-shift does not work with --draft or --lookup yet\n", cmd);
            *bad = true;
        }
        return true;
    }
    if (o->draft_max_given) {
        fprintf(stderr, "woolly %s: --draft-max needs --draft MODEL or --lookup N\n", cmd);
        *bad = true;
    }
    return false;
}

void cli_spec_context_params(const cli_spec_opts *o, woolly_context_params *p)
{
    p->logits_all = true;
    if (p->n_batch < o->draft_max + 1)
        p->n_batch = o->draft_max + 1;
}

woolly_spec *cli_spec_open(const char *cmd, const cli_spec_opts *o, const cli_context_opts *ctx_opts,
                           woolly_context *target, woolly_model **dm, woolly_context **dc)
{
    *dm = NULL;
    *dc = NULL;
    if (o->draft) {
        if (!(*dm = cli_open_model(cmd, o->draft, NULL, NULL)))
            return NULL;
        woolly_context_params dp = woolly_context_default_params();
        dp.n_ctx = woolly_context_n_ctx(target);
        dp.n_batch = ctx_opts->n_batch;
        dp.n_threads = woolly_context_n_threads(target);
        dp.kv_type = cli_kv_type(ctx_opts->kv_type);
        if (!(*dc = woolly_context_open(*dm, &dp))) {
            fprintf(stderr, "woolly %s: draft %s: %s\n", cmd, o->draft, woolly_last_error());
            return NULL;
        }
    }
    woolly_spec_params sp = woolly_spec_default_params();
    sp.draft_max = o->draft_max;
    sp.lookup = o->lookup;
    woolly_spec *s = woolly_spec_open(target, *dc, &sp);
    if (!s) {
        if (o->draft)
            fprintf(stderr, "woolly %s: --draft %s: %s\n", cmd, o->draft, woolly_last_error());
        else
            cli_api_error(cmd);
    }
    return s;
}

void cli_spec_report(FILE *f, const woolly_spec *s)
{
    const woolly_spec_stats st = woolly_spec_get_stats(s);
    fprintf(f, "speculative %lld drafted, %lld accepted (%.1f%%), %lld steps, %.2f tokens per step\n",
            (long long)st.n_drafted, (long long)st.n_accepted,
            st.n_drafted ? 100.0 * (double)st.n_accepted / (double)st.n_drafted : 0.0, (long long)st.n_steps,
            st.n_steps ? (double)st.n_tokens / (double)st.n_steps : 0.0);
}
