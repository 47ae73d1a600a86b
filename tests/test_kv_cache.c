/* The KV cache's memory: committed as positions are first written, or all at once by
 * woolly_kv_cache_populate (what the server does at start, so that no slot's first request waits for
 * its pages). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "kv_cache.h"

/* This process's resident memory (VmRSS), KiB. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f, "cannot read /proc/self/status");
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    cr_assert_gt(kib, 0, "no VmRSS line in /proc/self/status");
    return kib;
}

Test(kv_cache, populate_commits_the_whole_cache_and_leaves_it_zero)
{
    enum { N_CTX = 4096, N_SEQ = 2, N_LAYER = 4, N_HEAD_KV = 8, HEAD_DIM = 64 };
    const size_t bytes = woolly_kv_cache_bytes(WOOLLY_TYPE_F16, N_CTX, N_LAYER, N_HEAD_KV, HEAD_DIM) * N_SEQ;
    woolly_kv_cache c;
    woolly_error err;
    cr_assert_eq(woolly_kv_cache_open(&c, WOOLLY_TYPE_F16, N_CTX, N_SEQ, N_LAYER, N_HEAD_KV, HEAD_DIM, &err), 0,
                 "%s", err.msg);
    const long opened = rss_kib();
    cr_assert_eq(woolly_kv_cache_populate(&c, &err), 0, "%s", err.msg);
    const long grown = rss_kib() - opened;
    /* 64 MiB of cache: all of it resident now (a little slack for the process's own pages moving) */
    cr_expect_geq((double)grown, 0.9 * (double)bytes / 1024.0, "RSS grew by %ld KiB for a %zu-byte cache", grown,
                  bytes);
    const unsigned char *k = c.k, *v = c.v;
    for (size_t i = 0; i < bytes / 2; i += 4093)
        cr_assert(k[i] == 0 && v[i] == 0, "byte %zu of the populated cache is not zero", i);
    woolly_kv_cache_close(&c);
}
