#include "machine_limits.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "huge_map.h"
#include "peak_loop.h"
#include "registry.h"
#include "threadpool.h"
#include "timing.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "amx_tiles.h"
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* ---- DRAM read bandwidth ---------------------------------------------------------------------- */

/* A buffer the L3 holds part of reads faster than DRAM: 256 MiB against the 260 MiB L3 of an Intel Xeon
 * here read 32.6-33.6 GB/s at best on 2 threads, 1 and 4 GiB 29.3-30.5, which would make the limit high
 * and every share of it low. */
size_t woolly_dram_stream_bytes(size_t floor)
{
    const size_t l3 = (size_t)woolly_cpu_get()->l3_bytes;
    return 4 * l3 > floor ? 4 * l3 : floor;
}

typedef struct read_job {
    const uint64_t *buf;
    size_t n; /* words */
    uint64_t sink[64];
} read_job;

/* One word per 64-byte line, four lines per step in independent sums: the hardware fetches whole lines
 * either way, and with one load per line the core keeps many more lines in flight than with eight. A
 * loop that loads every word is bound by its own instructions on some cores (an Intel Xeon here: 7.9
 * GB/s on one thread against 14.5 for this loop and for 64-byte vector loads alike), which would make
 * the limit read low and the kernels' share of it read over 100%. */
static void read_job_run(void *arg, int ith, int nth)
{
    enum { LINE = 64 / sizeof(uint64_t), STEP = 4 * LINE };
    read_job *j = arg;
    long long lo, hi;
    woolly_split_range((long long)j->n, STEP, ith, nth, &lo, &hi);
    /* A pointer run to its end: the same loop on an index (`i + STEP <= hi`, whose end test gcc
     * compiled as a compare of the pointer's copy from before its increment) read 43-65 GB/s on a Zen 5
     * guest here where this form read 75-81 in the same minutes, on the same pool and buffer, and one
     * vector load per line 70-80 (bench/journal/2026-12-04-zen5-2.md). */
    const uint64_t *p = j->buf + lo, *const end = p + (hi - lo) / STEP * STEP;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (; p < end; p += STEP) {
        a += p[0];
        b += p[LINE];
        c += p[2 * LINE];
        d += p[3 * LINE];
    }
    j->sink[ith % 64] = a + b + c + d;
}

typedef struct pool_run {
    woolly_threadpool *pool;
    woolly_job_fn fn;
    void *arg;
} pool_run;

static void run_on_pool(void *p)
{
    pool_run *r = p;
    woolly_threadpool_run(r->pool, r->fn, r->arg);
}

/* The buffer asks for 2 MiB pages (huge_map.h) for its fill, not its reads: on a Zen 5 guest here one
 * thread read 2 GiB at 26-38 GB/s on either page size (the host's drift, not the pages'), but faulting
 * the 2 GiB in took 6.5-8.4 s in 4 KiB pages against 0.2-0.7 s in 2 MiB ones. One pass over the buffer
 * (tens of milliseconds) is long enough to time, and the best of five is kept: a whole measurement
 * takes about 0.6 s there, so that `woolly bench --roofline` can take one after every round. */
static double dram_read_gbs(woolly_threadpool *pool)
{
    const size_t bytes = woolly_dram_stream_bytes((size_t)256 << 20);
    woolly_huge_map map;
    uint64_t *buf = woolly_huge_map_open(&map, bytes);
    if (!buf)
        return 0.0;
    memset(buf, 1, bytes); /* real pages, not the shared zero page */
    read_job j = {buf, bytes / sizeof(uint64_t), {0}};
    pool_run r = {pool, read_job_run, &j};
    const woolly_timing t = woolly_time_fn(run_on_pool, &r, 0.02, 5, 1.0);
    woolly_huge_map_close(&map);
    return (double)bytes / t.min_s / 1e9;
}

/* ---- int8 multiply-add rate -------------------------------------------------------------------- */

enum { PEAK_ITERS = 1 << 20 };

typedef struct peak_job {
    long long (*fn)(void); /* multiply-adds done */
    long long macs[64];
} peak_job;

