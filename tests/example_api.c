/* The C API example of docs/API.md: greedy generation from a prompt.
 *
 *   example_api MODEL.gguf [PROMPT]
 *
 * ctest runs it on stories260K and checks the text it prints (tests/runtime.cmake). */
#include <stdio.h>
#include <string.h>

#include "woolly.h"

enum { MAX_TOKENS = 256, N_GENERATE = 32 };

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";

    woolly_model *model = woolly_model_open(argv[1]);
    if (!model) {
        fprintf(stderr, "%s\n", woolly_last_error());
        return 1;
    }
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = MAX_TOKENS;
    cp.n_threads = 2;
    woolly_context *ctx = woolly_context_open(model, &cp);
    woolly_sampler_params sp = woolly_sampler_default_params();
    sp.temp = 0.0f; /* greedy */
    woolly_sampler *sampler = woolly_sampler_open(model, &sp);
    if (!ctx || !sampler) {
        fprintf(stderr, "%s\n", woolly_last_error());
        return 1;
    }

    /* The prompt, evaluated as one batch. */
    woolly_token tokens[MAX_TOKENS];
    int32_t n = woolly_model_tokenize(model, prompt, strlen(prompt), woolly_model_adds_bos(model), false,
                                      tokens, MAX_TOKENS - N_GENERATE);
    if (n < 0 || n > MAX_TOKENS - N_GENERATE || woolly_eval(ctx, tokens, n) != 0) {
        fprintf(stderr, "prompt: %s\n", n > MAX_TOKENS - N_GENERATE ? "too long" : woolly_last_error());
        return 1;
    }

    /* Then one token at a time: pick the next token from the last logits, evaluate it. */
    for (int i = 0; i < N_GENERATE; i++) {
        const woolly_token next = woolly_sampler_sample(sampler, woolly_get_logits(ctx, -1));
        if (woolly_token_is_eog(model, next))
            break;
        tokens[n++] = next;
        if (woolly_eval(ctx, &next, 1) != 0) {
            fprintf(stderr, "%s\n", woolly_last_error());
            return 1;
        }
    }

    char text[4096];
    if (woolly_model_detokenize(model, tokens, n, text, sizeof text) < 0) {
        fprintf(stderr, "%s\n", woolly_last_error());
        return 1;
    }
    printf("%s\n", text);

    woolly_sampler_close(sampler);
    woolly_context_close(ctx);
    woolly_model_close(model);
    return 0;
}
