/* A one-line progress bar on stderr for long commands: work done, its rate and the time left. It draws
 * only when stderr is a terminal (a log file or a pipe gets no carriage returns) and the command was
 * not asked to be quiet. */
#ifndef WOOLLY_CLI_PROGRESS_H
#define WOOLLY_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cli_progress {
    bool on;
    double t0;
    int64_t total; /* units of work (tokens) */
    const char *unit;
} cli_progress;

/* The bar's text for `done` of `total` units after `elapsed_s` seconds, with the step count
 * ("chunk 3/18"): "[#####.....]  30%  chunk 3/18  1234 tokens/s  1:05 left". */
void cli_progress_format(char *buf, size_t cap, int64_t done, int64_t total, double elapsed_s,
                         const char *step_name, int step, int n_steps, const char *unit);

/* Draws only if `wanted` and stderr is a terminal. */
void cli_progress_start(cli_progress *p, bool wanted, int64_t total, const char *unit);
void cli_progress_update(cli_progress *p, int64_t done, const char *step_name, int step, int n_steps);
/* Erases the bar, so that other output starts on a clean line; the next update draws it again. */
void cli_progress_clear(cli_progress *p);

#endif
