#include "profile_text.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int woolly_profile_split_words(char *line, char **words)
{
    int n = 0;
    for (char *p = line;;) {
        char *sp = strchr(p, ' ');
        if (sp)
            *sp = 0;
        if (!*p || n == WOOLLY_PROFILE_MAX_WORDS)
            return -1;
        words[n++] = p;
        if (!sp)
            return n;
        p = sp + 1;
    }
}

int woolly_profile_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi || (*s != '-' && (*s < '0' || *s > '9')))
        return -1;
    *out = v;
    return 0;
}

int woolly_profile_parse_i32(const char *s, int32_t lo, int32_t hi, int32_t *out)
{
    int64_t v;
    if (woolly_profile_parse_i64(s, lo, hi, &v))
        return -1;
    *out = (int32_t)v;
    return 0;
}

int woolly_profile_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || *s < '0' || *s > '9')
        return -1;
    *out = v;
    return 0;
}

const char *woolly_profile_value_of(const char *word, const char *key)
{
    const size_t n = strlen(key);
    return !strncmp(word, key, n) && word[n] == '=' ? word + n + 1 : NULL;
}

/* One line after the header: a comment, a row or the end line. */
static int read_row(const woolly_profile_grammar *g, void *ctx, char *line, int *rows, bool *ended,
                    woolly_error *err)
{
    if (line[0] == '#')
        return 0;
    char *w[WOOLLY_PROFILE_MAX_WORDS];
    const int nw = woolly_profile_split_words(line, w);
    if (nw < 1)
        return woolly_fail(err, "an empty word (a blank line, or two spaces in a row)");
    if (strcmp(w[0], "end")) {
        if (g->row(ctx, w, nw, err))
            return -1;
        ++*rows;
        return 0;
    }
    int64_t count;
    if (nw != 2 || woolly_profile_parse_i64(w[1], 0, INT32_MAX, &count) || count != *rows)
        return woolly_fail(err, "'end %.20s' does not count the %d rows above it", nw == 2 ? w[1] : "",
                           *rows);
    *ended = true;
    return 0;
}

int woolly_profile_text_read(const char *text, size_t len, const char *path, const woolly_profile_grammar *g,
                             void *ctx, woolly_error *err)
{
    woolly_error why = {{0}};
    int line_no = 0, rows = 0;
    bool ended = false;
    if (len == 0 || text[len - 1] != '\n') {
        woolly_fail(&why, "%s",
                    len ? "the last line is cut (no line break at the end)" : "the file is empty");
        goto fail;
    }
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t n = (size_t)(nl - (text + at));
        line_no++;
        char line[WOOLLY_PROFILE_LINE_MAX];
        if (n >= sizeof line) {
            woolly_fail(&why, "the line is longer than %d bytes", WOOLLY_PROFILE_LINE_MAX - 1);
            goto fail;
        }
        memcpy(line, text + at, n);
        line[n] = 0;
        at += n + 1;
        if (strlen(line) != n) {
            woolly_fail(&why, "the line holds a NUL byte");
            goto fail;
        }
        if (ended) {
            woolly_fail(&why, "text after the end line");
            goto fail;
        }
        if (line_no <= g->n_header ? g->header(ctx, line_no - 1, line, &why)
                                   : read_row(g, ctx, line, &rows, &ended, &why))
            goto fail;
    }
    if (line_no < g->n_header) {
        woolly_fail(&why, "the header is cut after %d lines", line_no);
        line_no++;
        goto fail;
    }
    if (!ended) {
        woolly_fail(&why, "no end line: the file is cut");
        line_no++;
        goto fail;
    }
    return 0;
fail:
    return woolly_fail(err, "%s line %d: %s", path, line_no, why.msg);
}
