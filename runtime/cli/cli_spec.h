/* The speculative-decoding flags of `woolly run`, `chat` and `bench` (--draft, --draft-max, --lookup):
 * opening the draft model and context beside the target's, and the stats line of a run's summary. */
#ifndef WOOLLY_CLI_SPEC_H
#define WOOLLY_CLI_SPEC_H

#include <stdio.h>

#include "cli_common.h"

typedef struct cli_spec_opts {
    const char *draft; /* --draft MODEL, or NULL */
    int32_t draft_max; /* --draft-max N */
    int32_t lookup;    /* --lookup N, 0: off */
    int draft_max_given;
} cli_spec_opts;

/* --draft MODEL, --draft-max N (1 .. 64), --lookup N (1 .. 16). */
void cli_add_spec_flags(cli_table *t, cli_spec_opts *o);

/* Whether the flags ask for speculation; --draft-max alone, or speculation with --context-shift
 * (ctx_shift), is a usage error (message, *bad set). */
bool cli_spec_wanted(const char *cmd, const cli_spec_opts *o, bool ctx_shift, bool *bad);

/* Makes the target's context parameters fit speculation (the logits of every checked position). */
void cli_spec_context_params(const cli_spec_opts *o, woolly_context_params *p);

/* The draft (if --draft: its model and a context of the target's size, threads and cache type) and the
 * spec over target; NULL after a message. *dm and *dc get the draft's model and context (NULL without
 * --draft), which the caller closes after the spec. */
woolly_spec *cli_spec_open(const char *cmd, const cli_spec_opts *o, const cli_context_opts *ctx_opts,
                           woolly_context *target, woolly_model **dm, woolly_context **dc);

/* "speculative  D drafted, A accepted (P%), S steps, M tokens per step" */
void cli_spec_report(FILE *f, const woolly_spec *s);

#endif
