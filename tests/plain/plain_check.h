/* The plain test driver's assertions and test definitions: the subset of Criterion's names that the
 * files built in both modes use (tests/harness.h), so that one source serves both. A failed assertion
 * prints where and why and ends the current test (an expectation lets it continue); the driver
 * (plain_check.c) runs every registered test and ends with the line "N passed, N failed".
 *
 * Messages follow Criterion's form: an optional printf format (a string literal) and its arguments. */
#ifndef WOOLLY_PLAIN_CHECK_H
#define WOOLLY_PLAIN_CHECK_H

typedef void (*plain_test_fn)(void);

/* Called before main by every Test(): the driver runs the tests sorted by suite and name. */
void plain_register(const char *suite, const char *name, plain_test_fn fn);

/* The driver's positional arguments after its options, for tests that take inputs (NULL-terminated). */
char *const *plain_args(void);

/* A failed check at file:line; `fatal` ends the current test (or, outside one, the process). */
void plain_fail(int fatal, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define Test(suite, name)                                                                                    \
    static void plain_test_##suite##_##name(void);                                                           \
    __attribute__((constructor)) static void plain_register_##suite##_##name(void)                           \
    {                                                                                                        \
        plain_register(#suite, #name, plain_test_##suite##_##name);                                          \
    }                                                                                                        \
    static void plain_test_##suite##_##name(void)

/* " " before the optional format keeps the format non-empty when the message is left out. */
#define PLAIN_CHECK(fatal, cond, text, ...)                                                                  \
    do {                                                                                                     \
        if (!(cond))                                                                                         \
            plain_fail(fatal, __FILE__, __LINE__, text, " " __VA_ARGS__);                                    \
    } while (0)

#define cr_assert(cond, ...) PLAIN_CHECK(1, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) PLAIN_CHECK(0, cond, #cond, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) PLAIN_CHECK(1, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) PLAIN_CHECK(1, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) PLAIN_CHECK(1, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) PLAIN_CHECK(1, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) PLAIN_CHECK(1, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) PLAIN_CHECK(1, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) PLAIN_CHECK(0, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) PLAIN_CHECK(0, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) PLAIN_CHECK(0, (a) <= (b), #a " <= " #b, __VA_ARGS__)

#endif
