/* Attention kernels, one thread, on the runtime's cache layout (runtime/model/kv_cache.h: 8 KV heads,
 * each a contiguous stream of its positions):
 *   decode   one query of n_group heads per KV head over n_kv positions, all 8 heads: GB/s of K and V read
 *   prefill  512 causal queries at the end of an n_kv-position cache, one KV head: GFLOP/s, counting
 *            4 * head_dim flops per visible (query head, position) (q.k and p v)
 * for n_kv 512, 4096 and 16384, head dims 64 and 128, groups of 4 and 8, F16 and Q8_0 caches, with the
 * default kernel of every ISA level this CPU runs (the scalar one at n_kv 512 only: it is the reference,
 * not a contender). `bench_attn --variants` compares every block variant instead, at head dims 64 and
 * 128, group 4, n_kv 4096 (how the spec's defaults were chosen). Medians of several samples of the thread's
 * CPU time (bench_cpu_time.h). `bench_attn --quick` measures llama-1b's shape only (head dim 64, group 4)
 * at n_kv 4096 and 16384, and decode at 262144 (512 MiB of F16 K and V: read from DRAM, as a decode
 * step at depth reads them, even past an L3 of 260 MiB), with the kernel the forward pass takes beside
 * int8 matmuls (woolly_kernel_choose_attn: rounded tiles where they pay), for comparing a change side by
 * side. `bench_attn --decode D,G,N` measures decode alone on one shape (head dimension D, group G, N
 * positions) with that same kernel, repeated for `perf`.
 * The caches are mapped in huge pages, as the runtime's are.
 *
 *   bench_attn [--variants | --quick | --decode D,G,N] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "huge_map.h"
#include "quant.h"
#include "registry.h"
#include "bench_cpu_time.h"

enum { N_HEAD_KV = 8, N_PREFILL = 512 };

typedef struct job {
    const woolly_kernel *kern;
    woolly_attn_args a;
    const uint8_t *k, *v;
    size_t head_stride; /* bytes from one KV head's stream to the next */
    int heads;
} job;

static void run(void *p)
{
    job *j = p;
    for (int h = 0; h < j->heads; h++) {
        j->a.k = j->k + (size_t)h * j->head_stride;
        j->a.v = j->v + (size_t)h * j->head_stride;
        j->kern->attn(&j->a);
    }
}

