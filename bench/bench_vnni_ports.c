/* Which vector instructions compete with vpdpbusd for its issue ports on this CPU. The int8 GEMMs of the
 * avx512 level run 8 vpdpbusd per 32 values of a (token, 16-row group) and, beside them, the float scale
 * steps (a conversion, a multiply and two FMAs) and the nibble decode (ands and shifts); how fast a tile
 * can go depends on which of those share vpdpbusd's ports. Each case is a loop of 12 independent
 * vpdpbusd chains (enough to cover its latency) plus 4 independent instructions of one kind per step;
 * it prints the nanoseconds per step and what the 4 cost in vpdpbusd slots: (step - base) / base x 12 / 4,
 * about 1 for an instruction that takes a vpdpbusd port for a cycle as vpdpbusd does, about 0 for one
 * that issues elsewhere. Single thread, by CPU time (bench_cpu_time.h), median of 7 samples. Only on
 * x86-64 CPUs with AVX-512 VNNI.
 * On the Zen 5 (2026-12-04, three runs): vpdpbusd, vpdpwssd, vpmulld, vfmadd231ps and vmulps about 1 slot
 * each; vaddps 0.15-0.30, vcvtdq2ps, vpaddd, the nibble decode, broadcasts and loads from L1 and register
 * copies about 0. Loads have a limit of their own (about two vector loads a cycle beside vpdpbusd at its
 * peak in a scratch loop: 16 a step of 12 vpdpbusd took 1.35-1.56x the time of 12), which the tiles'
 * 40-50 loads per 80 vpdpbusd stay under. */
#include <stdio.h>

#include "bench_cpu_time.h"
#include "cpu.h"
#include "peak_loop.h"

#if defined(__x86_64__)
#include <immintrin.h>

enum { STEPS = 4096 };

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* The peak loop's twelve accumulators (peak_loop.h), started at distinct values so that no two chains are
 * merged, passed through its empty asm every step and used after the loop (USE_ACC: the asm is not
 * volatile, so without a use the compiler drops the chains), so that every vpdpbusd stays in the loop. */
#define DECL_ACC(i) __m512i acc##i = _mm512_set1_epi32(i + 1);
#define DOT(i) acc##i = _mm512_dpbusd_epi32(acc##i, w, x);
#define USE_ACC(i) __asm__ volatile("" : : "v"(acc##i));

/* One case: four extra chains e0..e3 of `type`, started at init(1..4), each taking one `op` per step. */
#define CASE(name, type, init, op)                                                                         \
    TARGET static void run_##name(void *ctx)                                                               \
    {                                                                                                      \
        (void)ctx;                                                                                         \
        const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-2);                                   \
        const __m512 f = _mm512_set1_ps(1.0000001f);                                                        \
        (void)w, (void)x, (void)f;                                                                         \
        PEAK_ACCS_12(DECL_ACC)                                                                                     \
        type e0 = init(1), e1 = init(2), e2 = init(3), e3 = init(4);                                       \
        for (int it = 0; it < STEPS; it++) {                                                               \
            PEAK_ACCS_12(DOT)                                                                                      \
            e0 = op(e0);                                                                                   \
            e1 = op(e1);                                                                                   \
            e2 = op(e2);                                                                                   \
            e3 = op(e3);                                                                                   \
            PEAK_KEEP_12(acc);                                                                                        \
            __asm__ volatile("" : "+v"(e0), "+v"(e1), "+v"(e2), "+v"(e3));                                 \
        }                                                                                                  \
        PEAK_ACCS_12(USE_ACC)                                                                              \
    }

