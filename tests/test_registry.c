/* The kernel registry: no slot without a scalar reference kernel, names that follow the grammar, and
 * WOOLLY_ISA forcing a level (Criterion runs each test in its own process, so each sees a fresh
 * registry and its own environment). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "class_check.h"
#include "class_profile.h"
#include "cpu.h"
#include "matmul.h"
#include "registry.h"

static const char *op_token(enum woolly_op op)
{
    return op == WOOLLY_OP_GEMV   ? "_gemv_"
           : op == WOOLLY_OP_GEMM ? "_gemm_"
           : op == WOOLLY_OP_ATTN ? "_flash_"
                                  : "pack_";
}

Test(registry, every_slot_has_a_scalar_reference_kernel)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++) {
        /* Attention's rounded (BF16, FP16) tiles are held to the float64 oracle like the F32 ones, and fall
         * back to the F32 kernels: their slot is the cache type's. */
        const bool any_act = ks[i].op == WOOLLY_OP_ATTN;
        bool has_scalar = false;
        for (int j = 0; j < n; j++)
            has_scalar |= ks[j].op == ks[i].op && ks[j].wtype == ks[i].wtype &&
                          (any_act || ks[j].act == ks[i].act) && ks[j].isa == WOOLLY_ISA_SCALAR && !ks[j].layout;
        cr_assert(has_scalar, "%s: its slot has no scalar reference kernel on GGUF rows", ks[i].name);
    }
    /* Every (op, weights, activations) slot of the reference formats exists; q8k (one scale per 256
     * values) is the format of the K-quant kernels that take it only, whose slots the loop above checks. */
    static const enum woolly_type TYPES[] = {WOOLLY_TYPE_F32,  WOOLLY_TYPE_F16,  WOOLLY_TYPE_BF16,
                                             WOOLLY_TYPE_Q8_0, WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q5_K,
                                             WOOLLY_TYPE_Q6_K, WOOLLY_TYPE_Q2_K, WOOLLY_TYPE_Q3_K,
                                             WOOLLY_TYPE_IQ4_XS, WOOLLY_TYPE_Q4_0, WOOLLY_TYPE_Q4_1,
                                             WOOLLY_TYPE_Q5_0, WOOLLY_TYPE_Q5_1, WOOLLY_TYPE_IQ4_NL};
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
        for (int act = 0; act < WOOLLY_ACT_COUNT; act++)
            for (int op = WOOLLY_OP_GEMV; op <= WOOLLY_OP_GEMM && act != WOOLLY_ACT_Q8K; op++) {
                bool found = false;
                for (int j = 0; j < n; j++)
                    found |= ks[j].op == (enum woolly_op)op && ks[j].wtype == TYPES[t] &&
                             ks[j].act == (enum woolly_act)act && ks[j].isa == WOOLLY_ISA_SCALAR;
                cr_assert(found, "no scalar kernel for op %d, type %d, activations %s", op, TYPES[t],
                          woolly_act_name((enum woolly_act)act));
            }
}

Test(registry, forcing_an_unknown_activation_format_is_an_error)
{
    setenv("WOOLLY_ACT", "q4", 1);
    woolly_error err = {{0}};
    cr_assert_neq(woolly_isa_init(&err), 0);
    cr_assert(strstr(err.msg, "WOOLLY_ACT=q4"), "message: %s", err.msg);
}

Test(registry, forced_activation_format_is_reported)
{
    setenv("WOOLLY_ACT", "f16", 1);
    woolly_error err = {{0}};
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    cr_assert_eq(woolly_act_forced(), WOOLLY_ACT_F16);
}

Test(registry, layouts_are_listed_and_sized)
{
    int n;
    const woolly_layout *ls = woolly_layout_list(&n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(woolly_layout_by_name(ls[i].name), &ls[i]);
        cr_assert(ls[i].repack && ls[i].unpack && ls[i].rows > 1, "%s", ls[i].name);
        const int64_t block = woolly_type_get(ls[i].wtype)->block_elems;
        const size_t rb = woolly_layout_row_bytes(&ls[i], ls[i].wtype, 2 * block);
        cr_assert_eq(rb * (size_t)ls[i].rows, 2 * ls[i].block_bytes, "%s: two blocks' columns", ls[i].name);
        if (block > 1) /* the 16-bit floats' block is one value: any k is whole blocks */
            cr_assert_eq(woolly_layout_row_bytes(&ls[i], ls[i].wtype, block + block / 2), 0,
                         "%s: partial block accepted", ls[i].name);
    }
    cr_assert_null(woolly_layout_by_name("rows"));
    cr_assert_eq(woolly_layout_row_bytes(NULL, WOOLLY_TYPE_Q4_K, 512), 2 * 144);
}

