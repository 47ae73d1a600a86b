/* Shared by the tuning-profile tests: profiles built in memory with kernels every build has (the scalar
 * references) or the ones this CPU runs by default, written with the tuner's writer. */
#ifndef WOOLLY_TEST_PROFILE_CHECK_H
#define WOOLLY_TEST_PROFILE_CHECK_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "tune.h"

static inline const woolly_kernel *pc_kernel(const char *name)
{
    const woolly_kernel *k = woolly_kernel_by_name(name);
    cr_assert(k != NULL, "kernel %s is not in the registry", name);
    return k;
}

static inline woolly_profile *pc_new(void)
{
    const int32_t mix[WOOLLY_TOKENS_CLASSES] = {128, 0, 512};
    woolly_profile *p = woolly_profile_new(false, mix);
    cr_assert(p != NULL);
    return p;
}

static inline void pc_layout(woolly_profile *p, enum woolly_type t, int64_t rows, int64_t cols,
                             const woolly_layout *l)
{
    woolly_error err = {{0}};
    const woolly_profile_layout row = {t, rows, cols, l};
    cr_assert_eq(woolly_profile_add_layout(p, &row, &err), 0, "%s", err.msg);
}

/* A matmul row; its default kernel is the scalar F32 reference of the class's op. */
static inline void pc_matmul(woolly_profile *p, enum woolly_type t, int64_t rows, int64_t cols,
                             enum woolly_tokens_class c, int threads, woolly_matmul_step s)
{
    woolly_error err = {{0}};
    char def[64];
    snprintf(def, sizeof def, "%s_f32_%s_scalar_%s", t == WOOLLY_TYPE_Q6_K ? "q6k" : "q4k",
             c == WOOLLY_TOKENS_1 ? "gemv" : "gemm", c == WOOLLY_TOKENS_1 ? "1x1" : "4x1");
    const woolly_profile_matmul row = {.type = t,
                                       .rows = rows,
                                       .cols = cols,
                                       .cls = c,
                                       .threads = threads,
                                       .step = s,
                                       .us = 12.5,
                                       .default_kernel = pc_kernel(def),
                                       .default_us = 25.25};
    cr_assert_eq(woolly_profile_add_matmul(p, &row, &err), 0, "%s", err.msg);
}

/* An attn row; its default kernel is the untiled scalar reference for the cache type. */
static inline void pc_attn(woolly_profile *p, enum woolly_type cache, int32_t head_dim,
                           enum woolly_attn_phase ph, int threads, const char *kernel,
                           int32_t queries_per_call, int32_t kv_split)
{
    woolly_error err = {{0}};
    char def[64];
    snprintf(def, sizeof def, "attn_%s_flash_scalar_any",
             cache == WOOLLY_TYPE_F16   ? "f16"
             : cache == WOOLLY_TYPE_F32 ? "f32"
                                        : "q80");
    const bool decode = ph == WOOLLY_ATTN_DECODE;
    const woolly_profile_attn row = {.cache = cache,
                                     .head_dim = head_dim,
                                     .phase = ph,
                                     .threads = threads,
                                     .kernel = pc_kernel(kernel),
                                     .queries_per_call = queries_per_call,
                                     .kv_split = kv_split,
                                     .queries = decode ? 1 : 512,
                                     .positions = decode ? 4096 : 512,
                                     .us = decode ? 310.5 : 9120.25,
                                     .default_kernel = pc_kernel(def),
                                     .default_us = decode ? 330.125 : 9400.5};
    cr_assert_eq(woolly_profile_add_attn(p, &row, &err), 0, "%s", err.msg);
}

/* The profile as text (heap, NUL-terminated; its length in *len). */
static inline char *pc_text(const woolly_profile *p, size_t *len)
{
    FILE *f = tmpfile();
    cr_assert(f != NULL);
    cr_assert_eq(woolly_profile_write(p, f), 0);
    const long n = ftell(f);
    cr_assert(n > 0);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    cr_assert(text != NULL);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return text;
}

static inline void pc_save_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

#endif
