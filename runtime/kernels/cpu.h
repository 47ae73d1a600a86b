/* What this processor can run, detected once. */
#ifndef WOOLLY_CPU_H
#define WOOLLY_CPU_H

#include <stdbool.h>

/* Features a kernel may require beyond its ISA level (the spec's [feature.*] entries), as bits. */
enum woolly_cpu_feature {
    WOOLLY_CPU_AVX512BF16 = 1u << 0, /* vdpbf16ps */
    WOOLLY_CPU_AVXVNNI = 1u << 1,    /* VEX-encoded vpdpbusd on ymm */
    WOOLLY_CPU_I8MM = 1u << 2,       /* aarch64 smmla */
};

typedef struct woolly_cpu {
    char vendor[13];
    unsigned family, model;
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni;
    bool neon_dotprod;
    unsigned features; /* enum woolly_cpu_feature bits */
    int n_cores;       /* online logical processors */
} woolly_cpu;

const woolly_cpu *woolly_cpu_get(void);

#endif