Test(registry, names_say_what_a_kernel_is)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++) {
        char isa[32];
        snprintf(isa, sizeof isa, "_%s", woolly_isa_name(ks[i].isa));
        const char *at = strstr(ks[i].name, isa);
        cr_assert(at && (at[strlen(isa)] == '_' || at[strlen(isa)] == 0), "%s: name lacks its ISA token %s",
                  ks[i].name, isa);
        cr_assert(strstr(ks[i].name, op_token(ks[i].op)), "%s: name lacks its op token", ks[i].name);
        cr_assert_eq(woolly_kernel_by_name(ks[i].name), &ks[i], "%s: not found by name", ks[i].name);
        cr_assert((ks[i].matmul != NULL) + (ks[i].attn != NULL) + (ks[i].pack != NULL) == 1,
                  "%s: exactly one entry point", ks[i].name);
        if (ks[i].layout) {
            char lay[64];
            snprintf(lay, sizeof lay, "_%s_", strchr(ks[i].layout->name, '_') + 1);
            cr_assert(strstr(ks[i].name, lay), "%s: name lacks its layout token %s", ks[i].name, lay);
            cr_assert_eq(ks[i].layout->wtype, ks[i].wtype, "%s: layout of other weights", ks[i].name);
            cr_assert_eq(ks[i].tile_n % ks[i].layout->rows, 0, "%s: tile is not whole row groups",
                         ks[i].name);
        }
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(ks[i].name, ks[j].name, "kernel listed twice");
    }
    cr_assert_null(woolly_kernel_by_name("no_such_kernel"));
}

Test(registry, forced_scalar_chooses_the_scalar_kernels)
{
    setenv("WOOLLY_ISA", "scalar", 1);
    woolly_error err = {{0}};
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    cr_assert_eq(woolly_isa_active(), WOOLLY_ISA_SCALAR);
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++) {
        if (ks[i].op != WOOLLY_OP_GEMV && ks[i].op != WOOLLY_OP_GEMM)
            continue;
        const woolly_kernel *k = woolly_kernel_choose(ks[i].op, ks[i].wtype, ks[i].act, NULL);
        cr_assert_not_null(k);
        cr_assert_eq(k->isa, WOOLLY_ISA_SCALAR, "%s chosen under WOOLLY_ISA=scalar", k->name);
        if (ks[i].layout)
            cr_assert_null(woolly_kernel_choose(ks[i].op, ks[i].wtype, ks[i].act, ks[i].layout),
                           "%s: a kernel on a repacked layout chosen under WOOLLY_ISA=scalar", ks[i].name);
        const woolly_kernel *d = woolly_kernel_default_gemv(ks[i].wtype, -1);
        cr_assert(d && d->isa == WOOLLY_ISA_SCALAR && d->act == WOOLLY_ACT_F32 && !d->layout,
                  "default GEMV for %s under WOOLLY_ISA=scalar: %s", ks[i].name, d ? d->name : "none");
    }
}

/* The level this CPU runs without WOOLLY_ISA. */
static enum woolly_isa detected_level(void)
{
    unsetenv("WOOLLY_ISA");
    woolly_error err = {{0}};
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    return woolly_isa_active();
}

Test(registry, default_level_is_built_and_supported)
{
    const enum woolly_isa active = detected_level();
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    bool built = false;
    for (int i = 0; i < n; i++)
        built |= ks[i].isa == active;
    cr_assert(built, "active level %s has no kernels in this build", woolly_isa_name(active));
    const woolly_cpu *cpu = woolly_cpu_get();
    if (active == WOOLLY_ISA_AVX512)
        cr_assert(cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512vnni);
    if (active == WOOLLY_ISA_AVX2)
        cr_assert(cpu->avx2 && cpu->fma);
}

