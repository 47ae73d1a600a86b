/* See jinja_compare.h. */
#include "jinja_compare.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

static void fail(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    if (len)
        *len = (size_t)n;
    return buf;
}

static enum jinja_outcome compare_one(const char *src, size_t src_len, const char *ctx, const char *want,
                                      bool jinja2_ok, char **got, size_t *got_len, char *err, size_t err_size)
{
    *got = NULL;
    jinja_template *t = jinja_parse(src, src_len, err, err_size);
    if (!t)
        return JINJA_UNPARSABLE;
    *got = jinja_render(t, ctx, got_len, err, err_size);
    jinja_free(t);
    if (!jinja2_ok)
        return *got ? JINJA_ONLY_WOOLLY : JINJA_BOTH_REFUSE;
    if (!*got)
        return JINJA_ONLY_JINJA2;
    return *got_len == strlen(want) && !memcmp(*got, want, *got_len) ? JINJA_SAME : JINJA_DIFFER;
}

int jinja_compare_dir(const char *python, const char *source_dir, const char *template_dir,
                      const char *out_dir, jinja_compare_report report, void *user,
                      int counts[JINJA_OUTCOMES], char *err, size_t err_size)
{
    for (int i = 0; i < JINJA_OUTCOMES; i++)
        counts[i] = 0;
    char cmd[16384], path[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/chat/jinja_reference.py' '%s' '%s'", python, source_dir,
             template_dir, out_dir);
    if (system(cmd) != 0) {
        fail(err, err_size, "%s failed", cmd);
        return -1;
    }
    snprintf(path, sizeof path, "%s/manifest.txt", out_dir);
    FILE *m = fopen(path, "r");
    if (!m) {
        fail(err, err_size, "the reference wrote no %s", path);
        return -1;
    }
    int rc = 0;
    char tname[256], cname[256], kind[8];
    while (rc == 0 && fscanf(m, "%255s %255s %7s", tname, cname, kind) == 3) {
        size_t src_len, got_len = 0;
        snprintf(path, sizeof path, "%s/%s", template_dir, tname);
        char *src = slurp(path, &src_len);
        snprintf(path, sizeof path, "%s/%s.json", out_dir, cname);
        char *ctx = slurp(path, NULL);
        snprintf(path, sizeof path, "%s/%s.%s.%s", out_dir, tname, cname, kind);
        char *want = slurp(path, NULL);
        if (!src || !ctx || !want) {
            fail(err, err_size, "cannot read the template, context or reference of %s with %s", tname, cname);
            rc = -1;
        } else {
            char why[512] = "", *got;
            const enum jinja_outcome o =
                compare_one(src, src_len, ctx, want, !strcmp(kind, "ok"), &got, &got_len, why, sizeof why);
            counts[o]++;
            report(user, o, tname, cname, got, got_len, want, why);
            free(got);
        }
        free(src);
        free(ctx);
        free(want);
    }
    fclose(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    if (system(cmd) != 0 && rc == 0) {
        fail(err, err_size, "%s failed", cmd);
        rc = -1;
    }
    return rc;
}
