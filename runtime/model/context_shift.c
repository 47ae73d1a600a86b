/* Context shift: when a sequence's cache is full, forget a stretch of tokens after its first n_keep
 * (the system prompt) and continue, instead of stopping (llama.cpp's --context-shift).
 *
 * The kept tail is evaluated again at its new positions rather than having its cached keys rotated
 * (RoPE) to them. Re-evaluation is exact: the cache afterwards is the one a fresh evaluation of the
 * shortened sequence gives, whereas rotated keys would still hold what the tail computed while it
 * attended to the forgotten tokens, and a quantized (Q8_0) or F16 key would pick up a second rounding.
 * It also needs nothing from the cache's layout: a sliding-window layer's ring, a quantized cache and
 * every architecture's RoPE variant work unchanged. The cost is one batched prefill of the tail, once per
 * shift; a caller that drops half of what follows n_keep shifts rarely. */
#include <string.h>

#include "context.h"

/* Sets woolly_last_error and evaluates to -1. */
#define SHIFT_FAIL(...) (woolly_fail(&err, __VA_ARGS__), woolly_set_last_error(&err), -1)

int32_t woolly_seq_shift(woolly_context *c, int32_t seq_id, woolly_token *tokens, int32_t n, int32_t n_keep,
                         int32_t n_discard)
{
    woolly_error err;
    if (!c || !tokens)
        return SHIFT_FAIL("woolly_seq_shift: no context or no tokens");
    const int32_t n_past = woolly_seq_n_past(c, seq_id);
    if (n_past < 0)
        return SHIFT_FAIL("woolly_seq_shift: sequence id %d is out of range [0, %d)", seq_id,
                          woolly_context_n_seq(c));
    if (n != n_past)
        return SHIFT_FAIL("woolly_seq_shift: %d tokens given, but sequence %d holds %d", n, seq_id, n_past);
    if (n_keep < 0 || n_discard < 1 || n_keep > n - n_discard)
        return SHIFT_FAIL("woolly_seq_shift: cannot keep %d and drop %d of %d tokens", n_keep, n_discard, n);
    const int32_t tail = n - n_keep - n_discard;
    memmove(tokens + n_keep, tokens + n_keep + n_discard, sizeof *tokens * (size_t)tail);
    if (woolly_seq_rewind(c, seq_id, n_keep))
        return -1;
    if (tail == 0)
        return n_keep;
    /* The tail again, in batches of at most n_batch, at positions n_keep.. */
    woolly_batch b;
    const int32_t n_batch = woolly_context_n_batch(c);
    if (woolly_batch_init(&b, n_batch))
        return SHIFT_FAIL("woolly_seq_shift: out of memory for a batch of %d", n_batch);
    int rc = 0;
    for (int32_t i = 0; i < tail && rc == 0; i += n_batch) {
        const int32_t k = tail - i < n_batch ? tail - i : n_batch;
        b.n_tokens = 0;
        for (int32_t j = 0; j < k; j++)
            woolly_batch_add(&b, tokens[n_keep + i + j], n_keep + i + j, seq_id, j == k - 1);
        rc = woolly_decode(c, &b);
    }
    woolly_batch_free(&b);
    return rc ? -1 : n_keep + tail;
}

int32_t woolly_context_shift(woolly_context *c, woolly_token *tokens, int32_t n, int32_t n_keep,
                             int32_t n_discard)
{
    return woolly_seq_shift(c, 0, tokens, n, n_keep, n_discard);
}