Test(registry, forcing_an_unknown_level_is_an_error)
{
    setenv("WOOLLY_ISA", "sse9", 1);
    woolly_error err = {{0}};
    cr_assert_neq(woolly_isa_init(&err), 0);
    cr_assert(strstr(err.msg, "WOOLLY_ISA=sse9") && strstr(err.msg, "unknown"), "message: %s", err.msg);
}

Test(registry, forcing_a_level_this_build_or_cpu_lacks_is_an_error)
{
#if defined(__aarch64__)
    const char *missing = "avx512";
#else
    const char *missing = "neon";
#endif
    setenv("WOOLLY_ISA", missing, 1);
    woolly_error err = {{0}};
    cr_assert_neq(woolly_isa_init(&err), 0, "WOOLLY_ISA=%s accepted", missing);
    cr_assert(strstr(err.msg, missing), "message: %s", err.msg);
}

Test(registry, hash_depends_on_the_names)
{
    cr_assert_neq(woolly_registry_hash(), 0ull);
    cr_assert_eq(woolly_registry_hash(), woolly_registry_hash());
}

Test(registry, attention_choice_respects_the_head_dimension)
{
    const int dims[] = {8, 64, 96, 128, 200, 256};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        for (int bf16 = 0; bf16 < 2; bf16++) {
            const woolly_kernel *k =
                woolly_kernel_choose_attn(WOOLLY_TYPE_F16, dims[d], bf16 ? WOOLLY_ACT_BF16 : WOOLLY_ACT_F32);
            cr_assert_not_null(k, "no F16 attention kernel for head_dim %d", dims[d]);
            cr_assert_eq(k->op, WOOLLY_OP_ATTN);
            cr_assert(k->head_dim == 0 || k->head_dim == dims[d], "%s serves head_dim %d, asked %d", k->name,
                      k->head_dim, dims[d]);
        }
    }
}

/* Which rounded tiles run for a head dimension at the level F32 tiles run at: head dimensions 64, 96, 128
 * and 256, BF16 tiles with AVX512-BF16 and FP16 P V tiles with AVX512-FP16 (not at 96 or 256) at the
 * AVX-512 level, int16 tiles at the AVX2 level. */
static bool rounded_tiles_run(enum woolly_act act, const woolly_kernel *f32, int dim)
{
    const unsigned have = woolly_cpu_get()->features;
    const bool tiled =
        woolly_isa_active() >= WOOLLY_ISA_AVX512 && f32->isa == WOOLLY_ISA_AVX512 && dim % 32 == 0;
    switch ((int)act) {
    case WOOLLY_ACT_BF16:
        return tiled && (have & WOOLLY_CPU_AVX512BF16);
    case WOOLLY_ACT_F16: /* none at head dimensions 96 and 256 (codegen/kernels.toml says why) */
        return tiled && (have & WOOLLY_CPU_AVX512FP16) && dim % 64 == 0 && dim != 256;
    case WOOLLY_ACT_I16:
        return f32->isa == WOOLLY_ISA_AVX2 && dim % 32 == 0;
    }
    return false;
}

/* Rounded tiles where they run and pay: at the amx level its BF16 tile products; else at the level the F32
 * ones would, the first format of this CPU's order (the spec's FP16 P V then int16, or its class's, e.g. BF16 first on AMD's AVX-512 cores) whose
 * tiles run; the F32 kernel everywhere else, and whenever F32 is asked. Checked for each class's order
 * too, faking a CPU of the class. */
