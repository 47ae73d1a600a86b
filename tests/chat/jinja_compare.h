/* Renders a folder of chat templates with Python's Jinja2 (tests/chat/jinja_reference.py) and with
 * Woolly's interpreter, over the same conversations, and compares them: shared by the test
 * (tests/test_jinja_reference.c, on tests/data/chat/) and the survey tool (tests/chat/jinja_survey.c, on
 * any folder, such as a collection of published templates). */
#ifndef WOOLLY_TESTS_JINJA_COMPARE_H
#define WOOLLY_TESTS_JINJA_COMPARE_H

#include <stddef.h>

/* How one (template, conversation) pair came out. */
enum jinja_outcome {
    JINJA_SAME,        /* both render, byte for byte the same */
    JINJA_DIFFER,      /* both render, the texts differ */
    JINJA_ONLY_JINJA2, /* Jinja2 renders it, the interpreter fails */
    JINJA_BOTH_REFUSE, /* Jinja2 refuses it (raise_exception or an error), and so does the interpreter */
    JINJA_ONLY_WOOLLY, /* Jinja2 refuses it, the interpreter renders */
    JINJA_UNPARSABLE,  /* the interpreter cannot parse the template */
    JINJA_OUTCOMES
};

/* Called once per pair: `got` is the interpreter's text (NULL when it failed, `err` then says why), `want`
 * Jinja2's text or, where Jinja2 refused, its message. */
typedef void (*jinja_compare_report)(void *user, enum jinja_outcome outcome, const char *template_name,
                                     const char *context_name, const char *got, size_t got_len,
                                     const char *want, const char *err);

/* Runs the reference with `python` on every *.jinja file of `template_dir`, writing into `out_dir` (which
 * it removes afterwards), then compares. counts[outcome] receives the number of pairs of each outcome.
 * Returns 0, or -1 with a message in err when the reference could not run or its output is missing. */
int jinja_compare_dir(const char *python, const char *source_dir, const char *template_dir,
                      const char *out_dir, jinja_compare_report report, void *user,
                      int counts[JINJA_OUTCOMES], char *err, size_t err_size);

#endif