#if defined(__x86_64__) && !defined(WOOLLY_EMULATED_AVX512)
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static long long peak_vpdpbusd_zmm(void)
{
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
#define DECL(i) __m512i acc##i = _mm512_set1_epi32(i);
#define STEP(i) acc##i = _mm512_dpbusd_epi32(acc##i, a, b);
#define SUM(i) s = _mm512_add_epi32(s, acc##i);
    PEAK_ACCS_12(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_12(STEP)
        PEAK_KEEP_12(acc);
    }
    __m512i s = _mm512_setzero_si512();
    PEAK_ACCS_12(SUM)
#undef DECL
#undef STEP
#undef SUM
    /* lane 0 only: the intrinsic reduction adds the lanes as C ints, which overflow here */
    volatile int sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
    (void)sink;
    return 12LL * 64 * PEAK_ITERS;
}
#endif

#if defined(__x86_64__) && !defined(WOOLLY_EMULATED_AMX)
/* The peak loops' tiles, as the kernels' 2 x 2 steps hold them: every tile 16 rows of 64 bytes, the four
 * accumulators 0-3 zeroed, the A tiles 4-5 and B tiles 6-7 loaded from `operand` (whose values do not
 * change the rate). The products only read registers, so a loop of them is the tile unit's rate alone.
 * The CPU check asked Linux for the tile state before any caller could reach here (the level is active
 * only then). */
__attribute__((target("amx-tile"))) static void peak_tiles_load(const void *operand)
{
    woolly_tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++)
        c.rows[i] = 16, c.colsb[i] = 64;
    _tile_loadconfig(&c);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
}

/* Accumulator 0 back to memory (so that the products are not dead), and the tiles released. */
__attribute__((target("amx-tile"))) static void peak_tiles_store(void)
{
    _Alignas(64) int32_t out[16][16];
    _tile_stored(0, out, 64);
    _tile_release();
    volatile int32_t sink = out[0][0];
    (void)sink;
}

/* AMX's int8 tile product: per TDPBSSD each 16 x 16 int32 accumulator gains a 16 x 64 by 64 x 16 byte
 * product (16384 multiply-adds). */
