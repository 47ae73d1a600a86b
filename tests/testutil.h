/* Shared test helpers. Test data is read in place from ../shared/testdata; a missing file is a test
 * failure (cr_assert), never a skip. */
#ifndef WOOLLY_TESTUTIL_H
#define WOOLLY_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Path of a file under the shared test data folder (static buffer, valid until the next call). */
const char *tu_data(const char *rel);

/* Whole file into a heap buffer (NUL-terminated one past *size). Fails the test if unreadable. */
char *tu_read_file(const char *path, size_t *size);

/* A heap copy of exactly `n` bytes (so that sanitizers see any overrun of a parser). */
void *tu_heap_copy(const void *p, size_t n);

/* Runs a shell command line with no input, capturing stdout and stderr (heap strings, caller frees;
 * NULL to drop one). Returns the exit status (or -1 if it did not exit normally). */
int tu_run_shell(const char *cmd, char **out, char **err);

/* tu_run_shell of the woolly command with a shell argument string ("info model.gguf"). */
int tu_run_cli(const char *args, char **out, char **err);

/* Asserts that the woolly command fails (exit status > 0) with message_part in its stderr. */
void tu_cli_fails(const char *args, const char *message_part);

/* A fresh path in the build's temporary folder for this test process: "<build>/tmp/<pid>-<name>". */
const char *tu_tmp_path(const char *name);

/* A copy of the shared stories260K model whose first attention norm holds a NaN, as a damaged download
 * might: every logit is NaN from the first token on. Written to tu_tmp_path(name); returns that path
 * (static buffer; the caller removes the file). */
const char *tu_stories_with_a_nan(const char *name);

/* Comma-separated integers; returns the count, *ids heap-allocated. */
int tu_parse_ids(const char *s, int32_t **ids);

/* sum((x-ref)^2) / sum(ref^2) */
double tu_nmse(const float *x, const float *ref, size_t n);

/* Deterministic pseudo-random numbers (xorshift), for test data. */
typedef struct {
    uint64_t s;
} tu_rng;
uint64_t tu_rand_u64(tu_rng *r);
float tu_rand_uniform(tu_rng *r); /* [0, 1) */
float tu_rand_normal(tu_rng *r);  /* N(0, 1) */

#endif
