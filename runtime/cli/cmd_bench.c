/* woolly bench: prompt-processing and generation speed, with llama-bench's meaning of the tests:
 * ppN evaluates an N-token prompt (batched: the GEMM path), tgN generates N tokens one at a time (the
 * GEMV path; no sampling), both after `depth` tokens already in the cache (-d, a list as llama-bench's,
 * default 0: an empty cache). For each thread count of -t (a list too) one context is opened with one
 * sequence per depth, each sequence's cache filled to its depth once, untimed; each run then rewinds
 * its sequence to it. Every test runs once to warm up, then the tests take turns, one repetition each
 * per round, so that a drift of a shared machine's speed during the run falls on all of them alike and
 * their ratios (pp512 @ d4096 against pp512, say) hold. The mean and standard deviation of tokens/s
 * over the repetitions go out as llama-bench's markdown table, JSON or CSV (bench_report.h).
 * --roofline measures the machine's limits after every round and prints each figure as a share of the
 * best of them (bench_roofline.h). --draft MODEL / --lookup N add a speculative generation test per
 * thread count, "tgN spec": greedy generation of -n tokens after the -p prompt, a row of the table (or a
 * JSON object, a CSV line) with its tokens/s, and its acceptance and tokens per target pass in the
 * markdown footer, the JSON object's "speculative" field or the CSV's spec_ columns (and a line on
 * stderr). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_report.h"
#include "bench_roofline.h"
#include "cli_common.h"
#include "cli_spec.h"
#include "commands.h"
#include "registry.h"
#include "threadpool.h"

enum { MAX_THREAD_COUNTS = 64, MAX_DEPTHS = 16, MAX_DEPTH = 1 << 24 };

/* Evaluates n tokens of sequence `seq` from position pos on, as woolly_eval does for sequence 0: a prompt
 * in batches of up to n_batch tokens (the GEMM path) with the last token's logits, or with one_by_one
 * each token alone (the GEMV path) with its logits, as generation needs them to sample the next.
 * 0, or -1 with the API's error set. */
static int eval_seq(woolly_context *c, woolly_batch *b, const woolly_token *ids, int32_t n, int32_t pos,
                    int32_t seq, bool one_by_one)
{
    const int32_t step = one_by_one ? 1 : woolly_context_n_batch(c);
    for (int32_t done = 0; done < n;) {
        const int32_t chunk = n - done < step ? n - done : step;
        b->n_tokens = 0;
        for (int32_t i = 0; i < chunk; i++)
            woolly_batch_add(b, ids[done + i], pos + done + i, seq, one_by_one || done + i == n - 1);
        if (woolly_decode(c, b))
            return -1;
        done += chunk;
    }
    return 0;
}

/* One run of a test on sequence `seq`, after its `depth` cached tokens: seconds, or a negative number
 * on an error. */
static double run_once(woolly_context *c, woolly_batch *b, const woolly_token *ids, const bench_test *t,
                       int32_t seq)
{
    if (woolly_seq_rewind(c, seq, t->depth))
        return -1;
    const double t0 = cli_now_s();
    if (eval_seq(c, b, ids, t->n, t->depth, seq, !t->batched))
        return -1;
    return cli_now_s() - t0;
}

/* "1,2,4" after flag: each an integer in [lo, hi], at most cap of them. Returns the count, or -1 after
 * a message naming `what` ("thread count") and an example. */
static int parse_int_list(const char *cmd, const char *flag, const char *s, long lo, long hi, int cap,
                          const char *what, const char *example, int *out)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < lo || v > hi) {
            fprintf(
                stderr,
                "woolly %s: %s %s: each %s must be an integer from %ld to %ld, comma-separated (\"%s\")\n",
                cmd, flag, s, what, lo, hi, example);
            return -1;
        }
        if (n == cap) {
            fprintf(stderr, "woolly %s: %s %s: at most %d %ss\n", cmd, flag, s, cap, what);
            return -1;
        }
        out[n++] = (int)v;
        if (!*end)
            return n;
        p = end + 1;
    }
}

