/* What this processor can run, detected once, and its signature: the identity a tuning profile is
 * measured on and checked against. */
#ifndef WOOLLY_CPU_H
#define WOOLLY_CPU_H

#include <stdbool.h>
#include <stddef.h>

/* Features a kernel may require beyond its ISA level (the spec's [feature.*] entries), as bits. */
enum woolly_cpu_feature {
    WOOLLY_CPU_AVX512BF16 = 1u << 0, /* vdpbf16ps */
    WOOLLY_CPU_AVXVNNI = 1u << 1,    /* VEX-encoded vpdpbusd on ymm */
    WOOLLY_CPU_I8MM = 1u << 2,       /* aarch64 smmla */
    WOOLLY_CPU_AVX512FP16 = 1u << 3, /* arithmetic on 32 halves: vfmadd231ph */
    WOOLLY_CPU_AMXBF16 = 1u << 4,    /* tdpbf16ps (amx_bf16 below, as a feature a kernel may require) */
};

typedef struct woolly_cpu {
    char arch[8];           /* "x86_64", "aarch64" or "other" */
    char vendor[13];        /* CPUID's vendor string; "arm" on aarch64 */
    unsigned family, model; /* x86: CPUID family and model; aarch64: MIDR implementer and part number */
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni;
    bool amx_tile, amx_int8, amx_bf16; /* the tile instructions, and the OS's leave to use their state */
    bool neon_dotprod;
    unsigned features;                  /* enum woolly_cpu_feature bits */
    unsigned long hwcap, hwcap2;        /* aarch64: the kernel's AT_HWCAP and AT_HWCAP2 words */
    int n_cores;                        /* online logical processors */
    long l1d_bytes, l2_bytes, l3_bytes; /* data cache sizes per level (one core's L1/L2, the L3 it shares),
                                           0 where unknown */
} woolly_cpu;

const woolly_cpu *woolly_cpu_get(void);

/* The CPU signature: architecture, vendor, family/model, the feature bits the kernels depend on (on
 * aarch64 the HWCAP/HWCAP2 words), core count and cache sizes, as one line, e.g.
 *   x86_64 AuthenticAMD family 26 model 2 features avx2,fma,f16c,avx512f,... cores 2 cache 48K,1024K,32768K
 * Two machines with the same signature run the same kernels at the same relative speeds, as far as
 * anything short of measuring can tell. Returns the length (truncated to n - 1 bytes if longer). */
size_t woolly_cpu_signature(char *buf, size_t n);

/* A 64-bit hash of the signature (FNV-1a), to name a file after it. */
unsigned long long woolly_cpu_signature_hash(void);

#endif
