/* What this processor can run, detected once. */
#ifndef WOOLLY_CPU_H
#define WOOLLY_CPU_H

#include <stdbool.h>

typedef struct woolly_cpu {
    char vendor[13];
    unsigned family, model;
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni;
    bool neon_dotprod;
    int n_cores; /* online logical processors */
} woolly_cpu;

const woolly_cpu *woolly_cpu_get(void);

#endif
