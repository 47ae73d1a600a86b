/* `woolly info --kernels`: the kernel registry of this build, and what this CPU selects from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "info_kernels.h"
#include "registry.h"

static const char *op_name(enum woolly_op op)
{
    static const char *const NAMES[] = {"gemv", "gemm", "attn", "pack", "swiglu", "rmsnorm", "geglu"};
    return (unsigned)op < sizeof NAMES / sizeof NAMES[0] ? NAMES[op] : "?";
}

static void features(unsigned bits, char *buf, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *name;
    } F[] = {{WOOLLY_CPU_AVX512BF16, "avx512bf16"},
             {WOOLLY_CPU_AVXVNNI, "avxvnni"},
             {WOOLLY_CPU_I8MM, "i8mm"},
             {WOOLLY_CPU_AVX512FP16, "avx512fp16"},
             {WOOLLY_CPU_AMXBF16, "amx_bf16"}};
    buf[0] = 0;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if (bits & F[i].bit)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? "," : "", F[i].name);
    if (!buf[0])
        snprintf(buf, cap, "-");
}

/* Whether k is what a matrix of its weight type gets by default here (its activation format and
 * layout from the default GEMV, WOOLLY_ACT applied; the GEMM for 2-16 tokens and the one for more), or
 * the packer / attention kernel chosen. */
static bool selected(const woolly_kernel *k)
{
    switch (k->op) {
    case WOOLLY_OP_GEMV:
    case WOOLLY_OP_GEMM: {
        const woolly_kernel *v = woolly_kernel_default_gemv(k->wtype, woolly_act_forced());
        if (!v)
            return false;
        return woolly_kernel_choose(k->op, k->wtype, v->act, v->layout) == k ||
               (k->op == WOOLLY_OP_GEMM && woolly_kernel_choose_small(k->wtype, v->act, v->layout) == k);
    }
    case WOOLLY_OP_PACK:
        return woolly_kernel_choose_pack(k->act) == k;
    case WOOLLY_OP_ATTN:
        return woolly_kernel_choose_attn(k->wtype, k->head_dim ? k->head_dim : 0, k->act) == k;
    case WOOLLY_OP_SWIGLU:
    case WOOLLY_OP_RMSNORM:
    case WOOLLY_OP_GEGLU:
        return woolly_kernel_choose_ops(k->op, -1) == k;
    }
    return false;
}

int woolly_info_kernels(void)
{
    woolly_error err = {{0}};
    if (woolly_isa_init(&err)) {
        fprintf(stderr, "woolly info: %s\n", err.msg);
        return 1;
    }
    const woolly_cpu *cpu = woolly_cpu_get();
    char feat[64];
    features(cpu->features, feat, sizeof feat);
    printf("cpu: %s family %u model %u, %d logical cores, extra features: %s\n", cpu->vendor, cpu->family,
           cpu->model, cpu->n_cores, feat);
    printf("active level: %s%s; activations: %s\n", woolly_isa_name(woolly_isa_active()),
           getenv("WOOLLY_ISA") && *getenv("WOOLLY_ISA") ? " (WOOLLY_ISA)" : "",
           woolly_act_forced() >= 0 ? woolly_act_name((enum woolly_act)woolly_act_forced()) : "per weight type");
    const char *cls = woolly_kernel_defaults_class();
    if (cls)
        printf("defaults: shipped profile %s, over the spec's\n", cls);
    else
        printf("defaults: the spec's (no shipped profile matches this CPU)\n");
    int n, nl;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    const woolly_layout *ls = woolly_layout_list(&nl);
    printf("registry: %d kernels, hash %016llx; weight layouts:", n, woolly_registry_hash());
    for (int i = 0; i < nl; i++)
        printf(" %s (%d rows)", ls[i].name, ls[i].rows);
    printf("%s\n\n", nl ? "" : " none");
    printf("  %-40s %-5s %-6s %-4s %-7s %-6s %-9s %-11s %s\n", "kernel", "op", "types", "act", "isa", "tile",
           "layout", "requires", "here");
    for (int i = 0; i < n; i++) {
        const woolly_kernel *k = &ks[i];
        const woolly_type_info *ti = woolly_type_get(k->wtype);
        char tile[16];
        if (k->op != WOOLLY_OP_ATTN)
            snprintf(tile, sizeof tile, "%dx%d", k->tile_m, k->tile_n);
        else if (k->head_dim)
            snprintf(tile, sizeof tile, "d%d", k->head_dim);
        else
            snprintf(tile, sizeof tile, "any");
        features(k->features, feat, sizeof feat);
        const bool runs = woolly_kernel_runs(k);
        printf("  %-40s %-5s %-6s %-4s %-7s %-6s %-9s %-11s %s\n", k->name, op_name(k->op),
               k->op == WOOLLY_OP_PACK ? "-" : ti ? ti->name : "?", woolly_act_name(k->act), woolly_isa_name(k->isa),
               tile, k->layout ? k->layout->name : "rows", feat,
               !runs ? "no" : selected(k) ? "selected" : "yes");
    }
    return 0;
}
