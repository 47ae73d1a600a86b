/* The one argument parser of every `woolly` command: a table of flags, each with its type, range and
 * help line, plus how many positional arguments the command takes. Every value is checked (a number that
 * does not parse, is out of range or is missing, a name not in its list: an error naming the flag and
 * the value), unknown flags are errors, `--help` prints the table. Also the flag groups several commands
 * share (model, context, sampling) and small helpers. */
#ifndef WOOLLY_CLI_COMMON_H
#define WOOLLY_CLI_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "woolly.h"

typedef enum cli_kind {
    CLI_INT,      /* int32_t in [lo, hi] */
    CLI_I64,      /* int64_t in [lo, hi] */
    CLI_U64,      /* uint64_t, any value (a seed) */
    CLI_FLOAT,    /* finite float in [lo, hi] */
    CLI_STR,      /* const char * */
    CLI_ENUM,     /* const char *, one of the '|'-separated names in meta ("f16|f32") */
    CLI_BOOL,     /* bool set to true, no value */
    CLI_BOOL_OFF, /* bool set to false, no value (--untied) */
} cli_kind;

typedef struct cli_flag {
    const char *short_name; /* "-m" or NULL */
    const char *long_name;  /* "--model" */
    cli_kind kind;
    void *dst;
    double lo, hi;    /* inclusive range of numbers; lo == hi means any value the type holds */
    const char *meta; /* "N" in "--threads N"; the names of a CLI_ENUM */
    const char *help;
    int *count; /* optional: counts how often the flag was given */
} cli_flag;

/* Up to this many flags per command. */
#define CLI_MAX_FLAGS 40

typedef struct cli_table {
    const char *synopsis; /* "[-t N] IN.gguf OUT.gguf TYPE", after "usage: woolly CMD" */
    const char *about;    /* optional paragraph(s) of --help, each line ending in '\n' */
    const char *args;     /* the positional arguments, named for messages ("IN.gguf OUT.gguf TYPE") */
    int min_args, max_args;
    cli_flag flags[CLI_MAX_FLAGS];
    bool required[CLI_MAX_FLAGS]; /* cli_parse fails with "<flag> <meta> is required" without it */
    int n;
    int n_args; /* set by cli_parse */
} cli_table;

void cli_add(cli_table *t, cli_flag f);
/* A flag the command cannot run without. */
void cli_add_required(cli_table *t, cli_flag f);

/* cli_parse's "go on and run the command". */
#define CLI_PROCEED (-1)

/* Parses argv[1..argc) (argv[0] is the command name). Like getopt, it moves the positional arguments
 * to argv[1..t->n_args], in their order: those not starting with '-', "-" itself, negative integers
 * ("-5") and everything after "--". Returns CLI_PROCEED, or the exit status to return: 0 after --help,
 * 2 after printing a usage error to stderr. */
int cli_parse(cli_table *t, int argc, char **argv);

/* ---- flag groups ---------------------------------------------------------------------------------- */

typedef struct cli_context_opts {
    int32_t n_ctx, n_batch, n_threads;
    const char *kv_type;      /* "f16" | "f32" | "q8_0" */
    const char *tune_profile; /* --tune-profile FILE, or NULL */
    const char *repack_cache; /* --repack-cache DIR, or NULL */
    int n_ctx_given;
} cli_context_opts;

/* -m/--model MODEL, required. */
void cli_add_model_flag(cli_table *t, const char **path);

/* -t/--threads, --ctx-size, --batch-size, --kv-type (defaults: cores, model's, 512, f16), --tune-profile,
 * --repack-cache. */
void cli_add_context_flags(cli_table *t, cli_context_opts *o);

/* The cache type a --kv-type name (f16, f32, q8_0; checked by the flag table) stands for. */
woolly_kv_type cli_kv_type(const char *name);

/* Converts to context parameters; warns when the context exceeds the trained length. */
void cli_context_params(const char *cmd, const cli_context_opts *o, const woolly_model *m,
                        woolly_context_params *p);

#define CLI_MAX_LOGIT_BIAS 1024

typedef struct cli_sampling_opts {
    woolly_sampler_params p;
    int seed_given;
    const char *logit_bias; /* --logit-bias as given, or NULL */
    int32_t n_bias;         /* and parsed (cli_sampling_finish): bias[i] added to token bias_id[i]'s logit */
    woolly_token bias_id[CLI_MAX_LOGIT_BIAS];
    float bias[CLI_MAX_LOGIT_BIAS];
} cli_sampling_opts;

/* --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
 * --frequency-penalty, --logit-bias, --seed. */
void cli_add_sampling_flags(cli_table *t, cli_sampling_opts *o);
/* Parses --logit-bias ("ID(+|-)BIAS[,...]", each BIAS in [-100, 100]; a token's id is checked when the
 * sampler takes it) and, when `pick_seed`, picks a seed from the clock when none was given (reported on
 * stderr so a run can be repeated). 0, or -1 after a message. */
int cli_sampling_finish(const char *cmd, cli_sampling_opts *o, bool pick_seed);
/* m's sampler with o's parameters and logit biases; NULL with woolly_last_error set. */
woolly_sampler *cli_open_sampler(const woolly_model *m, const cli_sampling_opts *o);

/* ---- helpers -------------------------------------------------------------------------------------- */

double cli_now_s(void);

/* An output must never be one of a command's inputs (the input is memory-mapped while the output is
 * written): true, after a message, if `out` names the same existing file as `in`. */
bool cli_output_is_input(const char *cmd, const char *out, const char *in);

/* Prints the C API's last error (woolly_last_error) for a failed call. */
void cli_api_error(const char *cmd);

/* Opens a model, printing the error; *load_s gets the time it took. With context options (may be NULL),
 * their --tune-profile replaces WOOLLY_TUNE_PROFILE for the model. */
woolly_model *cli_open_model(const char *cmd, const char *path, const cli_context_opts *o, double *load_s);

/* "PATH (N tuned steps for T threads)" or "defaults": what a context runs with. */
void cli_profile_text(const woolly_model *m, const woolly_context *c, char *buf, size_t n);

/* Comma-separated token ids ("1,2,3"): each must be a decimal integer in [0, n_vocab). Returns the
 * count (ids heap-allocated) or -1 after a message. */
int32_t cli_parse_tokens(const char *cmd, const char *s, int32_t n_vocab, woolly_token **ids);

/* Exactly the bytes of a file, in a heap buffer with a NUL after them (*len gets their count); NULL
 * after a message naming the file and the reason. */
char *cli_read_file(const char *cmd, const char *path, size_t *len);

/* A text's tokens as llama.cpp's perplexity and imatrix tools take them: BOS first when the vocabulary
 * asks for one, and special-token names in the text left as text. A heap array (the count in *n); NULL
 * after a message. */
woolly_token *cli_tokenize_text(const char *cmd, const woolly_model *m, const char *text, size_t len, int32_t *n);

/* cli_read_file of a text that must not be empty (it is there `to` be scored, evaluated, ...); NULL after
 * a message. */
char *cli_read_text(const char *cmd, const char *path, size_t *len, const char *to);

/* Tokenizes text into a heap array (the count in *n); NULL after a message. */
woolly_token *cli_tokenize(const char *cmd, const woolly_model *m, const char *text, bool add_bos,
                           int32_t *n);

#endif
