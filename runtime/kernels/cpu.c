#include "cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isa.h"

/* ---- cache sizes from sysfs (any Linux), when the processor does not say ------------------------- */

/* The first line of a small sysfs file, or "" if unreadable. */
static void read_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(buf, (int)n, f))
        buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
}

/* /sys/devices/system/cpu/cpu0/cache/index<i>/{level,type,size}: the data and unified caches of cpu 0. */
static void sysfs_caches(woolly_cpu *cpu)
{
    for (int i = 0; i < 16; i++) {
        char path[96], level[16], type[32], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        read_line(path, level, sizeof level);
        if (!level[0])
            break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        read_line(path, type, sizeof type);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        read_line(path, size, sizeof size);
        if (!strcmp(type, "Instruction"))
            continue;
        char *end;
        long bytes = strtol(size, &end, 10);
        if (*end == 'K')
            bytes <<= 10;
        else if (*end == 'M')
            bytes <<= 20;
        long *slot = level[0] == '1'   ? &cpu->l1d_bytes
                     : level[0] == '2' ? &cpu->l2_bytes
                     : level[0] == '3' ? &cpu->l3_bytes
                                       : NULL;
        if (slot && !*slot && bytes > 0)
            *slot = bytes;
    }
}

/* glibc's view (it reads CPUID or sysfs itself), then sysfs for what it lacks. */
static void fallback_caches(woolly_cpu *cpu)
{
#if defined(_SC_LEVEL1_DCACHE_SIZE)
    if (!cpu->l1d_bytes)
        cpu->l1d_bytes = sysconf(_SC_LEVEL1_DCACHE_SIZE) > 0 ? sysconf(_SC_LEVEL1_DCACHE_SIZE) : 0;
    if (!cpu->l2_bytes)
        cpu->l2_bytes = sysconf(_SC_LEVEL2_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL2_CACHE_SIZE) : 0;
    if (!cpu->l3_bytes)
        cpu->l3_bytes = sysconf(_SC_LEVEL3_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL3_CACHE_SIZE) : 0;
#endif
    if (!cpu->l1d_bytes || !cpu->l2_bytes || !cpu->l3_bytes)
        sysfs_caches(cpu);
}

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

/* Linux gives a process AMX's tile data state (8 KiB more per thread to save) only when asked, once,
 * before the first tile instruction (Linux 5.16 and later; without it, that instruction faults). Where
 * the kernel refuses, the CPU is reported without AMX and the levels below it run, after one warning. */
static bool amx_permitted(void)
{
#if defined(__linux__) && defined(__x86_64__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
        return true;
    fprintf(stderr, "woolly: warning: the OS refuses AMX's tile state (arch_prctl: %s); the tile kernels stay off\n",
            strerror(errno));
#endif
    return false;
}

/* The deterministic cache parameters: leaf 4 (Intel) or 0x8000001D (AMD, with topology extensions)
 * describe one cache per subleaf, with ways, partitions, line size and sets each stored minus one. */
static void cpuid_caches(woolly_cpu *cpu, unsigned max_leaf)
{
    unsigned a, b, c, d, leaf = 0;
    const unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
    if (max_ext >= 0x8000001Du) {
        __cpuid(0x80000001u, a, b, c, d);
        if (c & (1u << 22)) /* TOPOEXT */
            leaf = 0x8000001Du;
    }
    if (!leaf && max_leaf >= 4 && strcmp(cpu->vendor, "AuthenticAMD") != 0)
        leaf = 4;
    if (!leaf)
        return;
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        const unsigned type = a & 0x1F, level = (a >> 5) & 7; /* type 1 data, 2 instruction, 3 unified */
        if (type == 0)
            break;
        if (type == 2)
            continue;
        const long bytes = (long)(((b >> 22) & 0x3FF) + 1) * (long)(((b >> 12) & 0x3FF) + 1) *
                           (long)((b & 0xFFF) + 1) * (long)(c + 1);
        if (level == 1)
            cpu->l1d_bytes = bytes;
        else if (level == 2)
            cpu->l2_bytes = bytes;
        else if (level == 3)
            cpu->l3_bytes = bytes;
    }
}