__attribute__((target("amx-tile,amx-int8"))) static long long peak_tdpbssd(void)
{
    static const int8_t operand[16][64] = {{1}};
    peak_tiles_load(operand);
    enum { ITERS = PEAK_ITERS / 16 }; /* a tile product is 256 vpdpbusd's work */
    for (int it = 0; it < ITERS; it++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    peak_tiles_store();
    return 4LL * 16 * 16 * 64 * ITERS;
}

/* AMX's BF16 tile product, the same way: per TDPBF16PS a 16 x 32 by 32 x 16 BF16 product (8192
 * multiply-adds) into 16 x 16 F32. */
__attribute__((target("amx-tile,amx-bf16"))) static long long peak_tdpbf16ps(void)
{
    static const uint16_t operand[16][32] = {{0x3F80}}; /* 1.0 */
    peak_tiles_load(operand);
    enum { ITERS = PEAK_ITERS / 16 };
    for (int it = 0; it < ITERS; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    peak_tiles_store();
    return 4LL * 16 * 16 * 32 * ITERS;
}
#endif

#if defined(__x86_64__) && !defined(WOOLLY_EMULATED_AVX512)
/* vdpbf16ps: 32 BF16 products summed pairwise into 16 F32 lanes, 12 independent sums as the int8 peak's. */
__attribute__((target("avx512f,avx512bf16"))) static long long peak_vdpbf16ps_zmm(void)
{
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80), b = (__m512bh)_mm512_set1_epi16(0x3F00);
#define DECL(i) __m512 acc##i = _mm512_set1_ps((float)i);
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, acc##i);
    PEAK_ACCS_12(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_12(STEP)
        PEAK_KEEP_12(acc);
    }
    __m512 s = _mm512_setzero_ps();
    PEAK_ACCS_12(SUM)
#undef DECL
#undef STEP
#undef SUM
    volatile float sink = _mm_cvtss_f32(_mm512_castps512_ps128(s));
    (void)sink;
    return 12LL * 32 * PEAK_ITERS;
}
#endif

#if defined(__x86_64__)
/* What the AVX2 int8 kernels spend their time on: vpmaddubsw (u8 x s8 -> pairs summed to s16) added
 * up in s16 with vpaddw, 32 multiply-adds each (the kernels widen with vpmaddwd once per 8; the sums
 * here wrap, which costs nothing). Two `a`s the empty asm makes opaque every iteration, times four
 * second operands, keep the eight products distinct: with constant operands the compiler computes
 * them once, and the loop times the adds alone. */
__attribute__((target("avx2"))) static long long peak_maddubs_ymm(void)
{
    __m256i a0 = _mm256_set1_epi8(3), a1 = _mm256_set1_epi8(5);
    const __m256i b0 = _mm256_set1_epi8(-2), b1 = _mm256_set1_epi8(7), b2 = _mm256_set1_epi8(-9),
                  b3 = _mm256_set1_epi8(11);
#define DECL(i) __m256i s##i = _mm256_setzero_si256();
    PEAK_ACCS_8(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        __asm__("" : "+v"(a0), "+v"(a1));
        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(a0, b0));
        s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(a0, b1));
        s2 = _mm256_add_epi16(s2, _mm256_maddubs_epi16(a0, b2));
        s3 = _mm256_add_epi16(s3, _mm256_maddubs_epi16(a0, b3));
        s4 = _mm256_add_epi16(s4, _mm256_maddubs_epi16(a1, b0));
        s5 = _mm256_add_epi16(s5, _mm256_maddubs_epi16(a1, b1));
        s6 = _mm256_add_epi16(s6, _mm256_maddubs_epi16(a1, b2));
        s7 = _mm256_add_epi16(s7, _mm256_maddubs_epi16(a1, b3));
        __asm__("" : "+v"(s0), "+v"(s1), "+v"(s2), "+v"(s3), "+v"(s4), "+v"(s5), "+v"(s6), "+v"(s7));
    }
    const __m256i one = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
#define SUM(i) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s##i, one));
    PEAK_ACCS_8(SUM)
#undef DECL
#undef SUM
    volatile int sink = _mm256_extract_epi32(acc, 0);
    (void)sink;
    return 8LL * 32 * PEAK_ITERS;
}
#elif defined(__aarch64__)
__attribute__((target("arch=armv8.2-a+dotprod"))) static long long peak_sdot(void)
{
    const int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(-2);
#define DECL(i) int32x4_t acc##i = vdupq_n_s32(i);
#define STEP(i) acc##i = vdotq_s32(acc##i, a, b);
#define SUM(i) s = vaddq_s32(s, acc##i);
    PEAK_ACCS_12(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_12(STEP)
        __asm__(""
                : "+w"(acc0), "+w"(acc1), "+w"(acc2), "+w"(acc3), "+w"(acc4), "+w"(acc5), "+w"(acc6),
                  "+w"(acc7), "+w"(acc8), "+w"(acc9), "+w"(acc10), "+w"(acc11));
    }
    int32x4_t s = vdupq_n_s32(0);
    PEAK_ACCS_12(SUM)
#undef DECL
#undef STEP
#undef SUM
    volatile int sink = vaddvq_s32(s);
    (void)sink;
    return 12LL * 16 * PEAK_ITERS;
}
#endif

/* F32 fused multiply-adds, what the F16 and F32 weights' GEMMs spend their time on: 12 independent sums
 * (8 for ymm: 16 registers), each step acc += a x b. The sums grow by 0.5 a step and stay exact. */
#if defined(__x86_64__) && !defined(WOOLLY_EMULATED_AVX512)
__attribute__((target("avx512f"))) static long long peak_fma_zmm(void)
{
    const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.5f);
