#include "small_ops.h"

#include "cpu.h"
#include "registry.h"

#define DECL_swiglu(name) void woolly_##name(float *gate, const float *up, int64_t n);
#define DECL_rmsnorm(name)                                                                                   \
    void woolly_##name(float *out, const float *x, const float *w, int64_t n, float eps);
#define WOOLLY_OPS_KERNEL(name, op, isa, features) DECL_##op(name)
#include "kernels.inc"

typedef struct op_entry {
    const char *name;
    enum woolly_isa isa;
    unsigned features;
    woolly_swiglu_fn swiglu;
    woolly_rmsnorm_fn rmsnorm;
} op_entry;

#define ENTRY_swiglu(name, isa, features) {#name, isa, features, woolly_##name, NULL},
#define ENTRY_rmsnorm(name, isa, features) {#name, isa, features, NULL, woolly_##name},
static const op_entry OPS[] = {
#define WOOLLY_OPS_KERNEL(name, op, isa, features) ENTRY_##op(name, isa, features)
#include "kernels.inc"
};

/* The registry's rule: scalar runs everywhere, x86 levels nest, NEON only at NEON. */
static int runs(const op_entry *e, enum woolly_isa active)
{
    const int level = e->isa == WOOLLY_ISA_SCALAR || e->isa == active ||
                      (e->isa != WOOLLY_ISA_NEON && active != WOOLLY_ISA_NEON && e->isa <= active);
    return level && (e->features & ~woolly_cpu_get()->features) == 0;
}

woolly_small_ops woolly_small_ops_choose(void)
{
    const enum woolly_isa active = woolly_isa_active();
    woolly_small_ops o = {0};
    enum woolly_isa best_s = WOOLLY_ISA_SCALAR, best_r = WOOLLY_ISA_SCALAR;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        const op_entry *e = &OPS[i];
        if (!runs(e, active))
            continue;
        if (e->swiglu && (!o.swiglu || e->isa > best_s))
            o.swiglu = e->swiglu, o.swiglu_name = e->name, best_s = e->isa;
        if (e->rmsnorm && (!o.rmsnorm || e->isa > best_r))
            o.rmsnorm = e->rmsnorm, o.rmsnorm_name = e->name, best_r = e->isa;
    }
    return o;
}