static void check_rounded_attention(const char *what)
{
    const int dims[] = {8, 64, 96, 128, 200, 256};
    enum woolly_act order[3];
    const int n_order = woolly_kernel_attn_rounded_order(order);
    cr_assert(n_order >= 1 && n_order <= 3, "%s: %d rounded formats", what, n_order);
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const woolly_kernel *f32 = woolly_kernel_choose_attn(WOOLLY_TYPE_F16, dims[d], WOOLLY_ACT_F32);
        const woolly_kernel *r = woolly_kernel_choose_attn(WOOLLY_TYPE_F16, dims[d], WOOLLY_ACT_BF16);
        cr_assert(f32 && r);
        cr_assert_eq(f32->act, WOOLLY_ACT_F32, "%s asked for F32 tiles", f32->name);
        /* the amx level's BF16 tile products (head dimensions 64 and 128) come before the level below's */
        const unsigned have = woolly_cpu_get()->features;
        if (woolly_isa_active() == WOOLLY_ISA_AMX && (have & WOOLLY_CPU_AMXBF16) && (have & WOOLLY_CPU_AVX512BF16) &&
            (dims[d] == 64 || dims[d] == 128)) {
            cr_assert(r->isa == WOOLLY_ISA_AMX && r->act == WOOLLY_ACT_BF16 && woolly_kernel_is_default(r),
                      "%s, head_dim %d: %s, not the amx level's default BF16 tiles", what, dims[d], r->name);
            cr_assert_eq(woolly_kernel_choose_attn(WOOLLY_TYPE_F16, dims[d], WOOLLY_ACT_F16), r);
            continue;
        }
        cr_assert_eq(r->isa, f32->isa, "%s and %s: rounded tiles at another level", r->name, f32->name);
        int expect = WOOLLY_ACT_F32;
        for (int i = 0; i < n_order && expect == WOOLLY_ACT_F32; i++)
            if (rounded_tiles_run(order[i], f32, dims[d]))
                expect = (int)order[i];
        if (expect != WOOLLY_ACT_F32)
            cr_assert((int)r->act == expect && r->tile_m == f32->tile_m && r->tile_n == f32->tile_n,
                      "%s, head_dim %d: %s, not the %s twin of %s", what, dims[d], r->name,
                      woolly_act_name((enum woolly_act)expect), f32->name);
        else
            cr_assert_eq(r, f32, "%s, head_dim %d: %s where no rounded tiles run", what, dims[d], r->name);
        cr_assert_eq(woolly_kernel_choose_attn(WOOLLY_TYPE_F16, dims[d], WOOLLY_ACT_F16), r,
                     "head_dim %d: rounded is rounded, whichever format names it", dims[d]);
    }
}

Test(registry, attention_takes_rounded_tiles_only_where_asked_and_run)
{
    check_rounded_attention("this CPU");
    cr_assert_eq(woolly_attn_act(1u << WOOLLY_ACT_Q8 | 1u << WOOLLY_ACT_F32), WOOLLY_ACT_BF16);
    cr_assert_eq(woolly_attn_act(1u << WOOLLY_ACT_F16 | 1u << WOOLLY_ACT_F32), WOOLLY_ACT_F32);
    cr_assert_eq(woolly_attn_act(1u << WOOLLY_ACT_BF16 | 1u << WOOLLY_ACT_F32), WOOLLY_ACT_BF16);
    for (int c = 0; c < CC_N_CPUS; c++) {
        woolly_error err = {{0}};
        cr_assert_eq(woolly_kernel_defaults_for(CC_CPUS[c].signature, &err), 0, "%s", err.msg);
        check_rounded_attention(CC_CPUS[c].signature);
        /* the one-query path's L2 prefetch: off where its class measured the cache streaming faster
         * without it (zen5), the kernels' own distance elsewhere */
        const bool off = CC_CPUS[c].cls && !strcmp(CC_CPUS[c].cls, "zen5");
        cr_expect_eq(woolly_kernel_attn_decode_l2(), off ? WOOLLY_ATTN_NO_L2_PREFETCH : 0, "%s",
                     CC_CPUS[c].signature);
    }
}

/* Per (op, weights, ISA) of matmul kernels, on a CPU of each class (faked by its signature) and of none:
 * one default GEMV, one default GEMM and at most one small-batch GEMM default; each the kernel its class's
 * shipped profile names for the slot, the spec's default where it names none; and the kernel a run takes
 * where it runs at the active level. */