/* A cache of N_HEAD_KV heads x n positions of random values in `type`, in huge pages as the runtime's. */
static uint8_t *make_cache(enum woolly_type type, int64_t n, int64_t hd, size_t *head_bytes,
                           woolly_huge_map *m)
{
    *head_bytes = woolly_row_bytes(type, hd);
    uint8_t *c = woolly_huge_map_open(m, *head_bytes * N_HEAD_KV * (size_t)n);
    float *row = malloc(sizeof(float) * (size_t)hd);
    if (!c || !row)
        exit(1);
    uint64_t x = 88172645463325252ull;
    for (int64_t r = 0; r < n * N_HEAD_KV; r++) {
        for (int64_t i = 0; i < hd; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            row[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        }
        woolly_quantize_row(type, row, c + (size_t)r * *head_bytes, hd);
    }
    free(row);
    return c;
}

typedef struct shape {
    int64_t hd, group, n_kv;
} shape;

/* Seconds per call of the kernel on the shape: decode over all heads, or prefill on one. */
static double measure(const woolly_kernel *kern, const shape *s, int prefill)
{
    size_t hb;
    woolly_huge_map km, vm;
    uint8_t *k = make_cache(kern->wtype, s->n_kv, s->hd, &hb, &km),
            *v = make_cache(kern->wtype, s->n_kv, s->hd, &hb, &vm);
    const int64_t nq = prefill ? N_PREFILL : 1;
    const size_t q_row = (size_t)(s->group * s->hd);
    float *q = malloc(sizeof(float) * q_row * (size_t)nq), *out = malloc(sizeof(float) * q_row * (size_t)nq);
    if (!q || !out)
        exit(1);
    for (size_t i = 0; i < q_row * (size_t)nq; i++)
        q[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    job j = {kern,
             {.q = q,
              .q_stride = (size_t)s->hd,
              .q_row_stride = q_row,
              .kv_row_bytes = hb,
              .n_q = nq,
              .pos0 = s->n_kv - nq,
              .kv0 = 0,
              .kv1 = s->n_kv,
              .head_dim = s->hd,
              .n_group = s->group,
              .scale = 1.0f / sqrtf((float)s->hd),
              .out = out,
              .out_stride = (size_t)s->hd,
              .out_row_stride = q_row,
              .ml = NULL,
              .decode_l2_blocks = woolly_kernel_attn_decode_l2()}, /* as the run takes it */
             k,
             v,
             hb * (size_t)s->n_kv,
             prefill ? 1 : N_HEAD_KV};
    const double t = bench_cpu_time(run, &j, prefill ? 0.2 : 0.05, 5);
    woolly_huge_map_close(&km), woolly_huge_map_close(&vm);
    free(q), free(out);
    return t;
}

static void report(const woolly_kernel *kern, const shape *s, int do_prefill)
{
    const double td = measure(kern, s, 0);
    const double bytes = 2.0 * (double)woolly_row_bytes(kern->wtype, s->hd) * (double)s->n_kv * N_HEAD_KV;
    printf("| %-38s | %4lld | %5lld | %6lld | %8.1f |", kern->name, (long long)s->hd, (long long)s->group,
           (long long)s->n_kv, bytes / td / 1e9);
    if (do_prefill) {
        const double tp = measure(kern, s, 1);
        const double pos0 = (double)(s->n_kv - N_PREFILL);
        const double visible = N_PREFILL * pos0 + N_PREFILL * (N_PREFILL + 1) / 2.0;
        printf(" %8.1f |\n", 4.0 * (double)s->hd * (double)s->group * visible / tp / 1e9);
    } else {
        printf(" %8s |\n", "-");
    }
    fflush(stdout);
}

/* The default tiled kernel of an ISA level for a cache and head dimension, with F32 operands (a level
 * may also have a default among its rounded tiles: --variants and --quick measure those). */
static const woolly_kernel *default_of(enum woolly_isa isa, enum woolly_type cache, int hd)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++)
        if (ks[i].op == WOOLLY_OP_ATTN && ks[i].isa == isa && ks[i].wtype == cache && ks[i].head_dim == hd &&
            ks[i].act == WOOLLY_ACT_F32 && woolly_kernel_is_default(&ks[i]) && woolly_kernel_runs(&ks[i]))
            return &ks[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const int variants = argc > 1 && !strcmp(argv[1], "--variants");
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    shape one = {0, 0, 0};
    if (argc > 1 && !strcmp(argv[1], "--decode")) {
        long long d, g, n;
        if (argc < 3 || sscanf(argv[2], "%lld,%lld,%lld", &d, &g, &n) != 3 || d < 1 || g < 1 || n < 1) {
            fprintf(stderr, "bench_attn: --decode takes D,G,N (head dimension, group, positions)\n");
            return 2;
        }
        one = (shape){d, g, n};
    }
    woolly_error err;
    if (woolly_isa_init(&err)) {
        fprintf(stderr, "bench_attn: %s\n", err.msg);
        return 1;
    }
    printf("| %-38s | %4s | %5s | %6s | %8s | %8s |\n", "kernel", "d", "group", "n_kv", "dec GB/s",
           "pf GF/s");
    printf("| %.38s | ---: | ----: | -----: | -------: | -------: |\n",
           "--------------------------------------");
    if (variants) {
        int n;
        const woolly_kernel *ks = woolly_kernel_list(&n);
        for (int64_t hd = 64; hd <= 128; hd *= 2) {
            const shape s = {hd, 4, 4096};
            for (int i = 0; i < n; i++)
                if (ks[i].op == WOOLLY_OP_ATTN && ks[i].head_dim == hd && ks[i].isa != WOOLLY_ISA_SCALAR &&
                    woolly_kernel_runs(&ks[i]))
                    report(&ks[i], &s, 1);
        }
        return 0;
    }
    static const enum woolly_type CACHES[] = {WOOLLY_TYPE_F16, WOOLLY_TYPE_Q8_0};
    if (one.hd) {
        const woolly_kernel *best =
            woolly_kernel_choose_attn(WOOLLY_TYPE_F16, (int)one.hd, woolly_attn_act(1u << WOOLLY_ACT_Q8));
        if (!best) {
            fprintf(stderr, "bench_attn: no F16 attention kernel for head dimension %lld\n",
                    (long long)one.hd);
            return 1;
        }
        for (int r = 0; r < 5; r++)
            report(best, &one, 0);
        return 0;
    }
    if (quick) {
        for (size_t c = 0; c < 2; c++)
            for (int64_t n_kv = 4096; n_kv <= 262144; n_kv *= n_kv < 16384 ? 4 : 16) {
                /* what the forward pass takes beside int8 matmuls (the default activation path) */
                const woolly_kernel *best =
                    woolly_kernel_choose_attn(CACHES[c], 64, woolly_attn_act(1u << WOOLLY_ACT_Q8));
                const shape s = {64, 4, n_kv};
                if (best) /* 262144: 512 MiB of F16 K and V, twice a large L3 (260 MiB on the Intel Xeons
                           * of this project's CI), streamed from DRAM as a decode step at depth does */
                    report(best, &s, n_kv < 262144);
            }
        return 0;
    }
    static const int64_t N_KV[] = {512, 4096, 16384}, HD[] = {64, 128, 256}, GROUP[] = {4, 8};
    for (size_t c = 0; c < 2; c++)
        for (size_t h = 0; h < 3; h++)
            for (size_t g = 0; g < 2; g++)
                for (size_t n = 0; n < 3; n++)
                    for (int isa = 0; isa < WOOLLY_ISA_COUNT; isa++) {
                        const woolly_kernel *k = default_of((enum woolly_isa)isa, CACHES[c], (int)HD[h]);
                        if (!k || (isa == WOOLLY_ISA_SCALAR && N_KV[n] > 512))
                            continue;
                        const shape s = {HD[h], GROUP[g], N_KV[n]};
                        report(k, &s, 1);
                    }
    return 0;
}
