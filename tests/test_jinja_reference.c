/* Woolly's Jinja interpreter against Python's Jinja2, the reference: tests/chat/jinja_reference.py
 * renders every template of tests/data/chat/ over conversations with system prompts, multi-turn, content
 * parts, tools, tool calls and results, as Hugging Face configures Jinja2; the interpreter renders the
 * same contexts, and the texts must be identical byte for byte (and where Jinja2 refuses, by a
 * raise_exception or an error, the interpreter must refuse too). */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "testutil.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

Test(jinja_reference, families_render_as_jinja2_does)
{
    char out_dir[4096], cmd[16384];
    snprintf(out_dir, sizeof out_dir, "%s", tu_tmp_path("jinja_reference"));
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/chat/jinja_reference.py' '%s/tests/data/chat' '%s'",
             WOOLLY_PYTHON, WOOLLY_SOURCE_DIR, WOOLLY_SOURCE_DIR, out_dir);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    char path[8192];
    snprintf(path, sizeof path, "%s/manifest.txt", out_dir);
    FILE *m = fopen(path, "r");
    cr_assert(m != NULL, "%s", path);
    char tname[256], cname[256], kind[8];
    /* every template's outcome is reported (a parse failure too), then one summary line */
    int n_same = 0, n_refused = 0, n_differ = 0, n_unparsable = 0;
    while (fscanf(m, "%255s %255s %7s", tname, cname, kind) == 3) {
        snprintf(path, sizeof path, "%s/tests/data/chat/%s", WOOLLY_SOURCE_DIR, tname);
        size_t tlen;
        char *src = slurp(path, &tlen);
        snprintf(path, sizeof path, "%s/%s.json", out_dir, cname);
        char *ctx = slurp(path, NULL);
        snprintf(path, sizeof path, "%s/%s.%s.%s", out_dir, tname, cname, kind);
        char *want = slurp(path, NULL);
        char err[512] = "";
        jinja_template *t = jinja_parse(src, tlen, err, sizeof err);
        cr_expect(t != NULL, "%s: the interpreter cannot parse it: %s", tname, err);
        size_t len = 0;
        char *got = t ? jinja_render(t, ctx, &len, err, sizeof err) : NULL;
        if (!t) {
            n_unparsable++;
        } else if (!strcmp(kind, "ok")) {
            cr_expect(got != NULL, "%s with %s: Jinja2 renders it, the interpreter fails: %s", tname, cname,
                      err);
            const bool same = got && len == strlen(want) && !memcmp(got, want, len);
            if (got)
                cr_expect(same, "%s with %s: the interpreter rendered\n[%s]\nJinja2\n[%s]", tname, cname, got,
                          want);
            n_same += same;
            n_differ += !same;
        } else {
            cr_expect(got == NULL, "%s with %s: Jinja2 refuses it (%s), the interpreter renders\n[%s]", tname,
                      cname, want, got);
            n_refused += got == NULL;
            if (!got) /* --verbose: both reasons side by side */
                cr_log_info("%s with %s: both refuse: Jinja2 (%s), the interpreter (%s)", tname, cname, want,
                            err);
            n_differ += got != NULL;
        }
        free(got);
        jinja_free(t);
        free(src);
        free(ctx);
        free(want);
        remove(path);
    }
    fclose(m);
    printf("jinja_reference: templates x contexts: %d identical, %d refused by both, %d differing, %d "
           "unparsable\n",
           n_same, n_refused, n_differ, n_unparsable);
    fflush(stdout);
    cr_expect_gt(n_same, 60, "%d renderings identical", n_same);
    cr_expect_gt(n_refused, 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    cr_expect_eq(system(cmd), 0);
}
