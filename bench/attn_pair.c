/* One attention kernel in two versions side by side in one process: OLD (the kernel as another source
 * tree generates it) and NEW (as this tree does), built and linked by bench/attn_pair.sh. On a shared
 * machine two runs minutes apart differ by more than most changes to a kernel; rounds that alternate
 * the two versions every few milliseconds see the same machine, and the per-round ratio's median says
 * which is faster. 8 KV heads in the runtime's cache layout (huge pages), a group of 4 heads:
 *   decode   (n_q 1)  one query per KV head over n_kv positions: GB/s of K and V read
 *   prefill  (n_q > 1) n_q causal queries at the end of n_kv positions, one KV head: GFLOP/s
 * Also prints the largest difference between the two versions' outputs. OLD may be another kernel on
 * another cache type (-DOLD_CACHE): each then reads its own cache of the same values, and the rates
 * count each one's bytes (the ratio is of times: positions per second).
 *
 *   attn_pair N_KV [ROUNDS] [N_Q]      (compiled with -DHEAD_DIM=64|128 -DCACHE=WOOLLY_TYPE_F16|...
 *                                       [-DOLD_CACHE=...]) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_cpu_time.h"
#include "huge_map.h"
#include "kernels.h"
#include "quant.h"
#include "wtype.h"

void attn_pair_old(const woolly_attn_args *a);
void attn_pair_new(const woolly_attn_args *a);

#ifndef OLD_CACHE
#define OLD_CACHE CACHE
#endif
#ifndef GROUP
#define GROUP 4 /* query heads per KV head (attn_pair.sh: GROUP=...) */
#endif
enum { N_HEAD_KV = 8, MAX_ROUNDS = 1000 };

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A cache of N_HEAD_KV heads x n positions of values in [-amp, amp) in the cache type. */
/* One version's cache: K and V of N_HEAD_KV heads, hb bytes a row. */
typedef struct side {
    const uint8_t *k, *v;
    size_t hb;
} side;

/* Points the arguments at KV head h of a version's cache. */
static void at_head(woolly_attn_args *a, const side *s, int h, int64_t n_kv)
{
    a->k = s->k + (size_t)h * s->hb * (size_t)n_kv;
    a->v = s->v + (size_t)h * s->hb * (size_t)n_kv;
    a->kv_row_bytes = s->hb;
}

