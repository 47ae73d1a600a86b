#include "registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#define WOOLLY_MATMUL_KERNEL(name, op, wtype, act, isa, tm, tn) void woolly_##name(const woolly_matmul_args *a);
#define WOOLLY_ATTN_KERNEL(name, ctype, isa, hd) void woolly_##name(const woolly_attn_args *a);
#include "kernels.inc"
#undef WOOLLY_MATMUL_KERNEL
#undef WOOLLY_ATTN_KERNEL

static const woolly_kernel KERNELS[] = {
#define WOOLLY_MATMUL_KERNEL(name, op, wtype, act, isa, tm, tn) \
    {#name, op, wtype, act, isa, tm, tn, 0, woolly_##name, NULL},
#define WOOLLY_ATTN_KERNEL(name, ctype, isa, hd) \
    {#name, WOOLLY_OP_ATTN, ctype, WOOLLY_ACT_F32, isa, 1, 1, hd, NULL, woolly_##name},
#include "kernels.inc"
#undef WOOLLY_MATMUL_KERNEL
#undef WOOLLY_ATTN_KERNEL
};
enum { N_KERNELS = sizeof KERNELS / sizeof KERNELS[0] };

static const char *const ISA_NAMES[WOOLLY_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};

const char *woolly_isa_name(enum woolly_isa isa)
{
    return (unsigned)isa < WOOLLY_ISA_COUNT ? ISA_NAMES[isa] : "?";
}

/* The highest level the CPU supports. */
static enum woolly_isa cpu_level(void)
{
    const woolly_cpu *c = woolly_cpu_get();
    if (c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni && c->fma && c->f16c)
        return WOOLLY_ISA_AVX512;
    if (c->avx2 && c->fma && c->f16c)
        return WOOLLY_ISA_AVX2;
    if (c->neon_dotprod)
        return WOOLLY_ISA_NEON;
    return WOOLLY_ISA_SCALAR;
}

/* Whether this build compiled any kernel of `isa`. */
static bool built(enum woolly_isa isa)
{
    for (int i = 0; i < N_KERNELS; i++)
        if (KERNELS[i].isa == isa)
            return true;
    return false;
}

static bool cpu_runs(enum woolly_isa isa, enum woolly_isa level)
{
    if (isa == WOOLLY_ISA_SCALAR)
        return true;
    if (isa == WOOLLY_ISA_NEON || level == WOOLLY_ISA_NEON)
        return isa == level;
    return isa <= level; /* x86 levels nest: avx512 implies avx2 */
}

static struct {
    pthread_mutex_t lock;
    bool done;
    int rc;
    enum woolly_isa active;
    woolly_error err;
} g_isa = {PTHREAD_MUTEX_INITIALIZER, false, 0, WOOLLY_ISA_SCALAR, {{0}}};

static int decide(woolly_error *err)
{
    const enum woolly_isa level = cpu_level();
    const char *forced = getenv("WOOLLY_ISA");
    if (!forced || !*forced) {
        /* Highest level that is both compiled and supported. */
        enum woolly_isa best = WOOLLY_ISA_SCALAR;
        for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
            if (built((enum woolly_isa)i) && cpu_runs((enum woolly_isa)i, level))
                best = (enum woolly_isa)i;
        g_isa.active = best;
        return 0;
    }
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++) {
        if (strcmp(forced, ISA_NAMES[i]) != 0)
            continue;
        if (!built((enum woolly_isa)i))
            return woolly_fail(err, "WOOLLY_ISA=%s: this build has no %s kernels", forced, forced);
        if (!cpu_runs((enum woolly_isa)i, level))
            return woolly_fail(err, "WOOLLY_ISA=%s: this CPU does not support %s (it supports up to %s)",
                               forced, forced, ISA_NAMES[level]);
        g_isa.active = (enum woolly_isa)i;
        return 0;
    }
    return woolly_fail(err, "WOOLLY_ISA=%s: unknown level (use scalar, avx2, avx512 or neon)", forced);
}

int woolly_isa_init(woolly_error *err)
{
    pthread_mutex_lock(&g_isa.lock);
    if (!g_isa.done) {
        g_isa.rc = decide(&g_isa.err);
        g_isa.done = true;
    }
    const int rc = g_isa.rc;
    if (rc && err)
        *err = g_isa.err;
    pthread_mutex_unlock(&g_isa.lock);
    return rc;
}

enum woolly_isa woolly_isa_active(void)
{
    woolly_isa_init(NULL);
    return g_isa.active;
}

const woolly_kernel *woolly_kernel_list(int *n)
{
    *n = N_KERNELS;
    return KERNELS;
}

const woolly_kernel *woolly_kernel_by_name(const char *name)
{
    for (int i = 0; i < N_KERNELS; i++)
        if (!strcmp(KERNELS[i].name, name))
            return &KERNELS[i];
    return NULL;
}

/* Highest runnable ISA level among the kernels of a slot; head_dim < 0 matches any. */
static const woolly_kernel *choose(enum woolly_op op, enum woolly_type wtype, enum woolly_act act, int head_dim)
{
    const enum woolly_isa active = woolly_isa_active();
    const woolly_kernel *best = NULL;
    for (int i = 0; i < N_KERNELS; i++) {
        const woolly_kernel *k = &KERNELS[i];
        if (k->op != op || k->wtype != wtype || k->act != act || !cpu_runs(k->isa, active))
            continue;
        if (head_dim >= 0 && k->head_dim != 0 && k->head_dim != head_dim)
            continue;
        if (!best || k->isa > best->isa)
            best = k;
    }
    return best;
}

const woolly_kernel *woolly_kernel_choose(enum woolly_op op, enum woolly_type wtype, enum woolly_act act)
{
    return choose(op, wtype, act, -1);
}

const woolly_kernel *woolly_kernel_choose_attn(enum woolly_type cache, int head_dim)
{
    return choose(WOOLLY_OP_ATTN, cache, WOOLLY_ACT_F32, head_dim);
}

unsigned long long woolly_registry_hash(void)
{
    unsigned long long h = 1469598103934665603ull; /* FNV-1a over the names, in order */
    for (int i = 0; i < N_KERNELS; i++) {
        for (const char *p = KERNELS[i].name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0xFF) * 1099511628211ull;
    }
    return h;
}
