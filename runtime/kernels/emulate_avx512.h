/* The AVX-512 level on a CPU without it, for tests: a build with WOOLLY_EMULATE_AVX512=ON compiles the
 * avx512 kernels with the AVX2 flags and this header forced in first, so that their intrinsics become
 * SIMDe's portable versions (Debian's libsimde-dev) and run here, slowly, with the numbers of the real
 * instructions: integer operations exactly, float ones lane by lane in the same IEEE operations. The
 * cpuid check then reports the level (cpu.c), so every test that runs at avx512 on a Zen 4 runs here too.
 *
 * Debian 12's SIMDe lacks some intrinsics the kernels use; they are written below, each as the
 * instruction's documented per-lane result (the reductions in the order GCC's avx512fintrin.h sums, which
 * is what a real build runs). The AVX512-FP16 kernels are not emulated: they keep their real flags and
 * never run, since the emulated CPU reports no FP16. */
#ifndef WOOLLY_EMULATE_AVX512_H
#define WOOLLY_EMULATE_AVX512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

typedef simde__m512_private emu_ps;
typedef simde__m512i_private emu_si;

static inline emu_ps emu_ps_of(simde__m512 a)
{
    return simde__m512_to_private(a);
}
static inline emu_si emu_si_of(simde__m512i a)
{
    return simde__m512i_to_private(a);
}

static inline simde__m512 emu_ps2(__m256 lo, __m256 hi)
{
    emu_ps r;
    r.m256[0] = lo;
    r.m256[1] = hi;
    return simde__m512_from_private(r);
}

static inline simde__m512i emu_si2(__m256i lo, __m256i hi)
{
    emu_si r;
    r.m256i[0] = lo;
    r.m256i[1] = hi;
    return simde__m512i_from_private(r);
}

static inline simde__m512 emu_mm512_cvtepi32_ps(simde__m512i a)
{
    const emu_si x = emu_si_of(a);
    return emu_ps2(_mm256_cvtepi32_ps(x.m256i[0]), _mm256_cvtepi32_ps(x.m256i[1]));
}

static inline simde__m512i emu_mm512_cvtps_epi32(simde__m512 a)
{
    const emu_ps x = emu_ps_of(a);
    return emu_si2(_mm256_cvtps_epi32(x.m256[0]), _mm256_cvtps_epi32(x.m256[1]));
}

static inline simde__m512 emu_mm512_cvtph_ps(__m256i a)
{
    return emu_ps2(_mm256_cvtph_ps(_mm256_castsi256_si128(a)),
                   _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)));
}

#define emu_mm512_cvtps_ph(a, imm)                                                                           \
    _mm256_setr_m128i(_mm256_cvtps_ph(emu_ps_of(a).m256[0], (imm)),                                          \
                      _mm256_cvtps_ph(emu_ps_of(a).m256[1], (imm)))

static inline simde__m512i emu_mm512_cvtepi8_epi32(__m128i a)
{
    return emu_si2(_mm256_cvtepi8_epi32(a), _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(a, a)));
}

static inline simde__m512i emu_mm512_cvtepu8_epi32(__m128i a)
{
    return emu_si2(_mm256_cvtepu8_epi32(a), _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(a, a)));
}

static inline simde__m512i emu_mm512_cvtepu16_epi32(__m256i a)
{
    return emu_si2(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)),
                   _mm256_cvtepu16_epi32(_mm256_extracti128_si256(a, 1)));
}

/* vpmovdw: each lane's low 16 bits. */
static inline __m256i emu_mm512_cvtepi32_epi16(simde__m512i a)
{
    const emu_si x = emu_si_of(a);
    int16_t r[16];
    for (int i = 0; i < 16; i++)
        r[i] = (int16_t)x.i32[i];
    return _mm256_loadu_si256((const __m256i *)r);
}

/* Masked loads and stores touch only the lanes the mask selects, as the instructions do (no fault and
 * no sanitizer report for the others). */