static void detect(woolly_cpu *cpu)
{
    unsigned a, b, c, d, max;
    strcpy(cpu->arch, "x86_64");
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
        if (zmm && (d & (1u << 23))) /* AVX512_FP16 */
            cpu->features |= WOOLLY_CPU_AVX512FP16;
        if ((xcr0 & 0x60000) == 0x60000 && (d & (1u << 24)) && amx_permitted()) { /* XTILECFG, XTILEDATA */
            cpu->amx_tile = true;
            cpu->amx_int8 = (d & (1u << 25)) != 0;
            cpu->amx_bf16 = (d & (1u << 22)) != 0;
            if (cpu->amx_bf16)
                cpu->features |= WOOLLY_CPU_AMXBF16;
        }
        unsigned max7 = a;
        if (max7 >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            if (ymm && (a & (1u << 4))) /* AVX-VNNI */
                cpu->features |= WOOLLY_CPU_AVXVNNI;
            if (zmm && (a & (1u << 5))) /* AVX512_BF16 */
                cpu->features |= WOOLLY_CPU_AVX512BF16;
        }
    }
    cpuid_caches(cpu, max);
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
    strcpy(cpu->arch, "aarch64");
    strcpy(cpu->vendor, "arm");
    cpu->hwcap = getauxval(AT_HWCAP);
    cpu->hwcap2 = getauxval(AT_HWCAP2);
    cpu->neon_dotprod = (cpu->hwcap & HWCAP_ASIMDDP) != 0;
    if (cpu->hwcap2 & HWCAP2_I8MM)
        cpu->features |= WOOLLY_CPU_I8MM;
    /* MIDR_EL1 as the kernel exports it: implementer [31:24], part number [15:4]. */
    char midr[32];
    read_line("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", midr, sizeof midr);
    const unsigned long v = strtoul(midr, NULL, 16);
    cpu->family = (unsigned)(v >> 24) & 0xFF;
    cpu->model = (unsigned)(v >> 4) & 0xFFF;
}
#else
static void detect(woolly_cpu *cpu)
{
    strcpy(cpu->arch, "other");
    strcpy(cpu->vendor, "unknown");
}
#endif

static woolly_cpu g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* A build that runs the avx512 kernels through SIMDe (emulate_avx512.h) reports the level (the fields
 * its spec entry requires) wherever the level it nests in runs: BF16 too, not FP16 (those kernels are
 * not emulated). One that runs the amx kernels' tile instructions in C (emulate_amx.h) reports the amx
 * level wherever avx512 runs, natively or emulated. Tests only: both are slow. */
static void emulate_levels(woolly_cpu *cpu)
{
#if defined(WOOLLY_EMULATED_AVX512)
    if (woolly_isa_cpu_has(cpu, woolly_isa_nests_in(WOOLLY_ISA_AVX512))) {
        woolly_isa_cpu_grant(cpu, WOOLLY_ISA_AVX512);
        cpu->features |= WOOLLY_CPU_AVX512BF16;
    }
#endif
#if defined(WOOLLY_EMULATED_AMX)
    if (woolly_isa_cpu_has(cpu, woolly_isa_nests_in(WOOLLY_ISA_AMX))) {
        woolly_isa_cpu_grant(cpu, WOOLLY_ISA_AMX);
        cpu->amx_bf16 = true; /* amx_tiles.h emulates TDPBF16PS too */
        cpu->features |= WOOLLY_CPU_AMXBF16;
    }
#endif
    (void)cpu;
}

static void init(void)
{
    detect(&g_cpu);
    emulate_levels(&g_cpu);
    fallback_caches(&g_cpu);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    g_cpu.n_cores = n > 0 ? (int)n : 1;
}

const woolly_cpu *woolly_cpu_get(void)
{
    pthread_once(&g_once, init);
    return &g_cpu;
}

size_t woolly_cpu_signature(char *buf, size_t n)
{
    const woolly_cpu *c = woolly_cpu_get();
    char feat[256];
    if (!strcmp(c->arch, "aarch64")) {
        snprintf(feat, sizeof feat, "hwcap 0x%lx hwcap2 0x%lx", c->hwcap, c->hwcap2);
    } else {
        const struct {
            bool on;
            const char *name;
        } bits[] = {
            {c->avx2, "avx2"},
            {c->fma, "fma"},
            {c->f16c, "f16c"},
            {c->avx512f, "avx512f"},
            {c->avx512bw, "avx512bw"},
            {c->avx512vl, "avx512vl"},
            {c->avx512dq, "avx512dq"},
            {c->avx512vnni, "avx512vnni"},
            {c->amx_tile, "amx_tile"},
            {c->amx_int8, "amx_int8"},
            {c->amx_bf16, "amx_bf16"},
            {(c->features & WOOLLY_CPU_AVX512BF16) != 0, "avx512bf16"},
            {(c->features & WOOLLY_CPU_AVXVNNI) != 0, "avxvnni"},
            {(c->features & WOOLLY_CPU_AVX512FP16) != 0, "avx512fp16"},
        };
        size_t len = (size_t)snprintf(feat, sizeof feat, "features ");
        const size_t start = len;
        for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
            if (bits[i].on)
                len += (size_t)snprintf(feat + len, sizeof feat - len, "%s%s", len > start ? "," : "",
                                        bits[i].name);
        if (len == start)
            snprintf(feat + len, sizeof feat - len, "none");
    }
    const int len = snprintf(buf, n, "%s %s family %u model %u %s cores %d cache %ldK,%ldK,%ldK", c->arch,
                             c->vendor, c->family, c->model, feat, c->n_cores, c->l1d_bytes >> 10,
                             c->l2_bytes >> 10, c->l3_bytes >> 10);
    return len < 0 ? 0 : (size_t)len;
}

unsigned long long woolly_cpu_signature_hash(void)
{
    char sig[512];
    woolly_cpu_signature(sig, sizeof sig);
    unsigned long long h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = sig; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}