/* The process's peak resident set: VmHWM from /proc (which clear_peak_rss can reset), else
 * getrusage's ru_maxrss (KiB on Linux). */
static uint64_t peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kib = 0;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
                break;
        fclose(f);
        if (kib)
            return kib * 1024ull;
    }
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024ull;
}

/* Resets VmHWM to the current RSS (Linux 4.0+), so that the limits' read buffer (4x the L3, at least 256 MiB)
 * does not count as the model's memory. False if it cannot. */
static bool clear_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

typedef struct bench_opts {
    int32_t n_prompt, n_gen, reps;
    int depths[MAX_DEPTHS], n_depths;
    int32_t max_depth;
    bench_format format;
    bool roofline;
    FILE *out; /* stdout, or -o FILE */
    cli_context_opts ctx;
    cli_spec_opts spec;
} bench_opts;

/* The speculative generation test at one thread count: -n tokens greedily after the -p prompt (at
 * least one token), one warm-up and reps measured runs, appended to r->tests as "tgN spec" (its markdown
 * row printed, and a line on stderr as it finishes). With --roofline, its share of the DRAM limit counts
 * the target's weights once per generated token, as tgN's does: past 100% is speed past what one stream
 * of one-token passes could reach. 0, or -1 after a message. */
static int bench_spec_test(const char *cmd, const bench_opts *o, woolly_model *m, const woolly_token *ids,
                      int threads, bench_run *r)
{
    cli_context_opts co = o->ctx;
    co.n_threads = threads;
    woolly_context_params cp;
    cli_context_params(cmd, &co, m, &cp);
    const int32_t n_prompt = o->n_prompt > 0 ? o->n_prompt : 1;
    if (!co.n_ctx_given)
        cp.n_ctx = n_prompt + o->n_gen + o->spec.draft_max + 1;
    cli_spec_context_params(&o->spec, &cp);
    woolly_sampler_params sp = woolly_sampler_default_params();
    sp.temp = 0.0f;
    woolly_context *c = woolly_context_open(m, &cp), *dc = NULL;
    woolly_sampler *smp = c ? woolly_sampler_open(m, &sp) : NULL;
    woolly_model *dm = NULL;
    woolly_spec *spec = NULL;
    woolly_token *out = malloc(sizeof *out * (size_t)(o->n_gen > 0 ? o->n_gen : 1));
    bench_test *t = &r->tests[r->n_tests];
    *t = (bench_test){.threads = threads, .batched = false, .n = o->n_gen, .speculative = true};
    t->samples_ts = calloc((size_t)o->reps, sizeof *t->samples_ts);
    int status = -1;
    if (!c || !smp || !out || !t->samples_ts) {
        cli_api_error(cmd);
        free(t->samples_ts);
        goto done;
    }
    r->n_tests++; /* it owns samples_ts now */
    snprintf(t->name, sizeof t->name, "tg%d spec", o->n_gen);
    cli_profile_text(m, c, t->profile, sizeof t->profile);
    if (!(spec = cli_spec_open(cmd, &o->spec, &o->ctx, c, &dm, &dc)))
        goto done;
    woolly_spec_stats before = {0};
    for (int32_t rep = -1; rep < o->reps; rep++) {
        if (rep == 0)
            before = woolly_spec_get_stats(spec);
        woolly_sampler_reset(smp);
        if (woolly_spec_begin(spec, ids, n_prompt)) {
            cli_api_error(cmd);
            goto done;
        }
        const double t0 = cli_now_s();
        for (int32_t got = 0; got < o->n_gen;) {
            const int32_t k = woolly_spec_step(spec, smp, out + got, o->n_gen - got);
            if (k <= 0) {
                fprintf(stderr, "woolly %s: speculative test: %s\n", cmd,
                        k < 0 ? woolly_last_error() : "context full");
                goto done;
            }
            got += k;
        }
        const double s = cli_now_s() - t0;
        if (rep >= 0)
            t->samples_ts[t->n_samples++] = s > 0 ? o->n_gen / s : 0.0;
    }
    bench_test_stats(t);
    const woolly_spec_stats st = woolly_spec_get_stats(spec);
    t->spec = (bench_spec){.draft = o->spec.draft,
                           .lookup = o->spec.lookup,
                           .draft_max = o->spec.draft_max,
                           .n_prompt = n_prompt,
                           .drafted = st.n_drafted - before.n_drafted,
                           .accepted = st.n_accepted - before.n_accepted,
                           .steps = st.n_steps - before.n_steps,
                           .tokens = st.n_tokens - before.n_tokens};
    r->speculative = true;
    if (o->roofline)
        for (int i = 0; i < r->n_tests - 1; i++)
            if (r->tests[i].has_roof && r->tests[i].threads == threads) {
                /* its cache holds the prompt before the generated tokens: the prompt is its depth */
                bench_test at = *t;
                at.depth = n_prompt;
                bench_apply_roof(r, &r->tests[i].roof, &at);
                t->has_roof = true;
                t->roof = at.roof;
                t->work_per_token = at.work_per_token;
                t->work_rate = at.work_rate;
                t->limit = at.limit;
                break;
            }
    if (o->format == BENCH_MD)
        bench_md_row(o->out, r, t);
    const bench_spec *bs = &t->spec;
    fprintf(stderr,
            "speculative tg%d after pp%d, %d threads (%s%s%s, draft-max %d): %.2f ± %.2f tokens/s, %lld drafted, "
            "%lld accepted (%.1f%%), %.2f tokens per step\n",
            o->n_gen, n_prompt, threads, o->spec.draft ? "draft " : "", o->spec.draft ? o->spec.draft : "",
            o->spec.lookup ? (o->spec.draft ? ", lookup" : "lookup") : "", o->spec.draft_max, t->mean_ts,
            t->std_ts, (long long)bs->drafted, (long long)bs->accepted,
            bs->drafted > 0 ? 100.0 * (double)bs->accepted / (double)bs->drafted : 0.0,
            bs->steps > 0 ? (double)bs->tokens / (double)bs->steps : 0.0);
    status = 0;
done:
    woolly_spec_close(spec);
    woolly_context_close(dc);
    woolly_model_close(dm);
    woolly_sampler_close(smp);
    woolly_context_close(c);
    free(out);
    return status;
}