static uint8_t *make_cache(enum woolly_type type, int64_t n, float amp, uint64_t seed, woolly_huge_map *m)
{
    const size_t head_bytes = woolly_row_bytes(type, HEAD_DIM);
    uint8_t *c = woolly_huge_map_open(m, head_bytes * N_HEAD_KV * (size_t)n);
    float row[HEAD_DIM];
    if (!c)
        exit(1);
    for (int64_t r = 0; r < n * N_HEAD_KV; r++) {
        for (int i = 0; i < HEAD_DIM; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            row[i] = amp * (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        }
        woolly_quantize_row(type, row, c + (size_t)r * head_bytes, HEAD_DIM);
    }
    return c;
}

int main(int argc, char **argv)
{
    const int64_t n_kv = argc > 1 ? atoll(argv[1]) : 0;
    const int rounds = argc > 2 ? atoi(argv[2]) : 30, n_q = argc > 3 ? atoi(argv[3]) : 1;
    if (argc < 2 || n_kv < 1 || rounds < 1 || rounds > MAX_ROUNDS || n_q < 1 || n_q > n_kv) {
        fprintf(stderr, "usage: attn_pair N_KV [ROUNDS (1-%d)] [N_Q (1-N_KV)]\n", MAX_ROUNDS);
        return 2;
    }
    const int heads = n_q == 1 ? N_HEAD_KV : 1;
    const size_t q_row = (size_t)GROUP * HEAD_DIM;
    const enum woolly_type types[2] = {OLD_CACHE, CACHE};
    woolly_huge_map km[2], vm[2];
    side sides[2];
    for (int w = 0; w < 2; w++) {
        sides[w].hb = woolly_row_bytes(types[w], HEAD_DIM);
        if (w == 1 && types[1] == types[0]) { /* one cache: both versions read the same memory */
            sides[1] = sides[0];
            break;
        }
        sides[w].k = make_cache(types[w], n_kv, 1.0f, 88172645463325252ull, &km[w]);
        sides[w].v = make_cache(types[w], n_kv, 0.7f, 2463534242ull, &vm[w]);
    }
    float *q = malloc(sizeof(float) * q_row * (size_t)n_q),
          *o_old = malloc(sizeof(float) * q_row * (size_t)n_q),
          *o_new = malloc(sizeof(float) * q_row * (size_t)n_q);
    if (!q || !o_old || !o_new)
        return 1;
    for (size_t i = 0; i < q_row * (size_t)n_q; i++)
        q[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    woolly_attn_args a = {.q = q,
                          .q_stride = HEAD_DIM,
                          .q_row_stride = q_row,
                          .n_q = n_q,
                          .pos0 = n_kv - n_q,
                          .kv0 = 0,
                          .kv1 = n_kv,
                          .head_dim = HEAD_DIM,
                          .n_group = GROUP,
                          .scale = 1.0f / sqrtf((float)HEAD_DIM),
                          .out_stride = HEAD_DIM,
                          .out_row_stride = q_row,
                          .ml = NULL};
    void (*const fn[2])(const woolly_attn_args *) = {attn_pair_old, attn_pair_new};
    double max_diff = 0.0;
    for (int h = 0; h < heads; h++) {
        for (int w = 0; w < 2; w++) {
            at_head(&a, &sides[w], h, n_kv);
            a.out = w ? o_new : o_old, fn[w](&a);
        }
        for (size_t i = 0; i < q_row * (size_t)n_q; i++)
            max_diff = fmax(max_diff, fabs((double)o_old[i] - (double)o_new[i]));
    }
    /* work per call of all heads: bytes of K and V (decode) or flops (prefill: 4 * head_dim per visible
     * (query head, position), q.k and p v) */
    double work[2];
    for (int w = 0; w < 2; w++)
        work[w] = n_q == 1
                      ? 2.0 * (double)sides[w].hb * (double)n_kv * N_HEAD_KV
                      : 4.0 * HEAD_DIM * GROUP * ((double)n_q * (double)(n_kv - n_q) + n_q * (n_q + 1) / 2.0);
    const int reps = n_q > 1 || n_kv > 65536 ? 1 : n_kv > 4096 ? 4 : 20; /* calls per timing */
    static double rate[2][MAX_ROUNDS], ratio[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double t[2];
        for (int w = 0; w < 2; w++) {
            const int which = (r + w) % 2; /* alternate which version goes first */
            const double t0 = bench_cpu_now_s();
            for (int rep = 0; rep < reps; rep++)
                for (int h = 0; h < heads; h++) {
                    at_head(&a, &sides[which], h, n_kv);
                    a.out = o_old;
                    fn[which](&a);
                }
            t[which] = (bench_cpu_now_s() - t0) / reps;
        }
        rate[0][r] = work[0] / t[0] / 1e9, rate[1][r] = work[1] / t[1] / 1e9, ratio[r] = t[0] / t[1];
    }
    qsort(rate[0], (size_t)rounds, sizeof(double), by_value);
    qsort(rate[1], (size_t)rounds, sizeof(double), by_value);
    qsort(ratio, (size_t)rounds, sizeof(double), by_value);
    printf("| %6lld | %4d | %4d | %8.3g | %8.3g | %5.3f (%5.3f-%5.3f) | %8.2g |\n", (long long)n_kv, n_q,
           HEAD_DIM, rate[0][rounds / 2], rate[1][rounds / 2], ratio[rounds / 2], ratio[rounds / 4],
           ratio[3 * rounds / 4], max_diff);
    for (int w = 0; w < (types[1] == types[0] ? 1 : 2); w++)
        woolly_huge_map_close(&km[w]), woolly_huge_map_close(&vm[w]);
    free(q), free(o_old), free(o_new);
    return 0;
}
