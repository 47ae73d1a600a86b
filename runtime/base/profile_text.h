/* The text of Woolly's profile files, one reader for both kinds: the tuning profile `woolly tune` writes
 * for one machine (model/profile.h) and the default profiles shipped per CPU class (kernels/
 * class_profile.h). Both are held to the same rules, so a file of either kind is used whole or not at
 * all:
 *   - the text ends with a line break; a line is at most WOOLLY_PROFILE_LINE_MAX - 1 bytes, without NUL;
 *   - the first n_header lines are the header, each checked in its place by the kind's header function;
 *   - then rows: a line starting with '#' is a comment; any other is words separated by single spaces
 *     (no empty word), handed to the kind's row function, except the last, 'end N', which counts the
 *     rows above it (comments aside): a cut file fails, and nothing may follow it.
 * A failure names the line: "PATH line N: why". */
#ifndef WOOLLY_PROFILE_TEXT_H
#define WOOLLY_PROFILE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum { WOOLLY_PROFILE_LINE_MAX = 2048, WOOLLY_PROFILE_MAX_WORDS = 24 };

typedef struct woolly_profile_grammar {
    int n_header; /* header lines before the rows */
    /* Header line idx (from 0), without its line break: 0, or -1 with a message. */
    int (*header)(void *ctx, int idx, const char *line, woolly_error *err);
    /* A row's words (at least one, the first not "end"): 0, or -1 with a message. */
    int (*row)(void *ctx, char **words, int n_words, woolly_error *err);
} woolly_profile_grammar;

/* Reads text (len bytes, not NUL-terminated) by grammar g, passing ctx to its functions. 0, or -1 with
 * "PATH line N: why" (path names the text in messages). */
int woolly_profile_text_read(const char *text, size_t len, const char *path, const woolly_profile_grammar *g,
                             void *ctx, woolly_error *err);

/* The words of a line, split in place at single spaces: the count, or -1 for an empty word (two spaces,
 * a leading or trailing one, an empty line) or more than WOOLLY_PROFILE_MAX_WORDS words. */
int woolly_profile_split_words(char *line, char **words);

/* Decimal integers within [lo, hi] and finite non-negative decimals, the whole word: 0, or -1. */
int woolly_profile_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int woolly_profile_parse_i32(const char *s, int32_t lo, int32_t hi, int32_t *out);
int woolly_profile_parse_double(const char *s, double *out);

/* "KEY=VALUE" with this key: the value, else NULL. */
const char *woolly_profile_value_of(const char *word, const char *key);

#endif