static inline simde__m512 emu_mm512_maskz_loadu_ps(uint16_t k, const void *p)
{
    emu_ps r;
    for (int i = 0; i < 16; i++)
        r.f32[i] = k >> i & 1 ? ((const float *)p)[i] : 0.0f;
    return simde__m512_from_private(r);
}

static inline void emu_mm512_mask_storeu_ps(void *p, uint16_t k, simde__m512 a)
{
    const emu_ps x = emu_ps_of(a);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1)
            ((float *)p)[i] = x.f32[i];
}

static inline simde__m512i emu_mm512_maskz_loadu_epi16(uint32_t k, const void *p)
{
    emu_si r;
    for (int i = 0; i < 32; i++)
        r.i16[i] = k >> i & 1 ? ((const int16_t *)p)[i] : 0;
    return simde__m512i_from_private(r);
}

static inline __m256i emu_mm256_maskz_loadu_epi16(uint16_t k, const void *p)
{
    int16_t r[16];
    for (int i = 0; i < 16; i++)
        r[i] = k >> i & 1 ? ((const int16_t *)p)[i] : 0;
    return _mm256_loadu_si256((const __m256i *)r);
}

static inline void emu_mm256_mask_storeu_epi16(void *p, uint16_t k, __m256i a)
{
    int16_t x[16];
    _mm256_storeu_si256((__m256i *)x, a);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1)
            ((int16_t *)p)[i] = x[i];
}

static inline simde__m512 emu_mm512_i32gather_ps(simde__m512i idx, const void *base, int scale)
{
    const emu_si x = emu_si_of(idx);
    emu_ps r;
    for (int i = 0; i < 16; i++)
        memcpy(&r.f32[i], (const char *)base + (ptrdiff_t)x.i32[i] * scale, sizeof(float));
    return simde__m512_from_private(r);
}

/* The same 4-byte gather: memcpy moves the bits whatever they hold. */
static inline simde__m512i emu_mm512_i32gather_epi32(simde__m512i idx, const void *base, int scale)
{
    return simde_mm512_castps_si512(emu_mm512_i32gather_ps(idx, base, scale));
}

/* 128-bit lanes: a's lanes imm[1:0] and imm[3:2], then b's lanes imm[5:4] and imm[7:6]. */
static inline simde__m512 emu_mm512_shuffle_f32x4(simde__m512 a, simde__m512 b, int imm)
{
    const emu_ps x = emu_ps_of(a), y = emu_ps_of(b);
    emu_ps r;
    for (int l = 0; l < 4; l++) {
        const emu_ps *src = l < 2 ? &x : &y;
        memcpy(&r.f32[4 * l], &src->f32[4 * (imm >> (2 * l) & 3)], 4 * sizeof(float));
    }
    return simde__m512_from_private(r);
}

static inline __m256 emu_mm512_extractf32x8_ps(simde__m512 a, int imm)
{
    return emu_ps_of(a).m256[imm & 1];
}

/* GCC's order: the two 256-bit halves, then the 128-bit halves, then lanes (0 + 2, 1 + 3), then those. */
static inline float emu_mm512_reduce_add_ps(simde__m512 a)
{
    const emu_ps x = emu_ps_of(a);
    const __m256 t3 = _mm256_add_ps(x.m256[1], x.m256[0]);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, 1));
}

static inline float emu_mm512_reduce_max_ps(simde__m512 a)
{
    const emu_ps x = emu_ps_of(a);
    const __m256 t3 = _mm256_max_ps(x.m256[1], x.m256[0]);
    const __m128 t6 = _mm_max_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_max_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(_mm_max_ps(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1))));
}

static inline int emu_mm512_reduce_add_epi32(simde__m512i a)
{
    const emu_si x = emu_si_of(a);
    int s = 0;
    for (int i = 0; i < 16; i++)
        s = (int)((unsigned)s + (unsigned)x.i32[i]); /* wraps, as the instruction's sum does */
    return s;
}

/* vcvtne2ps2bf16: round to nearest even; denormal inputs count as zero and NaNs stay quiet NaNs (the
 * instruction ignores MXCSR). b's 16 values fill the low half, a's the high half. */