/* Fills sequence i of the context to depths[i], untimed: the deepest one is evaluated, the others copy
 * the beginning of its cache (the keys and values of a position depend only on the tokens up to it).
 * 0, or -1 with the API's error set. */
static int fill_depths(woolly_context *c, woolly_batch *b, const bench_opts *o, const woolly_token *ids)
{
    int deepest = 0;
    for (int i = 1; i < o->n_depths; i++)
        if (o->depths[i] > o->depths[deepest])
            deepest = i;
    if (o->max_depth > 0 && eval_seq(c, b, ids, o->max_depth, 0, deepest, false))
        return -1;
    for (int i = 0; i < o->n_depths; i++)
        if (i != deepest && o->depths[i] > 0 && woolly_seq_copy(c, deepest, i, o->depths[i]))
            return -1;
    return 0;
}

/* One sample of the limits folded into *roof (bench_sample_roof). The model's memory peaks before the
 * limits' read buffer is mapped, and the peak is reset after it, so the buffer never counts as the
 * model's. 0, or -1 after a message. */
static int sample_roof(const char *cmd, int threads, bench_run *r, bench_roof *roof, bool *rss_trackable)
{
    if (*rss_trackable) {
        const uint64_t rss = peak_rss_bytes();
        r->peak_rss = rss > r->peak_rss ? rss : r->peak_rss;
    }
    if (bench_sample_roof(cmd, threads, roof))
        return -1;
    bench_settle_prompt_rate(r, roof);
    *rss_trackable = *rss_trackable && clear_peak_rss();
    return 0;
}

/* Runs every test at one thread count, appending to r->tests; prints markdown rows when they are done.
 * Returns 0, or -1 after a message. */
