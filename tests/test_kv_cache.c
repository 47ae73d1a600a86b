/* The KV cache's memory: committed as positions are first written, or all at once by
 * woolly_kv_cache_populate (what the server does at start, so that no slot's first request waits for
 * its pages); a sliding layer's ring: its size, where positions land as it wraps, and what it can still
 * give back (a rewind or a copy within it, not past it). */
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
    cr_assert_eq(woolly_kv_cache_open(&c, WOOLLY_TYPE_F16, N_CTX, N_SEQ, N_LAYER, N_HEAD_KV, HEAD_DIM, &err),
                 0, "%s", err.msg);
    const long opened = rss_kib();
    cr_assert_eq(woolly_kv_cache_populate(&c, &err), 0, "%s", err.msg);
    const long grown = rss_kib() - opened;
    /* 64 MiB of cache: all of it resident now (a little slack for the process's own pages moving) */
    cr_expect_geq((double)grown, 0.9 * (double)bytes / 1024.0, "RSS grew by %ld KiB for a %zu-byte cache",
                  grown, bytes);
    const unsigned char *k = c.k, *v = c.v;
    for (size_t i = 0; i < bytes / 2; i += 4093)
        cr_assert(k[i] == 0 && v[i] == 0, "byte %zu of the populated cache is not zero", i);
    woolly_kv_cache_close(&c);
}

/* A global layer and a sliding one (window 16, batches of up to 64: a ring of 128 rows), two sequences. */
enum { R_CTX = 512, R_WINDOW = 16, R_BATCH = 64, R_HEADS = 2, R_DIM = 32, R_RING = 128 };

static void open_ring(woolly_kv_cache *c)
{
    woolly_error err;
    const int32_t windows[] = {0, R_WINDOW};
    cr_assert_eq(
        woolly_kv_cache_open_swa(c, WOOLLY_TYPE_F32, R_CTX, 2, R_BATCH, 2, windows, R_HEADS, R_DIM, &err), 0,
        "%s", err.msg);
}

/* Stores positions [0, n) of a sequence: every value of position p of head h is p + h / 4. */
static void store_upto(woolly_kv_cache *c, int64_t seq, int64_t n)
{
    float k[R_HEADS * R_DIM];
    for (int64_t p = 0; p < n; p++) {
        for (int h = 0; h < R_HEADS; h++)
            for (int d = 0; d < R_DIM; d++)
                k[h * R_DIM + d] = (float)p + h / 4.0f;
        for (int64_t l = 0; l < 2; l++)
            woolly_kv_cache_store(c, l, seq, p, k, k);
    }
}

/* The position row `row` of head h of a layer holds (what store_upto wrote there). */
static float held(const woolly_kv_cache *c, int64_t layer, int64_t seq, int64_t h, int64_t row)
{
    return ((const float *)woolly_kv_cache_k(c, layer, seq, h))[row * R_DIM] - h / 4.0f;
}

Test(kv_cache, a_sliding_layer_keeps_a_ring_of_its_size)
{
    cr_expect_eq(woolly_kv_ring_rows(R_WINDOW, R_CTX, R_BATCH), R_RING, "W - 1 + n_batch, rounded up to 128");
    cr_expect_eq(woolly_kv_ring_rows(R_WINDOW, R_CTX, 1), 128);
    cr_expect_eq(woolly_kv_ring_rows(200, R_CTX, 57), 256);
    cr_expect_eq(woolly_kv_ring_rows(500, R_CTX, 64), 0, "a ring as long as the context is none");
    cr_expect_eq(woolly_kv_ring_rows(0, R_CTX, 64), 0);
    woolly_kv_cache c;
    open_ring(&c);
    cr_expect_eq(woolly_kv_cache_ring(&c, 0), 0);
    cr_expect_eq(woolly_kv_cache_ring(&c, 1), R_RING);
    cr_expect_eq(woolly_kv_cache_window(&c, 1), R_WINDOW);
    const size_t row = R_DIM * sizeof(float), per_seq = 2 * R_HEADS * row * (R_CTX + R_RING);
    cr_expect_eq(woolly_kv_cache_total_bytes(&c), 2 * per_seq,
                 "the global layer's n_ctx and the ring's rows");
    cr_expect_eq(woolly_kv_cache_bytes_swa(WOOLLY_TYPE_F32, R_CTX, R_BATCH, 2, (const int32_t[]){0, R_WINDOW},
                                           R_HEADS, R_DIM),
                 per_seq);
    cr_expect_eq(woolly_kv_cache_bytes_swa(WOOLLY_TYPE_F32, R_CTX, R_BATCH, 2, NULL, R_HEADS, R_DIM),
                 woolly_kv_cache_bytes(WOOLLY_TYPE_F32, R_CTX, 2, R_HEADS, R_DIM));
    woolly_kv_cache_close(&c);
}

Test(kv_cache, positions_wrap_around_the_ring)
{
    woolly_kv_cache c;
    open_ring(&c);
    store_upto(&c, 0, 300);
    for (int h = 0; h < R_HEADS; h++) {
        for (int64_t p = 0; p < 300; p++)
            cr_assert_eq(held(&c, 0, 0, h, p), (float)p, "global layer, position %lld", (long long)p);
        for (int64_t p = 300 - R_RING; p < 300; p++)
            cr_assert_eq(held(&c, 1, 0, h, p % R_RING), (float)p, "ring row %lld", (long long)(p % R_RING));
    }
    woolly_kv_cache_close(&c);
}

Test(kv_cache, a_ring_gives_back_only_what_it_holds)
{
    woolly_kv_cache c;
    open_ring(&c);
    store_upto(&c, 0, 300); /* the ring holds 172 .. 299; going on from n needs n - 15 .. n - 1 */
    cr_expect(woolly_kv_cache_holds(&c, 0, 300));
    cr_expect(woolly_kv_cache_holds(&c, 0, 187));
    cr_expect_not(woolly_kv_cache_holds(&c, 0, 186), "position 171 is gone");
    cr_expect_not(woolly_kv_cache_holds(&c, 0, 5));
    cr_expect(woolly_kv_cache_holds(&c, 0, 0), "from the start nothing is needed");
    cr_expect_eq(woolly_kv_cache_copy(&c, 0, 1, 150), -1, "a copy past the ring is refused");
    cr_expect(woolly_kv_cache_holds(&c, 1, 0));
    cr_assert_eq(woolly_kv_cache_copy(&c, 0, 1, 200), 0);
    for (int64_t p = 185; p < 200; p++)
        cr_expect_eq(held(&c, 1, 1, 1, p % R_RING), (float)p, "copied ring row of position %lld",
                     (long long)p);
    cr_expect(woolly_kv_cache_holds(&c, 1, 200));
    cr_expect_not(woolly_kv_cache_holds(&c, 1, 186), "the copy holds no more than its source");
    /* going on from 250: the rows past it are written again before they are read */
    woolly_kv_cache_rewind(&c, 0, 250);
    cr_expect(woolly_kv_cache_holds(&c, 0, 250));
    woolly_kv_cache_rewind(&c, 0, 0);
    cr_expect(woolly_kv_cache_holds(&c, 0, 0));
    store_upto(&c, 0, 40);
    cr_expect(woolly_kv_cache_holds(&c, 0, 10), "after a clear, the ring holds the new positions");
    woolly_kv_cache_close(&c);
}
