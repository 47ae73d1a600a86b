/* `woolly bench`'s results and their three output formats: llama-bench's markdown table (rows printed
 * as the tests finish), JSON (an array with one object per test, llama-bench's field names where it has
 * them) and CSV (one header line, one line per test). */
#ifndef WOOLLY_CLI_BENCH_REPORT_H
#define WOOLLY_CLI_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum bench_format { BENCH_MD, BENCH_JSON, BENCH_CSV } bench_format;

/* The compute rate a prompt is judged against: the int8 dot product's, or the BF16 dot product's or the
 * F32 FMA's where most of the layers' multiply-adds are of BF16, or of F16 and F32, weights. */
typedef enum bench_rate { BENCH_RATE_INT8, BENCH_RATE_BF16, BENCH_RATE_F32 } bench_rate;

/* This machine's limits for one thread count, and what a test achieved against them (--roofline): the
 * best of `samples` measurements taken between the rounds of runs, and the lowest of them, which shows
 * how far a shared host's limits moved meanwhile. */
typedef struct bench_roof {
    double dram_read_gbs; /* GB/s, 0 if not measured */
    double int8_gmacs;    /* GMAC/s, 0 at a level without an int8 dot product */
    const char *int8_instr;
    double bf16_gmacs; /* GMAC/s of the level's BF16 dot product, 0 where it has none */
    const char *bf16_instr;
    double f32_gmacs; /* GMAC/s of the level's F32 FMA, 0 where not measured */
    const char *f32_instr;
    int samples;
    double dram_read_low_gbs, int8_low_gmacs;
} bench_roof;

/* A speculative generation test's facts (--draft / --lookup): greedy tgN after an n_prompt-token prompt,
 * guesses from the draft model and/or prompt lookup, checked by the target in steps of one pass each. */
typedef struct bench_spec {
    const char *draft; /* the draft model's path, or NULL */
    int32_t lookup, draft_max, n_prompt;
    int64_t drafted, accepted, steps, tokens; /* over the measured runs */
} bench_spec;

typedef struct bench_test {
    int threads;
    bool batched;  /* pp (one batch) rather than tg (one token at a time) */
    int32_t n;     /* tokens of the test */
    int32_t depth; /* tokens in the cache before it */
    char name[48]; /* "pp512", "tg128", "pp512 @ d4096", "tg128 spec" */
    bool speculative; /* a speculative generation test: spec holds its counts */
    bench_spec spec;
    double *samples_ts;
    int n_samples;
    double mean_ts, std_ts;
    char profile[1200]; /* cli_profile_text of the test's context */
    /* --roofline: the limits at the test's thread count, the work per token (bytes read for tg, the
     * weights and the KV cache at the test's depth; multiply-adds for pp), the work rate (GB/s, GMAC/s)
     * and the limit it is judged against (0: none at this ISA level) */
    bool has_roof;
    bench_roof roof;
    double work_per_token, work_rate, limit;
} bench_test;

typedef struct bench_run {
    const char *model_name, *model_path, *isa, *kv_type;
    const char *weights; /* woolly_model_weights_source: repacked at load, or mapped from the repack cache */
    uint64_t model_size, model_params;
    double load_s;
    uint64_t peak_rss; /* bytes */
    bench_test *tests;
    int n_tests;
    bool roofline;
    bool speculative; /* some test is speculative: the CSV has its columns */
    double bytes_per_token; /* weights read per decoded token: of a mixture of experts, the active ones */
    int n_expert, n_expert_used; /* a mixture of experts' n and k per layer (0: none) */
    double expert_bytes;         /* all its experts' bytes (of which k/n are in bytes_per_token) */
    double kv_bytes_per_position; /* K and V of every layer for one cached position, in the run's cache
                                     type: what each position of the context adds to a token's reads */
    int kv_layers, kv_sliding_layers; /* layers, and of them those whose attention slides over a window */
    int32_t kv_window;                /* that window (positions; 0: no layer slides): such a layer's token
                                         reads at most this many positions of its cache */
    double macs_layers;     /* multiply-adds per token of the layers' matrices */
    bench_rate prompt_rate; /* the rate a prompt is judged against */
    double macs_output;     /* of the output matrix (a prompt's last token only) */
} bench_run;

/* The name of a rate, as the roofline line gives it: "int8", "bf16" or "f32". */
const char *bench_rate_name(bench_rate rate);

/* Mean and sample standard deviation of a test's samples. */
void bench_test_stats(bench_test *t);

/* The markdown table: its header, then one row per test as it finishes, then the run's facts (load
 * time, ISA level, tuning profile per thread count, peak RSS, the limits). */
void bench_md_header(FILE *f, bool roofline);
void bench_md_row(FILE *f, const bench_run *r, const bench_test *t);
void bench_md_footer(FILE *f, const bench_run *r);

void bench_write_json(FILE *f, const bench_run *r);
void bench_write_csv(FILE *f, const bench_run *r);

#endif
