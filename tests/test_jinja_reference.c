/* Woolly's Jinja interpreter against Python's Jinja2, the reference: tests/chat/jinja_reference.py
 * renders every template of tests/data/chat/ over conversations with system prompts, multi-turn, content
 * parts, tools, tool calls and results, as Hugging Face configures Jinja2; the interpreter renders the
 * same contexts, and the texts must be identical byte for byte (and where Jinja2 refuses, by a
 * raise_exception or an error, the interpreter must refuse too). tests/chat/jinja_survey runs the same
 * comparison on any other folder of templates. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "chat/jinja_compare.h"
#include "testutil.h"

static void expect_agreement(void *user, enum jinja_outcome o, const char *tname, const char *cname,
                             const char *got, size_t got_len, const char *want, const char *err)
{
    (void)user;
    cr_expect(o != JINJA_UNPARSABLE, "%s: the interpreter cannot parse it: %s", tname, err);
    cr_expect(o != JINJA_ONLY_JINJA2, "%s with %s: Jinja2 renders it, the interpreter fails: %s", tname,
              cname, err);
    cr_expect(o != JINJA_DIFFER, "%s with %s: the interpreter rendered\n[%.*s]\nJinja2\n[%s]", tname, cname,
              (int)got_len, got, want);
    cr_expect(o != JINJA_ONLY_WOOLLY, "%s with %s: Jinja2 refuses it (%s), the interpreter renders\n[%.*s]",
              tname, cname, want, (int)got_len, got);
    if (o == JINJA_BOTH_REFUSE) /* --verbose: both reasons side by side */
        cr_log_info("%s with %s: both refuse: Jinja2 (%s), the interpreter (%s)", tname, cname, want, err);
}

Test(jinja_reference, families_render_as_jinja2_does)
{
    char tdir[4096], err[512] = "";
    snprintf(tdir, sizeof tdir, "%s/tests/data/chat", WOOLLY_SOURCE_DIR);
    int n[JINJA_OUTCOMES];
    cr_assert_eq(jinja_compare_dir(WOOLLY_PYTHON, WOOLLY_SOURCE_DIR, tdir, tu_tmp_path("jinja_reference"),
                                   expect_agreement, NULL, n, err, sizeof err),
                 0, "%s", err);
    printf("jinja_reference: templates x contexts: %d identical, %d refused by both, %d differing, %d "
           "unparsable\n",
           n[JINJA_SAME], n[JINJA_BOTH_REFUSE], n[JINJA_DIFFER] + n[JINJA_ONLY_JINJA2] + n[JINJA_ONLY_WOOLLY],
           n[JINJA_UNPARSABLE]);
    fflush(stdout);
    cr_expect_gt(n[JINJA_SAME], 60, "%d renderings identical", n[JINJA_SAME]);
    cr_expect_gt(n[JINJA_BOTH_REFUSE], 0);
}