#define DECL(i) __m512 acc##i = _mm512_set1_ps((float)i);
#define STEP(i) acc##i = _mm512_fmadd_ps(a, b, acc##i);
#define SUM(i) s = _mm512_add_ps(s, acc##i);
    PEAK_ACCS_12(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_12(STEP)
        PEAK_KEEP_12(acc);
    }
    __m512 s = _mm512_setzero_ps();
    PEAK_ACCS_12(SUM)
#undef DECL
#undef STEP
#undef SUM
    volatile float sink = _mm_cvtss_f32(_mm512_castps512_ps128(s));
    (void)sink;
    return 12LL * 16 * PEAK_ITERS;
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static long long peak_fma_ymm(void)
{
    const __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0.5f);
#define DECL(i) __m256 acc##i = _mm256_set1_ps((float)i);
#define STEP(i) acc##i = _mm256_fmadd_ps(a, b, acc##i);
#define SUM(i) s = _mm256_add_ps(s, acc##i);
    PEAK_ACCS_8(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_8(STEP)
        __asm__("" : "+v"(acc0), "+v"(acc1), "+v"(acc2), "+v"(acc3), "+v"(acc4), "+v"(acc5), "+v"(acc6),
                     "+v"(acc7));
    }
    __m256 s = _mm256_setzero_ps();
    PEAK_ACCS_8(SUM)
#undef DECL
#undef STEP
#undef SUM
    volatile float sink = _mm256_cvtss_f32(s);
    (void)sink;
    return 8LL * 8 * PEAK_ITERS;
}
#elif defined(__aarch64__)
static long long peak_fmla(void)
{
    const float32x4_t a = vdupq_n_f32(1.0f), b = vdupq_n_f32(0.5f);
#define DECL(i) float32x4_t acc##i = vdupq_n_f32((float)i);
#define STEP(i) acc##i = vfmaq_f32(acc##i, a, b);
#define SUM(i) s = vaddq_f32(s, acc##i);
    PEAK_ACCS_12(DECL)
    for (int it = 0; it < PEAK_ITERS; it++) {
        PEAK_ACCS_12(STEP)
        __asm__(""
                : "+w"(acc0), "+w"(acc1), "+w"(acc2), "+w"(acc3), "+w"(acc4), "+w"(acc5), "+w"(acc6),
                  "+w"(acc7), "+w"(acc8), "+w"(acc9), "+w"(acc10), "+w"(acc11));
    }
    float32x4_t s = vdupq_n_f32(0.0f);
    PEAK_ACCS_12(SUM)
#undef DECL
#undef STEP
#undef SUM
    volatile float sink = vgetq_lane_f32(s, 0);
    (void)sink;
    return 12LL * 4 * PEAK_ITERS;
}
#endif

static void peak_job_run(void *arg, int ith, int nth)
{
    (void)nth;
    peak_job *j = arg;
    j->macs[ith % 64] = j->fn();
}

/* The int8 instruction each level's kernels spend their time on, where this file can time it. */
static const struct {
    enum woolly_isa isa;
    const char *name;
    long long (*fn)(void);
} PEAKS[] = {
#if defined(__x86_64__)
#if defined(WOOLLY_EMULATED_AMX)
    {WOOLLY_ISA_AMX, "none (amx emulated)", NULL},
#else
    {WOOLLY_ISA_AMX, "tdpbssd", peak_tdpbssd},
#endif
#if defined(WOOLLY_EMULATED_AVX512)
    {WOOLLY_ISA_AVX512, "none (avx512 emulated)", NULL},
#else
    {WOOLLY_ISA_AVX512, "vpdpbusd zmm", peak_vpdpbusd_zmm},
#endif
    {WOOLLY_ISA_AVX2, "vpmaddubsw+vpaddw ymm", peak_maddubs_ymm},
#elif defined(__aarch64__)
    {WOOLLY_ISA_NEON, "sdot", peak_sdot},
#endif
    {WOOLLY_ISA_REFERENCE, "none (scalar level)", NULL},
};

/* The instruction of the active level, or of the nearest level it nests in that has one (a new level
 * is measured by its base's until it has its own); NULL when that has no int8 dot product. */
