/* The plain test driver: runs the tests that Test() registered, each until its first failed assertion,
 * and prints one line per test and, last, "N passed, N failed"; the exit status is 1 if any failed.
 *
 *   DRIVER [--shard K/N] [--filter SUBSTRING] [--exclude SUBSTRING] [ARGS...]
 * --filter keeps the tests whose "suite::name" contains SUBSTRING, --exclude drops those that do; of the
 * rest, --shard runs every Nth from the Kth (0-based; ctest starts N shards side by side). ARGS reach the
 * tests through plain_args(). */
#include "plain_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct plain_test {
    const char *suite, *name;
    plain_test_fn fn;
} plain_test;

static plain_test *g_tests;
static int g_n_tests, g_cap_tests;
static char *const *g_args;

static struct {
    int running; /* inside a test: a fatal failure jumps back to the driver */
    int failed;  /* the current test has failed a check */
    jmp_buf back;
} g_cur;

void plain_register(const char *suite, const char *name, plain_test_fn fn)
{
    if (g_n_tests == g_cap_tests) {
        g_cap_tests = g_cap_tests ? 2 * g_cap_tests : 64;
        g_tests = realloc(g_tests, sizeof *g_tests * (size_t)g_cap_tests);
        if (!g_tests) {
            fputs("plain driver: out of memory registering the tests\n", stderr);
            exit(2);
        }
    }
    g_tests[g_n_tests++] = (plain_test){suite, name, fn};
}

char *const *plain_args(void)
{
    return g_args;
}

void plain_fail(int fatal, const char *file, int line, const char *cond, const char *fmt, ...)
{
    printf("  %s:%d: %s failed:", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    g_cur.failed = 1;
    if (!fatal)
        return;
    if (g_cur.running)
        longjmp(g_cur.back, 1);
    exit(1);
}

static int by_name(const void *a, const void *b)
{
    const plain_test *x = a, *y = b;
    const int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one test; 1 if it failed a check. */
static int run_one(plain_test_fn fn)
{
    g_cur.failed = 0;
    g_cur.running = 1;
    if (!setjmp(g_cur.back))
        fn();
    g_cur.running = 0;
    return g_cur.failed;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--shard K/N] [--filter SUBSTRING] [--exclude SUBSTRING] [ARGS...]\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    int shard = 0, n_shards = 1, i = 1;
    const char *filter = NULL, *exclude = NULL;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (!strcmp(argv[i], "--shard") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d/%d", &shard, &n_shards) != 2 || n_shards < 1 || shard < 0 ||
                shard >= n_shards) {
                fprintf(stderr, "%s: --shard %s: expected K/N with 0 <= K < N\n", argv[0], argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--exclude") && i + 1 < argc) {
            exclude = argv[++i];
        } else {
            return usage(argv[0]);
        }
    }
    g_args = argv + i;
    qsort(g_tests, (size_t)g_n_tests, sizeof *g_tests, by_name);

    int passed = 0, failed = 0, selected = 0;
    for (int t = 0; t < g_n_tests; t++) {
        char full[512];
        snprintf(full, sizeof full, "%s::%s", g_tests[t].suite, g_tests[t].name);
        if ((filter && !strstr(full, filter)) || (exclude && strstr(full, exclude)))
            continue;
        if (selected++ % n_shards != shard)
            continue;
        const double t0 = now();
        const int fail = run_one(g_tests[t].fn);
        printf("%s %s (%.2f s)\n", fail ? "FAIL" : "PASS", full, now() - t0);
        fflush(stdout);
        if (fail)
            failed++;
        else
            passed++;
    }
    free(g_tests);
    printf("%d passed, %d failed\n", passed, failed);
    return failed || passed == 0 ? 1 : 0;
}
