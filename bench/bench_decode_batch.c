/* What continuous batching buys the engine, without a server: N sequences decoding for S steps, either
 * together (one woolly_decode batch of N tokens per step, one multi-sequence context) or one after the
 * other (each its own context, woolly_eval one token at a time, as the server's slots ran before
 * batching). Prints the generated tokens per second (wall time) of the mode asked for, and the CPU
 * time per step (all threads), after one untimed step; the prompt (a few tokens per sequence) is
 * evaluated before the clock starts.
 *
 *   bench_decode_batch MODEL N_SEQ STEPS batched|sequential [THREADS]
 *
 * Compare the two modes side by side on the same machine, several runs each (the process's CPU time is
 * the steadier figure on a shared machine), e.g. for N in 1 2 4 8 16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "woolly.h"

enum { MAX_SEQ = 64, PROMPT = 4 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of every thread of this process: on a shared machine the steadier measure of the work. */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_decode_batch: %s: %s\n", what, woolly_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL N_SEQ STEPS batched|sequential [THREADS]\n", argv[0]);
        return 2;
    }
    const int n_seq = atoi(argv[2]), steps = atoi(argv[3]);
    const int batched = !strcmp(argv[4], "batched");
    if (n_seq < 1 || n_seq > MAX_SEQ || steps < 1 || (!batched && strcmp(argv[4], "sequential"))) {
        fprintf(stderr, "N_SEQ 1..%d, STEPS >= 1, mode batched or sequential\n", MAX_SEQ);
        return 2;
    }
    woolly_model *m = woolly_model_open(argv[1]);
    if (!m)
        return die("model");
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = PROMPT + steps + 2;
    cp.n_threads = argc > 5 ? atoi(argv[5]) : 0;
    cp.n_seq_max = batched ? n_seq : 1;
    woolly_context *ctx[MAX_SEQ] = {0};
    for (int s = 0; s < (batched ? 1 : n_seq); s++)
        if (!(ctx[s] = woolly_context_open(m, &cp)))
            return die("context");
    woolly_batch b;
    if (woolly_batch_init(&b, n_seq * PROMPT))
        return die("batch");

    /* Prompts: sequence s gets tokens s+1 .. s+PROMPT (any valid ids: the weights' speed is the point). */
    const int32_t n_vocab = woolly_model_n_vocab(m);
    woolly_token next[MAX_SEQ];
    for (int s = 0; s < n_seq; s++) {
        woolly_token p[PROMPT];
        for (int i = 0; i < PROMPT; i++)
            p[i] = (woolly_token)((s + 1 + i) % n_vocab);
        if (batched)
            for (int i = 0; i < PROMPT; i++)
                woolly_batch_add(&b, p[i], i, s, i == PROMPT - 1);
        else if (woolly_eval(ctx[s], p, PROMPT))
            return die("prompt");
    }
    if (batched && woolly_decode(ctx[0], &b))
        return die("prompts");
    for (int s = 0; s < n_seq; s++)
        next[s] = woolly_sample_greedy(
            woolly_get_logits(ctx[batched ? 0 : s], batched ? s * PROMPT + PROMPT - 1 : -1), n_vocab);

    /* Decode steps: step 0 is a warm-up. */
    double t0 = 0.0, c0 = 0.0;
    for (int step = 0; step <= steps; step++) {
        if (step == 1)
            t0 = now_s(), c0 = cpu_s();
        if (batched) {
            b.n_tokens = 0;
            for (int s = 0; s < n_seq; s++)
                woolly_batch_add(&b, next[s], PROMPT + step, s, true);
            if (woolly_decode(ctx[0], &b))
                return die("decode");
            for (int s = 0; s < n_seq; s++)
                next[s] = woolly_sample_greedy(woolly_get_logits(ctx[0], s), n_vocab);
        } else {
            for (int s = 0; s < n_seq; s++) {
                if (woolly_eval(ctx[s], &next[s], 1))
                    return die("decode");
                next[s] = woolly_sample_greedy(woolly_get_logits(ctx[s], -1), n_vocab);
            }
        }
    }
    const double dt = now_s() - t0, dc = cpu_s() - c0;
    printf("%s %d sequences x %d steps: %.2f tokens/s aggregate, %.2f per sequence; %.2f CPU ms per step\n",
           argv[4], n_seq, steps, n_seq * steps / dt, steps / dt, 1e3 * dc / steps);
    woolly_batch_free(&b);
    for (int s = 0; s < MAX_SEQ; s++)
        woolly_context_close(ctx[s]);
    woolly_model_close(m);
    return 0;
}