static long long (*peak_fn(const char **name))(void)
{
    for (enum woolly_isa l = woolly_isa_active();; l = woolly_isa_nests_in(l)) {
        for (size_t i = 0; i < sizeof PEAKS / sizeof PEAKS[0]; i++)
            if (PEAKS[i].isa == l) {
                *name = PEAKS[i].name;
                return PEAKS[i].fn;
            }
        if (l == woolly_isa_nests_in(l))
            break;
    }
    *name = "none (scalar level)";
    return NULL;
}

/* The BF16 instruction of the active level (or the level it nests in) where the CPU has its feature. */
static long long (*bf16_peak_fn(const char **name))(void)
{
    *name = "none (no BF16 dot product at this level)";
#if defined(__x86_64__)
    const unsigned features = woolly_cpu_get()->features;
    const enum woolly_isa active = woolly_isa_active();
    if (active == WOOLLY_ISA_AMX && (features & WOOLLY_CPU_AMXBF16)) {
#if defined(WOOLLY_EMULATED_AMX)
        *name = "none (amx emulated)";
        return NULL;
#else
        *name = "tdpbf16ps";
        return peak_tdpbf16ps;
#endif
    }
    if (woolly_isa_runs_at(WOOLLY_ISA_AVX512, active) && (features & WOOLLY_CPU_AVX512BF16)) {
#if defined(WOOLLY_EMULATED_AVX512)
        *name = "none (avx512 emulated)";
        return NULL;
#else
        *name = "vdpbf16ps zmm";
        return peak_vdpbf16ps_zmm;
#endif
    }
#endif
    return NULL;
}

/* The F32 FMA of the widest vector level the active one runs at (the amx level's F16 and F32 GEMMs
 * that run on tiles are not measured by it). */
static long long (*f32_peak_fn(const char **name))(void)
{
    *name = "none (scalar level)";
#if defined(__x86_64__)
    const enum woolly_isa active = woolly_isa_active();
    if (woolly_isa_runs_at(WOOLLY_ISA_AVX512, active)) {
#if defined(WOOLLY_EMULATED_AVX512)
        *name = "none (avx512 emulated)";
        return NULL;
#else
        *name = "vfmadd231ps zmm";
        return peak_fma_zmm;
#endif
    }
    if (woolly_isa_runs_at(WOOLLY_ISA_AVX2, active)) {
        *name = "vfmadd231ps ymm";
        return peak_fma_ymm;
    }
#elif defined(__aarch64__)
    if (woolly_isa_runs_at(WOOLLY_ISA_NEON, woolly_isa_active())) {
        *name = "fmla 4s";
        return peak_fmla;
    }
#endif
    return NULL;
}

/* The rate of `fn` on every thread of the pool, in 1e9 multiply-adds per second. */
static double peak_gmacs(woolly_threadpool *pool, int threads, long long (*fn)(void))
{
    peak_job j = {fn, {0}};
    pool_run r = {pool, peak_job_run, &j};
    const woolly_timing t = woolly_time_fn(run_on_pool, &r, 0.01, 5, 0.5);
    long long macs = 0;
    for (int i = 0; i < threads && i < 64; i++)
        macs += j.macs[i];
    return (double)macs / t.min_s / 1e9;
}

int woolly_measure_limits(int threads, woolly_limits *out)
{
    memset(out, 0, sizeof *out);
    out->threads = threads;
    woolly_threadpool *pool = woolly_threadpool_open(threads, NULL);
    if (!pool)
        return -1;
    out->dram_read_gbs = dram_read_gbs(pool);
    long long (*int8)(void) = peak_fn(&out->int8_instr), (*bf16)(void) = bf16_peak_fn(&out->bf16_instr);
    if (int8)
        out->int8_gmacs = peak_gmacs(pool, threads, int8);
    if (bf16)
        out->bf16_gmacs = peak_gmacs(pool, threads, bf16);
    long long (*f32)(void) = f32_peak_fn(&out->f32_instr);
    if (f32)
        out->f32_gmacs = peak_gmacs(pool, threads, f32);
    woolly_threadpool_close(pool);
    return out->dram_read_gbs > 0 ? 0 : -1;
}
