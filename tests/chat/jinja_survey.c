/* jinja_survey TEMPLATE_DIR [OUT_DIR]: renders every *.jinja file of a folder with Python's Jinja2 and
 * with Woolly's interpreter over the reference's conversations (tests/chat/jinja_reference.py) and prints
 * one line per template with its outcomes, then the totals. Exits 1 when any pair disagrees. For template
 * collections the repository does not carry (e.g. a checkout of the published templates of many model
 * families); tests/test_jinja_reference.c runs the same comparison on tests/data/chat/. */
#include <stdio.h>
#include <string.h>

#include "jinja_compare.h"

static const char *const outcome_names[JINJA_OUTCOMES] = {
    [JINJA_SAME] = "identical",
    [JINJA_DIFFER] = "differing",
    [JINJA_ONLY_JINJA2] = "interpreter failed",
    [JINJA_BOTH_REFUSE] = "refused by both",
    [JINJA_ONLY_WOOLLY] = "rendered though Jinja2 refuses",
    [JINJA_UNPARSABLE] = "unparsable",
};

struct survey {
    char template_name[256];
    int counts[JINJA_OUTCOMES];
};

static void print_template(const struct survey *s)
{
    if (!s->template_name[0])
        return;
    printf("%-60s", s->template_name);
    for (int o = 0; o < JINJA_OUTCOMES; o++)
        if (s->counts[o])
            printf(" %d %s", s->counts[o], outcome_names[o]);
    printf("\n");
}

static void report(void *user, enum jinja_outcome o, const char *tname, const char *cname, const char *got,
                   size_t got_len, const char *want, const char *err)
{
    struct survey *s = user;
    if (strcmp(s->template_name, tname)) {
        print_template(s);
        snprintf(s->template_name, sizeof s->template_name, "%s", tname);
        memset(s->counts, 0, sizeof s->counts);
    }
    s->counts[o]++;
    if (o == JINJA_DIFFER)
        fprintf(stderr, "%s with %s: the interpreter rendered\n[%.*s]\nJinja2\n[%s]\n", tname, cname,
                (int)got_len, got, want);
    else if (o != JINJA_SAME && o != JINJA_BOTH_REFUSE)
        fprintf(stderr, "%s with %s: %s (interpreter: %s; Jinja2: %.200s)\n", tname, cname, outcome_names[o],
                err, want);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s TEMPLATE_DIR [OUT_DIR]\n", argv[0]);
        return 2;
    }
    struct survey s = {0};
    int n[JINJA_OUTCOMES];
    char err[512] = "";
    const char *out_dir = argc == 3 ? argv[2] : "jinja_survey.out";
    if (jinja_compare_dir(WOOLLY_PYTHON, WOOLLY_SOURCE_DIR, argv[1], out_dir, report, &s, n, err,
                          sizeof err)) {
        fprintf(stderr, "jinja_survey: %s\n", err);
        return 2;
    }
    print_template(&s);
    int pairs = 0;
    for (int o = 0; o < JINJA_OUTCOMES; o++)
        pairs += n[o];
    printf("templates x contexts: %d pairs:", pairs);
    for (int o = 0; o < JINJA_OUTCOMES; o++)
        printf(" %d %s%s", n[o], outcome_names[o], o + 1 < JINJA_OUTCOMES ? "," : "\n");
    return n[JINJA_SAME] + n[JINJA_BOTH_REFUSE] == pairs ? 0 : 1;
}