static void check_defaults_of_class(const char *signature, const char *cls)
{
    woolly_error err = {{0}};
    cr_assert_eq(woolly_kernel_defaults_for(signature, &err), 0, "%s", err.msg);
    const char *got = woolly_kernel_defaults_class();
    cr_assert(cls ? got && !strcmp(got, cls) : !got, "%s: class %s, expected %s", signature,
              got ? got : "none", cls ? cls : "none");
    woolly_class_profile p = {0};
    if (cls) {
        const woolly_shipped_profile *s = cc_shipped(cls);
        cr_assert_not_null(s, "class %s is not shipped", cls);
        cr_assert_eq(cc_parse(s, &p, &err), 0, "%s", err.msg);
    }
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++) {
        const woolly_kernel *k = &ks[i];
        if (k->op != WOOLLY_OP_GEMV && k->op != WOOLLY_OP_GEMM)
            continue;
        for (int small = 0; small < (k->op == WOOLLY_OP_GEMM ? 2 : 1); small++) {
            const enum woolly_tokens_class t = k->op == WOOLLY_OP_GEMV ? WOOLLY_TOKENS_1
                                               : small                 ? WOOLLY_TOKENS_SMALL
                                                                       : WOOLLY_TOKENS_LARGE;
            /* the profile's row for k's slot, if any */
            const woolly_kernel *row = NULL;
            for (int r = 0; r < p.n_defaults; r++)
                if (p.defaults[r].tokens == t && p.defaults[r].kernel->wtype == k->wtype &&
                    p.defaults[r].kernel->isa == k->isa)
                    row = p.defaults[r].kernel;
            const bool is = small ? woolly_kernel_is_small_default(k) : woolly_kernel_is_default(k);
            const bool spec = small ? k->is_small_default : k->is_default;
            cr_assert_eq(is, row ? row == k : spec, "%s (%s tokens), class %s: default %d, spec %d, row %s",
                         k->name, woolly_tokens_class_name(t), cls ? cls : "none", is, spec,
                         row ? row->name : "none");
            if (!row || row != k || woolly_isa_active() != k->isa || !woolly_kernel_runs(k))
                continue;
            if (t == WOOLLY_TOKENS_1)
                cr_assert_eq(woolly_kernel_default_gemv(k->wtype, -1), k, "%s is not the GEMV a run takes",
                             k->name);
            else if (t == WOOLLY_TOKENS_LARGE)
                cr_assert_eq(woolly_kernel_choose(WOOLLY_OP_GEMM, k->wtype, k->act, k->layout), k,
                             "%s is not the GEMM a prompt takes", k->name);
            else
                cr_assert_eq(woolly_kernel_choose_small(k->wtype, k->act, k->layout), k,
                             "%s is not the GEMM a run of a few tokens takes", k->name);
        }
    }
}

Test(registry, a_class_profile_replaces_the_defaults_of_its_rows_only)
{
    for (int c = 0; c < CC_N_CPUS; c++)
        check_defaults_of_class(CC_CPUS[c].signature, CC_CPUS[c].cls);
#if defined(__x86_64__)
    /* Intel cores keep the kernels measured faster there for one token, 2-16 and 17 and more */
    woolly_class_profile p;
    woolly_error err = {{0}};
    cr_assert_eq(cc_parse(cc_shipped("intel-spr"), &p, &err), 0, "%s", err.msg);
    int n_rows[WOOLLY_TOKENS_CLASSES] = {0};
    for (int r = 0; r < p.n_defaults; r++)
        n_rows[p.defaults[r].tokens]++;
    for (int t = 0; t < WOOLLY_TOKENS_CLASSES; t++)
        cr_expect_gt(n_rows[t], 0, "intel-spr names no default for %s tokens",
                     woolly_tokens_class_name((enum woolly_tokens_class)t));
#endif
}

Test(registry, this_cpu_takes_the_defaults_of_its_class)
{
    char sig[512], cls[WOOLLY_CLASS_NAME_MAX] = "";
    woolly_cpu_signature(sig, sizeof sig);
    for (int i = 0; i < woolly_n_shipped_profiles && !cls[0]; i++) {
        woolly_class_profile p;
        woolly_error err = {{0}};
        cr_assert_eq(cc_parse(&woolly_shipped_profiles[i], &p, &err), 0, "%s", err.msg);
        if (woolly_class_profile_matches(&p, sig))
            snprintf(cls, sizeof cls, "%s", p.name);
    }
    const char *got = woolly_kernel_defaults_class();
    cr_assert(cls[0] ? got && !strcmp(got, cls) : !got, "%s: class %s, the shipped profiles say %s", sig,
              got ? got : "none", cls[0] ? cls : "none");
}

