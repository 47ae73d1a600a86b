/* The test harness of the files that also build without Criterion: the generated per-kernel tests,
 * their harness (kernel_check.c), testutil.c and model_logits_check.h. With WOOLLY_PLAIN_TESTS defined
 * they build into a plain self-checking C driver (tests/plain/), which a cross build runs under an
 * emulator where Criterion cannot serve; otherwise they are Criterion tests. */
#ifndef WOOLLY_HARNESS_H
#define WOOLLY_HARNESS_H

#ifdef WOOLLY_PLAIN_TESTS
#include "plain/plain_check.h"
#else
#include <criterion/criterion.h>
#endif

#endif