#define I32(k) _mm512_set1_epi32(k)
#define F32(k) _mm512_set1_ps(k)
#define NONE(v) (v)
#define MORE_DOT(v) _mm512_dpbusd_epi32(v, w, x)
#define FMA(v) _mm512_fmadd_ps(v, f, f)
#define MUL(v) _mm512_mul_ps(v, f)
#define ADD(v) _mm512_add_ps(v, f)
#define CVT(v) _mm512_castps_si512(_mm512_cvtepi32_ps(v))
#define MULLO(v) _mm512_mullo_epi32(v, w)
#define PADD(v) _mm512_add_epi32(v, w)
#define DPWSSD(v) _mm512_dpwssd_epi32(v, w, x)
#define DECODE(v) _mm512_and_si512(_mm512_srli_epi16(v, 4), w)

/* Loads and copies, through asm so that the compiler neither hoists nor drops them: a 4-byte broadcast
 * and a 64-byte load from an L1-resident line (the tiles' activation and weight operands), and a
 * register copy (the compiler's start of a chain at zero, as vpdpbusd overwrites its accumulator). */
static int32_t line[16] __attribute__((aligned(64))) = {1, 2, 3, 4};
TARGET static inline __m512i bcast_mem(__m512i v)
{
    __asm__ volatile("vpbroadcastd %1, %0" : "+v"(v) : "m"(line[0]));
    return v;
}
TARGET static inline __m512i load_mem(__m512i v)
{
    __asm__ volatile("vmovdqu64 %1, %0" : "+v"(v) : "m"(line));
    return v;
}
TARGET static inline __m512i copy_reg(__m512i v)
{
    __m512i c;
    __asm__ volatile("vmovdqa64 %1, %0" : "=v"(c) : "v"(v));
    return c;
}
#define BCAST(v) bcast_mem(v)
#define LOAD(v) load_mem(v)
#define COPY(v) copy_reg(v)

CASE(none, __m512i, I32, NONE)
CASE(dot, __m512i, I32, MORE_DOT)
CASE(fma, __m512, F32, FMA)
CASE(mul, __m512, F32, MUL)
CASE(add, __m512, F32, ADD)
CASE(cvt, __m512i, I32, CVT)
CASE(mullo, __m512i, I32, MULLO)
CASE(padd, __m512i, I32, PADD)
CASE(dpwssd, __m512i, I32, DPWSSD)
CASE(decode, __m512i, I32, DECODE)
CASE(bcast, __m512i, I32, BCAST)
CASE(load, __m512i, I32, LOAD)
CASE(copy, __m512i, I32, COPY)

typedef struct {
    const char *what;
    void (*run)(void *);
} port_case;

int main(void)
{
    const woolly_cpu *cpu = woolly_cpu_get();
    if (!cpu->avx512f || !cpu->avx512bw || !cpu->avx512vnni) {
        fprintf(stderr, "bench_vnni_ports: this CPU has no AVX-512 VNNI\n");
        return 1;
    }
    static const port_case cases[] = {
        {"nothing (12 vpdpbusd alone)", run_none},
        {"vpdpbusd (4 more)", run_dot},
        {"vfmadd231ps", run_fma},
        {"vmulps", run_mul},
        {"vaddps", run_add},
        {"vcvtdq2ps", run_cvt},
        {"vpmulld", run_mullo},
        {"vpaddd", run_padd},
        {"vpdpwssd", run_dpwssd},
        {"vpsrlw + vpandd, 4 pairs (a nibble decode)", run_decode},
        {"vpbroadcastd zmm, m32", run_bcast},
        {"vmovdqu64 zmm, m512", run_load},
        {"vmovdqa64 zmm, zmm", run_copy},
    };
    printf("| 4 extra per step | ns per step | their cost in vpdpbusd slots |\n| --- | ---: | ---: |\n");
    double base = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const double s = bench_cpu_time(cases[i].run, NULL, 0.05, 7) / STEPS;
        if (i == 0)
            base = s;
        printf("| %s | %.3f | %.2f |\n", cases[i].what, s * 1e9, i ? (s - base) / base * 12 / 4 : 0.0);
    }
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "bench_vnni_ports: AVX-512 VNNI is an x86-64 feature\n");
    return 1;
}
#endif