static inline uint16_t emu_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7F800000u) == 0)
        return (uint16_t)(u >> 16 & 0x8000u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7FFFu + (u >> 16 & 1)) >> 16);
}

static inline simde__m512bh emu_mm512_cvtne2ps_pbh(simde__m512 a, simde__m512 b)
{
    const emu_ps x = emu_ps_of(a), y = emu_ps_of(b);
    simde__m512bh_private r;
    uint16_t h[32];
    for (int i = 0; i < 16; i++) {
        h[i] = emu_bf16(y.f32[i]);
        h[16 + i] = emu_bf16(x.f32[i]);
    }
    memcpy(&r, h, sizeof h);
    return simde__m512bh_from_private(r);
}

/* vcvtneps2bf16: 16 values, rounded as above, into a 256-bit vector (an integer one here, which the
 * kernels cast it to). */
static inline __m256i emu_mm512_cvtneps_pbh(simde__m512 a)
{
    const emu_ps x = emu_ps_of(a);
    uint16_t h[16];
    for (int i = 0; i < 16; i++)
        h[i] = emu_bf16(x.f32[i]);
    __m256i r;
    memcpy(&r, h, sizeof h);
    return r;
}

#undef _mm512_cvtepi32_ps
#undef _mm512_cvtps_epi32
#undef _mm512_cvtph_ps
#undef _mm512_cvtps_ph
#undef _mm512_cvtepi8_epi32
#undef _mm512_cvtepu8_epi32
#undef _mm512_cvtepu16_epi32
#undef _mm512_cvtepi32_epi16
#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_ps
#undef _mm512_maskz_loadu_epi16
#undef _mm256_maskz_loadu_epi16
#undef _mm256_mask_storeu_epi16
#undef _mm512_i32gather_ps
#undef _mm512_i32gather_epi32
#undef _mm512_reduce_add_ps
#undef _mm512_reduce_max_ps
#undef _mm512_reduce_add_epi32
#undef _mm512_cvtne2ps_pbh
#undef _mm512_cvtneps_pbh
#undef _mm512_shuffle_f32x4
#undef _mm512_extractf32x8_ps
#undef _mm512_madd_epi16
#define _mm512_cvtepi32_ps emu_mm512_cvtepi32_ps
#define _mm512_cvtps_epi32 emu_mm512_cvtps_epi32
#define _mm512_cvtph_ps emu_mm512_cvtph_ps
#define _mm512_cvtps_ph emu_mm512_cvtps_ph
#define _mm512_cvtepi8_epi32 emu_mm512_cvtepi8_epi32
#define _mm512_cvtepu8_epi32 emu_mm512_cvtepu8_epi32
#define _mm512_cvtepu16_epi32 emu_mm512_cvtepu16_epi32
#define _mm512_cvtepi32_epi16 emu_mm512_cvtepi32_epi16
#define _mm512_maskz_loadu_ps emu_mm512_maskz_loadu_ps
#define _mm512_mask_storeu_ps emu_mm512_mask_storeu_ps
#define _mm512_maskz_loadu_epi16 emu_mm512_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 emu_mm256_maskz_loadu_epi16
#define _mm256_mask_storeu_epi16 emu_mm256_mask_storeu_epi16
#define _mm512_i32gather_ps emu_mm512_i32gather_ps
#define _mm512_i32gather_epi32 emu_mm512_i32gather_epi32
#define _mm512_reduce_add_ps emu_mm512_reduce_add_ps
#define _mm512_reduce_max_ps emu_mm512_reduce_max_ps
#define _mm512_reduce_add_epi32 emu_mm512_reduce_add_epi32
#define _mm512_cvtne2ps_pbh emu_mm512_cvtne2ps_pbh
#define _mm512_cvtneps_pbh emu_mm512_cvtneps_pbh
#define _mm512_shuffle_f32x4 emu_mm512_shuffle_f32x4
#define _mm512_extractf32x8_ps emu_mm512_extractf32x8_ps
/* SIMDe 0.7.4 (Debian 12) aliases the masked form's four arguments to this name: the two-argument one */
#define _mm512_madd_epi16 simde_mm512_madd_epi16

#endif
