/* Shared by the tests of the default profiles shipped per CPU class: signatures of CPUs of each class
 * (as woolly_cpu_signature writes them), to fake a CPU with, and the class each belongs to in an x86-64
 * build (whose shipped profiles are the x86-64 ones; other builds ship none). */
#ifndef WOOLLY_TEST_CLASS_CHECK_H
#define WOOLLY_TEST_CLASS_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "class_profile.h"

#if defined(__x86_64__)
#define CC_X86(cls) cls
#else
#define CC_X86(cls) NULL
#endif

static const struct {
    const char *signature;
    const char *cls; /* NULL: no class, the spec's defaults */
} CC_CPUS[] = {
    {"x86_64 GenuineIntel family 6 model 207 features "
     "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,"
     "avx512bf16,avxvnni,avx512fp16 cores 2 cache 48K,2048K,327680K",
     CC_X86("intel-spr")},
    {"x86_64 GenuineIntel family 6 model 151 features avx2,fma,f16c,avxvnni cores 16 cache 48K,1280K,30720K",
     CC_X86("intel-spr")},
    {"x86_64 AuthenticAMD family 26 model 2 features "
     "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,"
     "avx512bf16 cores 2 cache 48K,1024K,32768K",
     CC_X86("zen5")},
    {"x86_64 AuthenticAMD family 25 model 97 features "
     "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,"
     "avx512bf16 cores 16 cache 32K,1024K,32768K",
     CC_X86("zen4")},
    {"x86_64 AuthenticAMD family 25 model 33 features avx2,fma,f16c cores 2 cache 32K,512K,32768K",
     CC_X86("zen3")},
    /* Zen 2: no class (no AVX-512, so no BF16 tiles either way) */
    {"x86_64 AuthenticAMD family 23 model 113 features avx2,fma,f16c cores 12 cache 32K,512K,16384K", NULL},
    /* a vendor string with spaces, and a vendor no class names */
    {"x86_64   Shanghai   family 7 model 59 features avx2,fma,f16c cores 8 cache 32K,4096K,0K", NULL},
    {"x86_64 HygonGenuine family 24 model 1 features avx2,fma,f16c cores 8 cache 32K,512K,8192K", NULL},
    {"aarch64 arm family 65 model 3340 hwcap 0xefffffbff hwcap2 0x2bf3ff cores 4 cache 64K,1024K,32768K",
     NULL},
};
enum { CC_N_CPUS = sizeof CC_CPUS / sizeof CC_CPUS[0] };

/* The shipped profile of a class (parsed against this build's kernels), or NULL. */
static inline const woolly_shipped_profile *cc_shipped(const char *cls)
{
    char file[64];
    snprintf(file, sizeof file, "%s.profile", cls);
    for (int i = 0; i < woolly_n_shipped_profiles; i++)
        if (!strcmp(woolly_shipped_profiles[i].file, file))
            return &woolly_shipped_profiles[i];
    return NULL;
}

static inline int cc_parse(const woolly_shipped_profile *s, woolly_class_profile *p, woolly_error *err)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    return woolly_class_profile_parse(s->text, s->len, s->file, ks, n, p, err);
}

#endif