static int bench_threads(const char *cmd, const bench_opts *o, woolly_model *m, const woolly_token *ids,
                         int threads, bench_run *r, bool *rss_trackable)
{
    cli_context_opts co = o->ctx;
    co.n_threads = threads;
    woolly_context_params cp;
    cli_context_params(cmd, &co, m, &cp);
    const int32_t longest = o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen;
    if (!co.n_ctx_given)
        cp.n_ctx = o->max_depth + longest;
    cp.n_seq_max = o->n_depths; /* test k's depth is sequence seq[k]'s */
    woolly_context *c = woolly_context_open(m, &cp);
    woolly_batch b = {0};
    if (!c || woolly_batch_init(&b, woolly_context_n_batch(c))) {
        cli_api_error(cmd);
        woolly_context_close(c);
        return -1;
    }
    int status = -1, seq[2 * MAX_DEPTHS];
    const int first = r->n_tests;
    if (fill_depths(c, &b, o, ids + longest)) {
        cli_api_error(cmd);
        goto done;
    }
    /* The tests in llama-bench's order: per depth, pp then tg. */
    for (int d = 0; d < o->n_depths; d++)
        for (int kind = 0; kind < 2; kind++) {
            const bool batched = kind == 0;
            const int32_t n = batched ? o->n_prompt : o->n_gen, depth = o->depths[d];
            if (n == 0)
                continue;
            bench_test *t = &r->tests[r->n_tests];
            *t = (bench_test){.threads = threads, .batched = batched, .n = n, .depth = depth};
            if (depth > 0)
                snprintf(t->name, sizeof t->name, "%s%d @ d%d", batched ? "pp" : "tg", n, depth);
            else
                snprintf(t->name, sizeof t->name, "%s%d", batched ? "pp" : "tg", n);
            cli_profile_text(m, c, t->profile, sizeof t->profile);
            if (!(t->samples_ts = calloc((size_t)o->reps, sizeof *t->samples_ts))) {
                fprintf(stderr, "woolly %s: out of memory\n", cmd);
                goto done;
            }
            seq[r->n_tests++ - first] = d;
        }
    /* One warm-up run of each test, then rounds of one run of each; with --roofline, the limits are
     * sampled after every round, the warm-up's included, and the best sample is the limit. A shared
     * host's limits move with its neighbours: on a Zen 5 guest here one DRAM read sampled after the runs
     * gave 24-48 GB/s while the decode just before it had streamed 1.2-1.8 times that, and a read loop
     * went from 41 to 74 GB/s between one second and the next. */
    bench_roof roof = {0};
    for (int32_t round = -1; round < o->reps; round++) {
        for (int i = first; i < r->n_tests; i++) {
            bench_test *t = &r->tests[i];
            const double s = run_once(c, &b, ids, t, seq[i - first]);
            if (s < 0) {
                cli_api_error(cmd);
                goto done;
            }
            if (round >= 0)
                t->samples_ts[t->n_samples++] = s > 0 ? t->n / s : 0.0;
        }
        if (o->roofline && sample_roof(cmd, threads, r, &roof, rss_trackable))
            goto done;
    }
    for (int i = first; i < r->n_tests; i++) {
        bench_test_stats(&r->tests[i]);
        if (o->format == BENCH_MD && !o->roofline)
            bench_md_row(o->out, r, &r->tests[i]);
    }
    if (o->roofline) {
        for (int i = first; i < r->n_tests; i++) {
            bench_apply_roof(r, &roof, &r->tests[i]);
            if (o->format == BENCH_MD)
                bench_md_row(o->out, r, &r->tests[i]);
        }
    }
    status = 0;
done:
    woolly_batch_free(&b);
    woolly_context_close(c);
    return status;
}

