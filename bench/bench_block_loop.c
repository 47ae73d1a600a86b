/* How fast one core streams Q8_0-shaped weights from DRAM in a GEMV's block loop, by how many blocks one
 * pass of the loop takes (the `unroll` parameter of templates/matmul/avx512/any_q8_r16.c.j2). The loop is
 * the 1x16 GEMV's on the q80_r16 layout, stripped of its float steps: per 544-byte block (16 f16 scales,
 * then 8 loads of 64 bytes) a prefetch of the block 2 KiB ahead, 8 vpdpbusd on two chains against
 * broadcast activations, a conversion and an FMA into the accumulator. The same loop is compiled with
 * `#pragma GCC unroll U` for U = 1, 2, 4, 8 and 16, and each reads a 1 GiB buffer (so from DRAM) whole;
 * it prints GB/s by CPU time (bench_cpu_time.h), median of 5. On a Zen 5, three runs: 1 block a pass
 * 23.7-26.7, 2 blocks 28.6-28.7, 4 blocks 23.7-26.6, 8 blocks 37.3-38.1, 16 blocks 25.7-27.5 GB/s
 * (bench/journal/2026-12-04-zen5-3.md). Not a matter of how long the pass is, then, nor of the loop's
 * code alignment; the cause was not found (no counters in that guest), which is why the GEMVs' pass is
 * a spec parameter chosen by measurement. One thread; x86-64 with AVX-512 VNNI only. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench_cpu_time.h"
#include "cpu.h"
#include "huge_map.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,f16c")))

enum { BLOCK = 544, QS = 32, PREFETCH = 2048, ACT_BLOCKS = 1024 };
static const size_t BUFFER = (size_t)1 << 30;

typedef struct {
    const char *w;
    size_t blocks;
    const int8_t *x; /* ACT_BLOCKS blocks of 32 activations, reused round the buffer */
    float sink;
} stream;

#define PRAGMA(p) _Pragma(#p)
#define UNROLL(n) PRAGMA(GCC unroll n)

#define PASS(U)                                                                                           \
    TARGET static void pass_##U(void *arg)                                                                \
    {                                                                                                     \
        stream *s = arg;                                                                                  \
        __m512 acc = _mm512_setzero_ps();                                                                 \
        UNROLL(U)                                                                                         \
        for (size_t b = 0; b < s->blocks; b++) {                                                          \
            const char *blk = s->w + b * BLOCK;                                                           \
            for (int l = 0; l < (BLOCK + 63) / 64; l++)                                                   \
                _mm_prefetch(blk + PREFETCH + 64 * l, _MM_HINT_T0);                                       \
            const int8_t *x = s->x + (b % ACT_BLOCKS) * 32;                                               \
            __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();                             \
            for (int h = 0; h < 8; h += 2) {                                                              \
                int32_t x0, x1;                                                                           \
                memcpy(&x0, x + 4 * h, 4);                                                                \
                memcpy(&x1, x + 4 * h + 4, 4);                                                            \
                d0 = _mm512_dpbusd_epi32(d0, _mm512_loadu_si512(blk + QS + 64 * h), _mm512_set1_epi32(x0)); \
                d1 = _mm512_dpbusd_epi32(d1, _mm512_loadu_si512(blk + QS + 64 * h + 64),                  \
                                         _mm512_set1_epi32(x1));                                          \
            }                                                                                             \
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));                   \
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), d, acc);                  \
        }                                                                                                 \
        s->sink += _mm512_reduce_add_ps(acc);                                                             \
    }

PASS(1)
PASS(2)
PASS(4)
PASS(8)
PASS(16)

int main(void)
{
    const woolly_cpu *cpu = woolly_cpu_get();
    if (!cpu->avx512f || !cpu->avx512bw || !cpu->avx512vnni) {
        fprintf(stderr, "bench_block_loop: this CPU has no AVX-512 VNNI\n");
        return 1;
    }
    /* The buffer and the prefetch's overrun past its end, on 2 MiB pages as the model's weights are. */
    const size_t bytes = BUFFER + PREFETCH + BLOCK;
    woolly_huge_map map;
    char *w = woolly_huge_map_open(&map, bytes);
    if (!w) {
        fprintf(stderr, "bench_block_loop: cannot map %zu bytes\n", bytes);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++)
        w[i] = (char)(i * 7 + 1);
    static int8_t x[ACT_BLOCKS * 32];
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = (int8_t)(i * 5 - 60);
    stream s = {w, BUFFER / BLOCK, x, 0};
    static const struct {
        int blocks;
        void (*run)(void *);
    } passes[] = {{1, pass_1}, {2, pass_2}, {4, pass_4}, {8, pass_8}, {16, pass_16}};
    printf("| blocks a pass | GB/s, one thread |\n| ---: | ---: |\n");
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        const double sec = bench_cpu_time(passes[i].run, &s, 0.2, 5);
        printf("| %d | %.1f |\n", passes[i].blocks, (double)(s.blocks * BLOCK) / sec / 1e9);
    }
    woolly_huge_map_close(&map);
    return s.sink == 0.5f; /* keeps the sums alive; never true for these bytes */
}
#else
int main(void)
{
    fprintf(stderr, "bench_block_loop: AVX-512 VNNI is an x86-64 feature\n");
    return 1;
}
#endif
