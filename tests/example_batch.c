/* The C API example of multi-sequence batches (woolly.h, "batches of several sequences"): greedy
 * continuations of several prompts, decoded together, one batch per step.
 *
 *   example_batch MODEL.gguf [PROMPT ...]
 *
 * Prints each prompt's continuation on its own line, in the order of the prompts. ctest runs it on
 * stories260K and checks the text it prints (tests/runtime.cmake). */
#include <stdio.h>
#include <string.h>

#include "woolly.h"

enum { MAX_SEQ = 8, N_CTX = 128, N_GENERATE = 32 };

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT ...]\n", argv[0]);
        return 2;
    }
    const char *defaults[] = {"Once upon a time", "Lily and Tom"};
    const char **prompts = argc > 2 ? (const char **)argv + 2 : defaults;
    const int n_seq = argc > 2 ? argc - 2 : 2;
    if (n_seq > MAX_SEQ) {
        fprintf(stderr, "at most %d prompts\n", MAX_SEQ);
        return 2;
    }

    woolly_model *model = woolly_model_open(argv[1]);
    if (!model) {
        fprintf(stderr, "%s\n", woolly_last_error());
        return 1;
    }
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 2;
    cp.n_seq_max = n_seq; /* one KV cache region per prompt */
    woolly_context *ctx = woolly_context_open(model, &cp);
    woolly_batch batch;
    if (!ctx || woolly_batch_init(&batch, woolly_context_n_batch(ctx))) {
        fprintf(stderr, "%s\n", woolly_last_error());
        woolly_model_close(model);
        return 1;
    }

    /* Every prompt in one batch; the logits of each prompt's last token are kept. */
    static woolly_token tokens[MAX_SEQ][N_CTX];
    int32_t n[MAX_SEQ], logits_at[MAX_SEQ];
    bool done[MAX_SEQ] = {false};
    for (int s = 0; s < n_seq; s++) {
        n[s] = woolly_model_tokenize(model, prompts[s], strlen(prompts[s]), woolly_model_adds_bos(model),
                                     false, tokens[s], N_CTX - N_GENERATE);
        if (n[s] < 1 || n[s] > N_CTX - N_GENERATE || batch.n_tokens + n[s] > batch.cap) {
            fprintf(stderr, "prompt %d: cannot tokenize it, or too long\n", s);
            return 1;
        }
        for (int32_t i = 0; i < n[s]; i++)
            woolly_batch_add(&batch, tokens[s][i], i, s, i == n[s] - 1);
        logits_at[s] = batch.n_tokens - 1;
    }

    /* Then one step per token: each unfinished sequence samples from its logits of the last step and
     * adds its token to the next batch. */
    const int32_t n_vocab = woolly_model_n_vocab(model);
    for (int step = 0; step <= N_GENERATE && batch.n_tokens > 0; step++) {
        if (woolly_decode(ctx, &batch)) {
            fprintf(stderr, "%s\n", woolly_last_error());
            return 1;
        }
        batch.n_tokens = 0;
        for (int s = 0; s < n_seq; s++) {
            if (done[s])
                continue;
            const woolly_token next = woolly_sample_greedy(woolly_get_logits(ctx, logits_at[s]), n_vocab);
            if (step == N_GENERATE || woolly_token_is_eog(model, next)) {
                done[s] = true;
                woolly_seq_rewind(ctx, s, 0); /* its cache region is free at once */
                continue;
            }
            tokens[s][n[s]] = next;
            woolly_batch_add(&batch, next, n[s]++, s, true);
            logits_at[s] = batch.n_tokens - 1;
        }
    }

    for (int s = 0; s < n_seq; s++) {
        char text[4096];
        woolly_model_detokenize(model, tokens[s], n[s], text, sizeof text);
        printf("%s\n", text);
    }
    woolly_batch_free(&batch);
    woolly_context_close(ctx);
    woolly_model_close(model);
    return 0;
}
