/* The BLIS sgemm kernels (x86 builds register them at the avx512 level): they compute the product, and
 * they run single-threaded whatever the environment asks of BLIS or OpenMP, so that they never fight
 * the runtime's own thread pool (a BLIS or OpenMP worker would show up as a new thread of the process). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "registry.h"
#include "testutil.h"

enum { ROWS = 96, K = 320, M = 40 };

/* Threads of this process now. */
static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert(d, "cannot list /proc/self/task");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct call {
    const woolly_kernel *k;
    woolly_matmul_args a;
} call;

static void *run(void *arg)
{
    call *c = arg;
    c->k->matmul(&c->a);
    return NULL;
}

/* The BLIS kernels this build and CPU run; on x86 with AVX-512 there must be some. */
static int blis_kernels(const woolly_kernel **out, int max)
{
    int n, found = 0;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n && found < max; i++)
        if (ks[i].matmul && strstr(ks[i].name, "_blis") && woolly_kernel_runs(&ks[i]))
            out[found++] = &ks[i];
    return found;
}

Test(blis, computes_the_product_on_two_threads_and_starts_no_threads_of_its_own)
{
    /* Both would make a multithreaded BLIS start workers. */
    setenv("BLIS_NUM_THREADS", "4", 1);
    setenv("OMP_NUM_THREADS", "4", 1);
    const woolly_kernel *ks[8];
    const int nk = blis_kernels(ks, 8);
#if defined(__x86_64__)
    if (woolly_isa_active() >= WOOLLY_ISA_AVX512)
        cr_assert_gt(nk, 0, "an x86 build with AVX-512 registers BLIS kernels");
#endif
    tu_rng rng = {42};
    float *src = malloc(sizeof(float) * ROWS * K), *wf = malloc(sizeof(float) * ROWS * K);
    float *x = malloc(sizeof(float) * M * K), *y = malloc(sizeof(float) * M * ROWS);
    uint8_t *w = malloc(sizeof(float) * ROWS * K);
    cr_assert(src && wf && x && y && w);
    for (int i = 0; i < ROWS * K; i++)
        src[i] = 0.05f * tu_rand_normal(&rng);
    for (int i = 0; i < M * K; i++)
        x[i] = tu_rand_normal(&rng);
    for (int i = 0; i < nk; i++) {
        const size_t rb = woolly_row_bytes(ks[i]->wtype, K);
        for (int r = 0; r < ROWS; r++) {
            woolly_quantize_row(ks[i]->wtype, src + r * K, w + r * rb, K);
            woolly_dequantize_row(ks[i]->wtype, w + r * rb, wf + r * K, K);
        }
        memset(y, 0, sizeof(float) * M * ROWS);
        const int before = threads_now();
        /* Two threads with a row range each, as the runtime's pool calls it: this one (whose OpenMP
         * workers, were there any, would outlive the call) and another. */
        call c[2];
        for (int t = 0; t < 2; t++)
            c[t] = (call){ks[i],
                          {.w = w,
                           .w_row_bytes = rb,
                           .x = x,
                           .x_row_bytes = K * sizeof(float),
                           .y = y,
                           .y_stride = ROWS,
                           .k = K,
                           .m = M,
                           .r0 = t * ROWS / 2,
                           .r1 = (t + 1) * ROWS / 2}};
        pthread_t other;
        cr_assert_eq(pthread_create(&other, NULL, run, &c[1]), 0);
        run(&c[0]);
        pthread_join(other, NULL);
        cr_assert_eq(threads_now(), before, "%s: BLIS left %d thread(s) behind", ks[i]->name,
                     threads_now() - before);
        double num = 0, den = 0;
        for (int t = 0; t < M; t++)
            for (int r = 0; r < ROWS; r++) {
                double ref = 0;
                for (int j = 0; j < K; j++)
                    ref += (double)wf[r * K + j] * x[t * K + j];
                const double e = y[t * ROWS + r] - ref;
                num += e * e, den += ref * ref;
            }
        cr_assert_leq(num / den, 1e-11, "%s: NMSE %.3g", ks[i]->name, num / den);
    }
    free(src), free(wf), free(x), free(y), free(w);
}
