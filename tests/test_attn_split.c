/* One token's attention split into KV chunks across threads (partial results merged by
 * woolly_attn_combine) against the unsplit attention, through the whole forward pass: decoding
 * tiny-llama-q4_k_m's reference sequence token by token with every step's attention forced into 3 chunks
 * per KV head, at 1 and 2 threads, gives the unsplit logits within ATTN_SPLIT_MAX_NMSE (only the summation
 * order differs), with both cache types. With a Q8_0 cache the bar is wider: an order difference in the
 * last bits can flip the rounding of a later layer's quantized K or V, a step of 1/127 of its block's
 * largest value (measured: 4e-6 at one position of twelve, 1e-11 at the others). The matrices read F32
 * activations (WOOLLY_ACT=f32) for the same reason: int8 activations would turn such a last-bit difference
 * into a rounding step of the next matmul's input, hiding the attention's own error. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "testutil.h"

#define ATTN_SPLIT_MAX_NMSE 1e-9
#define ATTN_SPLIT_Q8_0_MAX_NMSE 2e-5

static const woolly_token IDS[] = {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203};
enum { N = sizeof IDS / sizeof IDS[0] };

/* The logits of every position, decoding one token at a time (heap, [N][n_vocab]). */
static float *decode(woolly_model *m, int threads, int split, woolly_kv_type kv)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = N;
    p.n_threads = threads;
    p.kv_type = kv;
    woolly_error err;
    woolly_context *c = woolly_context_create(m, &p, &err);
    cr_assert(c != NULL, "%s", err.msg);
    c->attn_split = split;
    const int n_vocab = m->cfg.n_vocab;
    float *out = malloc(sizeof(float) * (size_t)N * (size_t)n_vocab);
    cr_assert(out != NULL);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(woolly_context_eval(c, &IDS[i], 1, &err), 0, "%s", err.msg);
        memcpy(out + (size_t)i * n_vocab, woolly_get_logits(c, -1), sizeof(float) * (size_t)n_vocab);
    }
    woolly_context_close(c);
    return out;
}

static void check(woolly_kv_type kv)
{
    setenv("WOOLLY_ACT", "f32", 1); /* before the registry decides, at the model's load */
    woolly_error err;
    woolly_model *m = woolly_model_load(tu_data("models/tiny-llama-q4_k_m.gguf"), &err);
    cr_assert(m != NULL, "%s", err.msg);
    float *whole = decode(m, 1, 1, kv);
    for (int threads = 1; threads <= 2; threads++) {
        float *split = decode(m, threads, 3, kv);
        for (int i = 0; i < N; i++) {
            const size_t nv = (size_t)m->cfg.n_vocab;
            const double e = tu_nmse(split + i * nv, whole + i * nv, nv);
            cr_expect_leq(e, kv == WOOLLY_KV_Q8_0 ? ATTN_SPLIT_Q8_0_MAX_NMSE : ATTN_SPLIT_MAX_NMSE,
                          "%d threads, position %d: split and whole differ by NMSE %.3g", threads, i, e);
        }
        free(split);
    }
    free(whole);
    woolly_model_close(m);
}

Test(attn_split, f16_cache_split_equals_whole)
{
    check(WOOLLY_KV_F16);
}

Test(attn_split, q8_0_cache_split_equals_whole)
{
    check(WOOLLY_KV_Q8_0);
}
