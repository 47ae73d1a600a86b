#include "cpu.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* The register state the OS saves on a context switch (XCR0's low bits; 0 without OSXSAVE). */
static unsigned os_saved_state(void)
{
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    if (!(c & bit_OSXSAVE))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

static void detect(woolly_cpu *cpu)
{
    unsigned a, b, c, d, max;
    __cpuid(0, max, b, c, d);
    memcpy(cpu->vendor + 0, &b, 4);
    memcpy(cpu->vendor + 4, &d, 4);
    memcpy(cpu->vendor + 8, &c, 4);
    cpu->vendor[12] = 0;
    __cpuid(1, a, b, c, d);
    cpu->family = ((a >> 8) & 0xF) + (((a >> 8) & 0xF) == 0xF ? (a >> 20) & 0xFF : 0);
    cpu->model = ((a >> 4) & 0xF) | ((a >> 12) & 0xF0);
    const unsigned xcr0 = os_saved_state();
    const bool ymm = (xcr0 & 0x6) == 0x6;   /* XMM, YMM state */
    const bool zmm = (xcr0 & 0xE6) == 0xE6; /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM state */
    cpu->fma = ymm && (c & bit_FMA);
    cpu->f16c = ymm && (c & bit_F16C);
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        cpu->avx2 = ymm && (b & bit_AVX2);
        cpu->avx512f = zmm && (b & bit_AVX512F);
        cpu->avx512bw = zmm && (b & bit_AVX512BW);
        cpu->avx512vl = zmm && (b & bit_AVX512VL);
        cpu->avx512dq = zmm && (b & bit_AVX512DQ);
        cpu->avx512vnni = zmm && (c & bit_AVX512VNNI);
        unsigned max7 = a;
        if (max7 >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            if (ymm && (a & (1u << 4))) /* AVX-VNNI */
                cpu->features |= WOOLLY_CPU_AVXVNNI;
            if (zmm && (a & (1u << 5))) /* AVX512_BF16 */
                cpu->features |= WOOLLY_CPU_AVX512BF16;
        }
    }
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

static void detect(woolly_cpu *cpu)
{
    strcpy(cpu->vendor, "aarch64");
    cpu->neon_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    if (getauxval(AT_HWCAP2) & HWCAP2_I8MM)
        cpu->features |= WOOLLY_CPU_I8MM;
}
#else
static void detect(woolly_cpu *cpu) { strcpy(cpu->vendor, "unknown"); }
#endif

static woolly_cpu g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init(void)
{
    detect(&g_cpu);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    g_cpu.n_cores = n > 0 ? (int)n : 1;
}

const woolly_cpu *woolly_cpu_get(void)
{
    pthread_once(&g_once, init);
    return &g_cpu;
}