Test(registry, a_forced_activation_format_stays_at_the_level_serving_the_weights)
{
    static const enum woolly_type TYPES[] = {WOOLLY_TYPE_F32,  WOOLLY_TYPE_F16,  WOOLLY_TYPE_BF16, WOOLLY_TYPE_Q8_0,
                                             WOOLLY_TYPE_Q4_K, WOOLLY_TYPE_Q5_K, WOOLLY_TYPE_Q6_K,
                                             WOOLLY_TYPE_Q4_0, WOOLLY_TYPE_Q4_1, WOOLLY_TYPE_Q5_0,
                                             WOOLLY_TYPE_Q5_1, WOOLLY_TYPE_IQ4_NL};
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        const woolly_kernel *d = woolly_kernel_default_gemv(TYPES[t], -1);
        cr_assert_not_null(d, "no default GEMV for type %d", TYPES[t]);
        for (int act = 0; act < WOOLLY_ACT_COUNT; act++) {
            const woolly_kernel *k = woolly_kernel_default_gemv(TYPES[t], act);
            if (act == (int)d->act)
                cr_assert_not_null(k, "%s: its own activation format not found", d->name);
            if (k)
                cr_assert(k->isa == d->isa && (int)k->act == act, "type %d, %s activations: %s, default %s",
                          TYPES[t], woolly_act_name((enum woolly_act)act), k->name, d->name);
        }
    }
}

/* The amx level's tile GEMMs are candidates (codegen/kernels.toml): a level with no default kernel comes
 * after the levels that have one, so at the amx level the avx512 level's defaults are chosen for every
 * slot where no profile makes a tile GEMM the default (a CPU class's shipped profile may, for its slot
 * alone: tune/defaults/intel-spr.profile does for BF16 weights); while the candidates of a level that has
 * defaults elsewhere still come before a lower level's default (Q4_K with F32 activations on GGUF rows:
 * avx512's candidates over the scalar default). Checked at whatever level this CPU (or this build's
 * emulation) runs. */
Test(registry, a_level_of_candidates_comes_after_the_levels_with_defaults)
{
    const enum woolly_isa active = detected_level();
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        if ((ks[i].op != WOOLLY_OP_GEMV && ks[i].op != WOOLLY_OP_GEMM) || !woolly_kernel_runs(&ks[i]))
            continue;
        const woolly_kernel *k = woolly_kernel_choose(ks[i].op, ks[i].wtype, ks[i].act, ks[i].layout);
        cr_assert(k && woolly_kernel_runs(k), "%s: its slot has no kernel that runs", ks[i].name);
        if (active != WOOLLY_ISA_AMX || ks[i].isa != WOOLLY_ISA_AMX)
            continue;
        const woolly_kernel *amx_default = NULL; /* of this slot, from a class profile */
        bool slot_default = false;                /* at any level this CPU runs */
        bool default_above = false;               /* at a level above the chosen kernel's */
        for (int j = 0; j < n; j++)
            if (ks[j].op == ks[i].op && ks[j].wtype == ks[i].wtype && ks[j].act == ks[i].act &&
                ks[j].layout == ks[i].layout && woolly_kernel_runs(&ks[j]) && woolly_kernel_is_default(&ks[j])) {
                slot_default = true;
                default_above |= ks[j].isa != k->isa && woolly_isa_runs_at(k->isa, ks[j].isa);
                if (ks[j].isa == WOOLLY_ISA_AMX)
                    amx_default = &ks[j];
            }
        if (amx_default) {
            cr_expect_eq(k, amx_default, "%s's slot took %s, not its amx default %s", ks[i].name, k->name,
                         amx_default->name);
        } else {
            /* (a slot with no default at any level, such as q8k's tile GEMMs, takes its best candidate) */
            cr_expect(k->isa != WOOLLY_ISA_AMX || !slot_default, "%s chosen for its slot over the avx512 level's default",
                      k->name);
            /* (the candidates of a level with defaults elsewhere come before a lower level's default: F16
             * weights on GGUF rows take avx512's 4x6, whose defaults are in the 16-row layout) */
            cr_expect(woolly_kernel_is_default(k) || !default_above, "%s's slot took %s, not its default",
                      ks[i].name, k->name);
        }
        checked++;
    }
    if (active == WOOLLY_ISA_AMX)
        cr_assert_gt(checked, 0, "the amx level active and no tile GEMM checked");
    if (woolly_isa_runs_at(WOOLLY_ISA_AVX512, active)) {
        const woolly_kernel *k = woolly_kernel_choose(WOOLLY_OP_GEMM, WOOLLY_TYPE_Q4_K, WOOLLY_ACT_F32, NULL);
        cr_assert(k && k->isa == WOOLLY_ISA_AVX512, "Q4_K x F32 on GGUF rows at %s: %s", woolly_isa_name(active),
                  k ? k->name : "none");
    }
}
