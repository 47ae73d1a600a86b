/* The forward pass's small ops on one thread, at llama-1b's shapes for a 512-token batch: SwiGLU over
 * 512 x 5632 values and RMSNorm over 512 rows of 2048, the registry's kernel of every level that runs at
 * the active one (WOOLLY_ISA lowers it); and the plain C loops
 * that have no generated versions (residual add over 512 x 2048, what the compiler makes of them at the
 * baseline flags). Medians of the thread's CPU time (bench_cpu_time.h); ns per value.
 *
 *   bench_ops */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "bench_cpu_time.h"

enum { TOKENS = 512, N_EMBD = 2048, N_FF = 5632 };

typedef struct job {
    woolly_swiglu_fn swiglu;
    woolly_rmsnorm_fn rmsnorm;
    float *a, *b, *out;
} job;

/* SwiGLU works in place: each call gets a fresh copy of the input (so that repeated calls do not shrink
 * the values into subnormals), and the copy's time is subtracted. */
static void run_copy(void *p)
{
    job *j = p;
    memcpy(j->out, j->a, sizeof(float) * (size_t)TOKENS * N_FF);
}

static void run_swiglu(void *p)
{
    job *j = p;
    run_copy(p);
    j->swiglu(j->out, j->b, (int64_t)TOKENS * N_FF);
}

static void run_rmsnorm(void *p)
{
    job *j = p;
    for (int t = 0; t < TOKENS; t++)
        j->rmsnorm(j->out + (size_t)t * N_EMBD, j->a + (size_t)t * N_EMBD, j->b, N_EMBD, 1e-5f);
}

static void run_residual(void *p)
{
    job *j = p;
    const size_t n = (size_t)TOKENS * N_EMBD;
    for (size_t i = 0; i < n; i++)
        j->out[i] += 0.5f * j->a[i];
}

static double seconds(void (*fn)(void *), job *j)
{
    return bench_cpu_time(fn, j, 0.05, 7);
}

static void row(const char *name, double s, double values)
{
    printf("| %-22s | %8.3f |\n", name, s / values * 1e9);
}

int main(void)
{
    const size_t n = (size_t)TOKENS * N_FF;
    job j = {0};
    j.a = malloc(sizeof(float) * n), j.b = malloc(sizeof(float) * n), j.out = malloc(sizeof(float) * n);
    if (!j.a || !j.b || !j.out)
        return 1;
    for (size_t i = 0; i < n; i++)
        j.a[i] = (float)(i % 97) / 50.0f - 1.0f, j.b[i] = (float)(i % 89) / 45.0f - 1.0f, j.out[i] = 0.0f;
    woolly_error err = {{0}};
    if (woolly_isa_init(&err)) {
        fprintf(stderr, "bench_ops: %s\n", err.msg);
        return 1;
    }
    woolly_isa_thread_init();
    const double copy = seconds(run_copy, &j);
    printf("| %-22s | %8s |\n", "op", "ns/value");
    printf("| ---------------------- | -------: |\n");
    for (int isa = 0; isa < WOOLLY_ISA_COUNT; isa++) {
        const woolly_kernel *s = woolly_kernel_choose_ops(WOOLLY_OP_SWIGLU, isa);
        const woolly_kernel *r = woolly_kernel_choose_ops(WOOLLY_OP_RMSNORM, isa);
        if (s) {
            j.swiglu = s->swiglu;
            row(s->name, seconds(run_swiglu, &j) - copy, (double)n);
        }
        if (r) {
            j.rmsnorm = r->rmsnorm;
            row(r->name, seconds(run_rmsnorm, &j), (double)TOKENS * N_EMBD);
        }
    }
    row("residual add (plain C)", seconds(run_residual, &j), (double)TOKENS * N_EMBD);
    free(j.a), free(j.b), free(j.out);
    return 0;
}