int woolly_cmd_bench(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *model_path = NULL, *threads_arg = NULL, *depths_arg = "0", *format_arg = "md",
               *out_path = NULL;
    bench_opts o = {.n_prompt = 512, .n_gen = 128, .reps = 5};
    cli_table t = {
        .synopsis = "-m MODEL [-p 512] [-n 128] [-d D[,D...]] [-t T[,T...]] [-r REPS] [--format md|json|csv] "
                    "[-o FILE] [--roofline]",
        .about = "Measures prompt processing (ppN: an N-token batch) and generation (tgN: N tokens one at a\n"
                 "time), as llama-bench does, with one warm-up run and the mean and standard deviation of\n"
                 "tokens/s over the repetitions. The tests take turns, one repetition each per round, so\n"
                 "that a machine whose speed drifts during the run slows them alike. The load time, peak\n"
                 "RSS, ISA level and tuning profile follow the markdown table, or are fields of each JSON\n"
                 "object or CSV line.\n"};
    cli_add_model_flag(&t, &model_path);
    cli_add(&t, (cli_flag){"-p", "--n-prompt", CLI_INT, &o.n_prompt, 0, 1 << 20, "N",
                           "prompt tokens of the pp test; 0 skips it (default 512)", NULL});
    cli_add(&t, (cli_flag){"-n", "--n-gen", CLI_INT, &o.n_gen, 0, 1 << 20, "N",
                           "generated tokens of the tg test; 0 skips it (default 128)", NULL});
    cli_add(&t, (cli_flag){"-d", "--n-depth", CLI_STR, &depths_arg, 0, 0, "D[,D...]",
                           "tokens in the KV cache before each test, one set of tests per depth (default 0); "
                           "the context holds one sequence per depth, each sized to fit",
                           NULL});
    cli_add(&t, (cli_flag){"-r", "--repetitions", CLI_INT, &o.reps, 1, 1000, "N",
                           "measured runs of each test, after one warm-up (default 5)", NULL});
    cli_add(&t, (cli_flag){NULL, "--format", CLI_ENUM, &format_arg, 0, 0, "md|json|csv",
                           "output: llama-bench's markdown table, JSON (one object per test) or CSV "
                           "(default md)",
                           NULL});
    cli_add(&t, (cli_flag){"-o", "--output", CLI_STR, &out_path, 0, 0, "FILE",
                           "write the results to FILE rather than stdout", NULL});
    cli_add(&t, (cli_flag){NULL, "--roofline", CLI_BOOL, &o.roofline, 0, 0, NULL,
                           "also measure this machine's DRAM read bandwidth and int8 multiply-add rate at "
                           "each thread count, after every round of runs, and give every figure as a "
                           "percentage of the best measurement",
                           NULL});
    cli_add_context_flags(&t, &o.ctx);
    cli_add_spec_flags(&t, &o.spec);
    /* -t takes a list here, as llama-bench's does. */
    for (int i = 0; i < t.n; i++)
        if (!strcmp(t.flags[i].long_name, "--threads"))
            t.flags[i] =
                (cli_flag){"-t",       "--threads",
                           CLI_STR,    &threads_arg,
                           0,          0,
                           "N[,N...]", "thread counts, one set of tests each (default: the number of cores)",
                           NULL};
    const int st = cli_parse(&t, argc, argv);
    if (st != CLI_PROCEED)
        return st;
    if (o.n_prompt == 0 && o.n_gen == 0) {
        fprintf(stderr, "woolly %s: nothing to measure (-p 0 and -n 0)\n", cmd);
        return 2;
    }
    bool bad_spec;
    const bool speculate = cli_spec_wanted(cmd, &o.spec, false, &bad_spec);
    if (bad_spec)
        return 2;
    if (speculate && o.n_gen == 0) {
        fprintf(stderr, "woolly %s: --draft and --lookup measure generation: give -n N > 0\n", cmd);
        return 2;
    }
    o.format = !strcmp(format_arg, "json") ? BENCH_JSON : !strcmp(format_arg, "csv") ? BENCH_CSV : BENCH_MD;
    int threads[MAX_THREAD_COUNTS], n_threads = 1;
    threads[0] = o.ctx.n_threads;
    if (threads_arg && (n_threads = parse_int_list(cmd, "-t", threads_arg, 1, WOOLLY_MAX_THREADS,
                                                   MAX_THREAD_COUNTS, "thread count", "1,2", threads)) < 0)
        return 2;
    if ((o.n_depths = parse_int_list(cmd, "-d", depths_arg, 0, MAX_DEPTH, MAX_DEPTHS, "depth", "0,4096",
                                     o.depths)) < 0)
        return 2;
    o.max_depth = 0;
    for (int i = 0; i < o.n_depths; i++)
        o.max_depth = o.depths[i] > o.max_depth ? o.depths[i] : o.max_depth;
    const int32_t longest = o.n_prompt > o.n_gen ? o.n_prompt : o.n_gen;
    if (o.ctx.n_ctx_given && o.ctx.n_ctx < o.max_depth + longest) {
        fprintf(
            stderr,
            "woolly %s: the tests need %d positions (-d %d + %d tokens), more than --ctx-size %d: lower -d, "
            "-p or -n, or raise --ctx-size\n",
            cmd, o.max_depth + longest, o.max_depth, longest, o.ctx.n_ctx);
        return 2;
    }

    if (out_path && cli_output_is_input(cmd, out_path, model_path))
        return 2;
    bench_run r = {.model_path = model_path, .kv_type = o.ctx.kv_type, .roofline = o.roofline};
    woolly_model *m = cli_open_model(cmd, model_path, &o.ctx, &r.load_s);
    if (!m)
        return 1;
    if (!o.ctx.n_ctx_given && o.max_depth + longest > woolly_model_n_ctx_train(m))
        fprintf(stderr,
                "woolly %s: warning: the tests reach position %d, past the %d the model was trained with\n",
                cmd, o.max_depth + longest, woolly_model_n_ctx_train(m));
    r.model_name = woolly_model_name(m);
    r.model_size = woolly_model_size(m);
    r.model_params = woolly_model_n_params(m);
    r.isa = woolly_isa_name(woolly_isa_active());
    r.weights = woolly_model_weights_source(m);
    int status = 1;
    woolly_token *ids = malloc(sizeof *ids * ((size_t)longest + (size_t)o.max_depth));
    r.tests = calloc((size_t)n_threads * ((size_t)o.n_depths * 2 + 1), sizeof *r.tests); /* + tgN spec */
    if (!ids || !r.tests) {
        fprintf(stderr, "woolly %s: out of memory\n", cmd);
        goto done;
    }
    if (o.roofline && bench_work_per_token(cmd, &r))
        goto done;
    o.out = out_path ? fopen(out_path, "w") : stdout;
    if (!o.out) {
        fprintf(stderr, "woolly %s: cannot write %s: %s\n", cmd, out_path, strerror(errno));
        goto done;
    }
    /* Fixed pseudo-random token ids: what the speed depends on is their count, not their text. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < longest + o.max_depth; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (woolly_token)(x % (uint64_t)woolly_model_n_vocab(m));
    }
    if (o.format == BENCH_MD)
        bench_md_header(o.out, o.roofline);
    bool rss_trackable = true;
    for (int i = 0; i < n_threads; i++)
        if (bench_threads(cmd, &o, m, ids, threads[i], &r, &rss_trackable) ||
            (speculate && bench_spec_test(cmd, &o, m, ids + o.max_depth, threads[i], &r)))
            goto done;
    if (rss_trackable) {
        const uint64_t rss = peak_rss_bytes();
        r.peak_rss = rss > r.peak_rss ? rss : r.peak_rss;
    }
    if (o.format == BENCH_MD)
        bench_md_footer(o.out, &r);
    else if (o.format == BENCH_JSON)
        bench_write_json(o.out, &r);
    else
        bench_write_csv(o.out, &r);
    status = 0;
    const bool write_failed = ferror(o.out) != 0;
    const bool close_failed = o.out != stdout && fclose(o.out) != 0;
    o.out = NULL;
    if (write_failed || close_failed) {
        fprintf(stderr, "woolly %s: writing %s failed\n", cmd, out_path ? out_path : "the results");
        status = 1;
    }
done:
    if (o.out && o.out != stdout)
        fclose(o.out);
    if (r.tests)
        for (int i = 0; i < r.n_tests; i++)
            free(r.tests[i].samples_ts);
    free(r.tests);
    free(ids);
    woolly_model_close(m);
    return status;
}
