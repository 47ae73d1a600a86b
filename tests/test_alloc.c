/* No allocation while decoding: this executable is linked with the allocator wrapped
 * (-Wl,--wrap=malloc,... in tests/runtime.cmake), so every allocation made by libwoolly's code, which is
 * linked in statically, goes through the counters below. The wrappers call the real allocator (the
 * sanitizer's under ASan), so the test runs the same in both builds. Counting is switched on only
 * around the decode steps; no assertion runs while it is on. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "testutil.h"
#include "woolly.h"

static atomic_bool g_counting;
static atomic_long g_calls;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);

static void count(void)
{
    if (atomic_load(&g_counting))
        atomic_fetch_add(&g_calls, 1);
}

void *__wrap_malloc(size_t n)
{
    count();
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    count();
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    count();
    return __real_realloc(p, n);
}

void __wrap_free(void *p)
{
    if (p)
        count();
    __real_free(p);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    count();
    return __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    count();
    return __real_posix_memalign(p, align, n);
}

static void start(void)
{
    atomic_store(&g_calls, 0);
    atomic_store(&g_counting, true);
}

static long stop(void)
{
    atomic_store(&g_counting, false);
    return atomic_load(&g_calls);
}

Test(alloc, the_counter_sees_libwoolly_allocations)
{
    start();
    woolly_sampler_params p = woolly_sampler_default_params();
    woolly_model *m = woolly_model_open(tu_data("models/stories260K.gguf"));
    woolly_sampler *s = m ? woolly_sampler_open(m, &p) : NULL;
    woolly_sampler_close(s);
    woolly_model_close(m);
    const long n = stop();
    cr_assert(m != NULL, "%s", woolly_last_error());
    cr_expect_gt(
        n, 2, "opening a model and a sampler counted only %ld allocator calls: the wrapper is not active", n);
}

static void decode_without_allocating(const char *model, int n_threads, woolly_kv_type kv)
{
    woolly_model *m = woolly_model_open(tu_data(model));
    cr_assert(m != NULL, "%s", woolly_last_error());
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 8;
    cp.n_threads = n_threads;
    cp.kv_type = kv;
    woolly_context *c = woolly_context_open(m, &cp);
    cr_assert(c != NULL, "%s", woolly_last_error());
    woolly_sampler_params sp = woolly_sampler_default_params(); /* every filter on */
    sp.repeat_penalty = 1.1f;
    sp.seed = 3;
    woolly_sampler *s = woolly_sampler_open(m, &sp);
    cr_assert(s != NULL, "%s", woolly_last_error());
    const woolly_token prompt[5] = {1, 403, 407, 261, 378};
    cr_assert_eq(woolly_eval(c, prompt, 5), 0, "%s", woolly_last_error());
    for (int i = 0; i < 5; i++)
        woolly_sampler_accept(s, prompt[i]);

    int failures = 0;
    start();
    for (int step = 0; step < 16; step++) {
        const float *logits = woolly_get_logits(c, -1);
        const woolly_token t = woolly_sampler_sample(s, logits);
        woolly_sampler_accept(s, t);
        failures += woolly_eval(c, &t, 1) != 0;
    }
    /* A batch through the GEMM path, too: the forward pass allocates nothing either way. */
    failures += woolly_eval(c, prompt, 5) != 0;
    const long n = stop();

    cr_expect_eq(failures, 0, "%s", woolly_last_error());
    cr_expect_eq(n, 0, "%s, %d threads: %ld allocator calls during 16 decode steps and a batch", model,
                 n_threads, n);
    woolly_sampler_close(s);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(alloc, decoding_stories260K_allocates_nothing)
{
    decode_without_allocating("models/stories260K.gguf", 2, WOOLLY_KV_F16);
}

Test(alloc, decoding_tiny_llama_q4_k_m_allocates_nothing)
{
    decode_without_allocating("models/tiny-llama-q4_k_m.gguf", 2, WOOLLY_KV_F32);
}

Test(alloc, decoding_tiny_granite_single_thread_allocates_nothing)
{
    decode_without_allocating("models/tiny-granite-q4_k_m.gguf", 1, WOOLLY_KV_F16);
}
