#include "registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "class_profile.h"
#include "cpu.h"

/* Declarations of every generated entry point. */
#define WOOLLY_LAYOUT(name, wtype, rows, block, kind)                                                        \
    void woolly_repack_##name(const woolly_repack_args *a);                                                  \
    void woolly_unpack_##name(const void *w, size_t w_row_bytes, int64_t k, int64_t r, void *row);
#define WOOLLY_MATMUL_KERNEL(name, op, wtype, act, isa, tm, tn, layout, features, is_default, min_tokens)    \
    void woolly_##name(const woolly_matmul_args *a);
#define WOOLLY_ATTN_KERNEL(name, ctype, act, isa, hd, bq, bk, features, is_default)                          \
    void woolly_##name(const woolly_attn_args *a);
#define WOOLLY_PACK_KERNEL(name, act, isa, features) void woolly_##name(const float *x, int64_t k, void *dst);
#define WOOLLY_OPS_KERNEL(name, op, isa, features) OPS_DECL_##op(name)
#define OPS_DECL_swiglu(name) void woolly_##name(float *gate, const float *up, int64_t n);
#define OPS_DECL_geglu(name) void woolly_##name(float *gate, const float *up, int64_t n);
#define OPS_DECL_rmsnorm(name)                                                                               \
    void woolly_##name(float *out, const float *x, const float *w, int64_t n, float eps);
#include "kernels.inc"

/* Layouts by index: GGUF rows is no layout (NULL), the others are LAYOUTS[LAYOUT_<name> - 1]. */
enum {
    LAYOUT_rows = 0,
#define WOOLLY_LAYOUT(name, wtype, rows, block, kind) LAYOUT_##name,
#include "kernels.inc"
    LAYOUT_END
};

static const woolly_layout LAYOUTS[LAYOUT_END] = {
    {0},
#define WOOLLY_LAYOUT(name, wtype, rows, block, kind)                                                        \
    {#name, wtype, rows, sizeof(block), woolly_repack_##name, woolly_unpack_##name, kind},
#include "kernels.inc"
};

#define LAYOUT_PTR(layout) (LAYOUT_##layout ? &LAYOUTS[LAYOUT_##layout] : NULL)

/* A matmul kernel's default bits (kernels.inc): 1 the spec's default of its op, 2 its default for 2-16
 * tokens. */
#define IS_DEFAULT(bits) (((bits)&1) != 0)
#define IS_SMALL_DEFAULT(bits) (((bits)&2) != 0)

/* The spec's kernels with its portable defaults; this CPU's defaults are g_defaults'. */
static const woolly_kernel KERNELS[] = {
#define WOOLLY_MATMUL_KERNEL(kname, op_, wtype_, act_, isa_, tm, tn, layout_, features_, bits, min_tokens_)  \
    {.name = #kname,                                                                                         \
     .op = op_,                                                                                              \
     .wtype = wtype_,                                                                                        \
     .act = act_,                                                                                            \
     .isa = isa_,                                                                                            \
     .tile_m = tm,                                                                                           \
     .tile_n = tn,                                                                                           \
     .layout = LAYOUT_PTR(layout_),                                                                          \
     .features = features_,                                                                                  \
     .is_default = IS_DEFAULT(bits),                                                                         \
     .is_small_default = IS_SMALL_DEFAULT(bits),                                                             \
     .min_tokens = min_tokens_,                                                                              \
     .matmul = woolly_##kname},
#define WOOLLY_ATTN_KERNEL(kname, ctype, act_, isa_, hd, bq, bk, features_, is_default_)                     \
    {.name = #kname,                                                                                         \
     .op = WOOLLY_OP_ATTN,                                                                                   \
     .wtype = ctype,                                                                                         \
     .act = act_,                                                                                            \
     .isa = isa_,                                                                                            \
     .tile_m = bq,                                                                                           \
     .tile_n = bk,                                                                                           \
     .head_dim = hd,                                                                                         \
     .features = features_,                                                                                  \
     .is_default = is_default_,                                                                              \
     .attn = woolly_##kname},
#define WOOLLY_PACK_KERNEL(kname, act_, isa_, features_)                                                     \
    {.name = #kname,                                                                                         \
     .op = WOOLLY_OP_PACK,                                                                                   \
     .wtype = WOOLLY_TYPE_F32,                                                                               \
     .act = act_,                                                                                            \
     .isa = isa_,                                                                                            \
     .tile_m = 1,                                                                                            \
     .tile_n = 1,                                                                                            \
     .features = features_,                                                                                  \
     .pack = woolly_##kname},
#include "kernels.inc"
/* The small ops after all the others: the listed kernels (woolly_kernel_list) end before them. */
#define WOOLLY_OPS_KERNEL(kname, op_, isa_, features_)                                                       \
    {.name = #kname,                                                                                         \
     .op = OPS_OP_##op_,                                                                                     \
     .wtype = WOOLLY_TYPE_F32,                                                                               \
     .act = WOOLLY_ACT_F32,                                                                                  \
     .isa = isa_,                                                                                            \
     .tile_m = 1,                                                                                            \
     .tile_n = 1,                                                                                            \
     .features = features_,                                                                                  \
     OPS_FN_##op_(kname)},
#define OPS_OP_swiglu WOOLLY_OP_SWIGLU
#define OPS_OP_rmsnorm WOOLLY_OP_RMSNORM
#define OPS_OP_geglu WOOLLY_OP_GEGLU
#define OPS_FN_swiglu(kname) .swiglu = woolly_##kname
#define OPS_FN_rmsnorm(kname) .rmsnorm = woolly_##kname
#define OPS_FN_geglu(kname) .geglu = woolly_##kname
#include "kernels.inc"
};
enum {
    N_KERNELS = sizeof KERNELS / sizeof KERNELS[0],
    N_OPS = 0
#define WOOLLY_OPS_KERNEL(name, op, isa, features) +1
#include "kernels.inc"
    ,
    N_LISTED = N_KERNELS - N_OPS
};

static const char *const ACT_NAMES[WOOLLY_ACT_COUNT] = {"f32", "f16", "q8", "bf16", "q8k"};

const char *woolly_act_name(enum woolly_act act)
{
    return (unsigned)act < WOOLLY_ACT_COUNT ? ACT_NAMES[act] : act == WOOLLY_ACT_I16 ? "i16" : "?";
}

/* The highest level the CPU supports: the last of the table it has the fields for (a level of another
 * processor never is). */
static enum woolly_isa cpu_level(void)
{
    enum woolly_isa best = WOOLLY_ISA_REFERENCE;
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
        if (woolly_isa_cpu_has(woolly_cpu_get(), (enum woolly_isa)i))
            best = (enum woolly_isa)i;
    return best;
}

/* Whether this build compiled any kernel of `isa`. */
static bool built(enum woolly_isa isa)
{
    for (int i = 0; i < N_KERNELS; i++)
        if (KERNELS[i].isa == isa)
            return true;
    return false;
}

static struct {
    pthread_mutex_t lock;
    bool done;
    int rc;
    enum woolly_isa active;
    int act; /* forced activation format, -1 for none */
    woolly_error err;
} g_isa = {PTHREAD_MUTEX_INITIALIZER, false, 0, WOOLLY_ISA_REFERENCE, -1, {{0}}};

static int decide_act(woolly_error *err)
{
    const char *forced = getenv("WOOLLY_ACT");
    if (!forced || !*forced)
        return 0;
    for (int i = 0; i < WOOLLY_ACT_COUNT; i++)
        if (!strcmp(forced, ACT_NAMES[i])) {
            g_isa.act = i;
            return 0;
        }
    return woolly_fail(err, "WOOLLY_ACT=%s: unknown activation format (use f32, f16, q8, bf16 or q8k)", forced);
}

static int decide(woolly_error *err)
{
    const enum woolly_isa level = cpu_level();
    const char *forced = getenv("WOOLLY_ISA");
    if (!forced || !*forced) {
        /* Highest level that is both compiled and supported. */
        enum woolly_isa best = WOOLLY_ISA_REFERENCE;
        for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
            if (built((enum woolly_isa)i) && woolly_isa_runs_at((enum woolly_isa)i, level))
                best = (enum woolly_isa)i;
        g_isa.active = best;
        return decide_act(err);
    }
    const int i = woolly_isa_from_name(forced);
    if (i < 0) {
        char names[256];
        woolly_isa_names(names, sizeof names);
        return woolly_fail(err, "WOOLLY_ISA=%s: unknown level (use %s)", forced, names);
    }
    if (!built((enum woolly_isa)i))
        return woolly_fail(err, "WOOLLY_ISA=%s: this build has no %s kernels", forced, forced);
    if (!woolly_isa_runs_at((enum woolly_isa)i, level))
        return woolly_fail(err, "WOOLLY_ISA=%s: this CPU does not support %s (it supports up to %s)", forced,
                           forced, woolly_isa_name(level));
    g_isa.active = (enum woolly_isa)i;
    return decide_act(err);
}

/* This CPU's defaults: the spec's portable ones, with the rows of the shipped default profile of the CPU
 * class it belongs to in their place (class_profile.h), for the run, the tuner's baseline and
 * `info --kernels` alike. Resolved once, with the ISA level. */
static struct {
    bool resolved;
    char class_name[WOOLLY_CLASS_NAME_MAX]; /* "" without a class */
    bool is_default[N_KERNELS], is_small_default[N_KERNELS];
    enum woolly_act rounded_attn[WOOLLY_CLASS_MAX_ROUNDED];
    int n_rounded_attn;
    int32_t attn_decode_l2; /* woolly_attn_args.decode_l2_blocks: 0 the kernels' own */
} g_defaults;

/* The spec's order of rounded attention tiles: FP16 P V tiles wherever they run, then int16 tiles (the
 * AVX2 level). FP16 P V tiles need AVX512-FP16, so far Intel's (Sapphire Rapids and later), where
 * vfmadd231ph issues at the F32 FMA rate on twice the lanes: on an Intel Xeon (family 6, model 207) 32x64
 * tiles gave 125.2 prefill GFLOP/s against 114.7 for F32 ones (codegen/kernels.toml has the figures).
 * BF16 tiles come first only where a class's profile measured them to pay (tune/defaults/). */
static const enum woolly_act SPEC_ROUNDED_ATTN[] = {WOOLLY_ACT_F16, WOOLLY_ACT_I16};

static void apply_class(const woolly_class_profile *p)
{
    snprintf(g_defaults.class_name, sizeof g_defaults.class_name, "%s", p->name);
    for (int r = 0; r < p->n_defaults; r++) {
        const woolly_kernel *v = p->defaults[r].kernel;
        const enum woolly_tokens_class t = p->defaults[r].tokens;
        for (int j = 0; j < N_KERNELS; j++) {
            const woolly_kernel *k = &KERNELS[j];
            if (k->op != v->op || k->wtype != v->wtype || k->isa != v->isa)
                continue;
            if (t == WOOLLY_TOKENS_SMALL)
                g_defaults.is_small_default[j] = k == v;
            else
                g_defaults.is_default[j] = k == v;
        }
    }
    if (p->n_rounded_attn) {
        g_defaults.n_rounded_attn = p->n_rounded_attn;
        memcpy(g_defaults.rounded_attn, p->rounded_attn, sizeof p->rounded_attn);
    }
    g_defaults.attn_decode_l2 = p->attn_decode_l2;
}

static void spec_defaults(void)
{
    for (int i = 0; i < N_KERNELS; i++) {
        g_defaults.is_default[i] = KERNELS[i].is_default;
        g_defaults.is_small_default[i] = KERNELS[i].is_small_default;
    }
    g_defaults.class_name[0] = 0;
    g_defaults.n_rounded_attn = sizeof SPEC_ROUNDED_ATTN / sizeof SPEC_ROUNDED_ATTN[0];
    memcpy(g_defaults.rounded_attn, SPEC_ROUNDED_ATTN, sizeof SPEC_ROUNDED_ATTN);
    g_defaults.attn_decode_l2 = 0;
    g_defaults.resolved = true;
}

/* The defaults of the class of a CPU with this signature (NULL: this CPU). Called with g_isa.lock held. */
static int resolve_defaults(const char *signature, woolly_error *err)
{
    spec_defaults();
    char sig[512];
    if (!signature) {
        woolly_cpu_signature(sig, sizeof sig);
        signature = sig;
    }
    for (int i = 0; i < woolly_n_shipped_profiles; i++) {
        const woolly_shipped_profile *s = &woolly_shipped_profiles[i];
        woolly_class_profile p;
        if (woolly_class_profile_parse(s->text, s->len, s->file, KERNELS, N_KERNELS, &p, err))
            return -1; /* the spec's defaults stand */
        if (woolly_class_profile_matches(&p, signature)) {
            apply_class(&p);
            break;
        }
    }
    return 0;
}

int woolly_isa_init(woolly_error *err)
{
    pthread_mutex_lock(&g_isa.lock);
    if (!g_isa.done) {
        woolly_error why = {{0}};
        const int rc_defaults = g_defaults.resolved ? 0 : resolve_defaults(NULL, &why);
        g_isa.rc = decide(&g_isa.err);
        if (!g_isa.rc && rc_defaults) {
            g_isa.rc = rc_defaults;
            woolly_fail(&g_isa.err, "shipped default profile %s", why.msg);
        }
        g_isa.done = true;
    }
    const int rc = g_isa.rc;
    if (rc && err)
        *err = g_isa.err;
    pthread_mutex_unlock(&g_isa.lock);
    return rc;
}

int woolly_kernel_defaults_for(const char *cpu_signature, woolly_error *err)
{
    pthread_mutex_lock(&g_isa.lock);
    const int rc = resolve_defaults(cpu_signature, err);
    pthread_mutex_unlock(&g_isa.lock);
    return rc;
}

int woolly_kernel_defaults_from(const char *text, size_t len, const char *path, woolly_error *err)
{
    woolly_class_profile p;
    pthread_mutex_lock(&g_isa.lock);
    const int rc = woolly_class_profile_parse(text, len, path, KERNELS, N_KERNELS, &p, err);
    if (!rc) {
        spec_defaults();
        apply_class(&p);
    }
    pthread_mutex_unlock(&g_isa.lock);
    return rc;
}

const char *woolly_kernel_defaults_class(void)
{
    woolly_isa_init(NULL);
    return g_defaults.class_name[0] ? g_defaults.class_name : NULL;
}

/* Whether k (a kernel of KERNELS) is this CPU's default of its slot; for 2-16 tokens of a GEMM. */
static bool is_default(const woolly_kernel *k)
{
    return g_defaults.is_default[k - KERNELS];
}

static bool is_small_default(const woolly_kernel *k)
{
    return g_defaults.is_small_default[k - KERNELS];
}

static bool listed(const woolly_kernel *k)
{
    return k >= KERNELS && k < KERNELS + N_KERNELS;
}

bool woolly_kernel_is_default(const woolly_kernel *k)
{
    woolly_isa_init(NULL);
    return listed(k) && is_default(k);
}

bool woolly_kernel_is_small_default(const woolly_kernel *k)
{
    woolly_isa_init(NULL);
    return listed(k) && is_small_default(k);
}

int woolly_kernel_attn_rounded_order(enum woolly_act out[3])
{
    woolly_isa_init(NULL);
    memcpy(out, g_defaults.rounded_attn, (size_t)g_defaults.n_rounded_attn * sizeof *out);
    return g_defaults.n_rounded_attn;
}

int32_t woolly_kernel_attn_decode_l2(void)
{
    woolly_isa_init(NULL);
    return g_defaults.attn_decode_l2;
}

enum woolly_isa woolly_isa_active(void)
{
    woolly_isa_init(NULL);
    return g_isa.active;
}

int woolly_act_forced(void)
{
    woolly_isa_init(NULL);
    return g_isa.act;
}

const woolly_kernel *woolly_kernel_list(int *n)
{
    woolly_isa_init(NULL); /* the defaults are this CPU's */
    *n = N_LISTED;
    return KERNELS;
}

const woolly_kernel *woolly_kernel_by_name(const char *name)
{
    woolly_isa_init(NULL);
    for (int i = 0; i < N_LISTED; i++)
        if (!strcmp(KERNELS[i].name, name))
            return &KERNELS[i];
    return NULL;
}

const woolly_layout *woolly_layout_list(int *n)
{
    *n = LAYOUT_END - 1;
    return LAYOUTS + 1;
}

const woolly_layout *woolly_layout_by_name(const char *name)
{
    for (int i = 1; i < LAYOUT_END; i++)
        if (!strcmp(LAYOUTS[i].name, name))
            return &LAYOUTS[i];
    return NULL;
}

size_t woolly_layout_row_bytes(const woolly_layout *l, enum woolly_type type, int64_t k)
{
    if (!l)
        return woolly_row_bytes(type, k);
    const woolly_type_info *ti = woolly_type_get(l->wtype);
    if (!ti || l->wtype != type || k <= 0 || k % ti->block_elems)
        return 0;
    return (size_t)(k / ti->block_elems) * l->block_bytes / (size_t)l->rows;
}

bool woolly_kernel_runs(const woolly_kernel *k)
{
    return woolly_isa_runs_at(k->isa, woolly_isa_active()) && (k->features & ~woolly_cpu_get()->features) == 0;
}

/* Among the runnable kernels that `match` accepts: the highest level (the greatest: a level comes after
 * those it nests in), and at it the default, else the first listed. */
static const woolly_kernel *best_of(bool (*match)(const woolly_kernel *, const void *), const void *ctx)
{
    woolly_isa_init(NULL); /* before `match` reads a default: this CPU's are resolved there */
    /* A level none of whose kernels of a kind (GEMV, GEMM, attention, ...) the spec makes a default (the
     * amx level's tile GEMMs are candidates: codegen/kernels.toml) is a level of candidates for that kind:
     * its kernels come after any other level's, so that
     * they do not displace the defaults of the level they nest in until a tuning profile chooses them,
     * or a CPU class's shipped profile makes one the default of its slot (tune/defaults/), which puts
     * the level first for that slot alone. */
    bool has_default[WOOLLY_ISA_COUNT][WOOLLY_OP_KINDS] = {{false}}; /* a level's kind of kernel */
    for (int i = 0; i < N_KERNELS; i++)
        if (KERNELS[i].is_default || KERNELS[i].is_small_default)
            has_default[KERNELS[i].isa][KERNELS[i].op] = true;
    for (int i = 0; i < N_KERNELS; i++)
        if ((is_default(&KERNELS[i]) || is_small_default(&KERNELS[i])) && match(&KERNELS[i], ctx))
            has_default[KERNELS[i].isa][KERNELS[i].op] = true;
    const woolly_kernel *best = NULL;
    for (int i = 0; i < N_KERNELS; i++) {
        const woolly_kernel *k = &KERNELS[i];
        if (!match(k, ctx) || !woolly_kernel_runs(k))
            continue;
        const bool kd = has_default[k->isa][k->op], bd = best && has_default[best->isa][best->op];
        if (!best || (kd && !bd) ||
            (kd == bd &&
             (k->isa > best->isa || (k->isa == best->isa && is_default(k) && !is_default(best)))))
            best = k;
    }
    return best;
}

typedef struct slot {
    enum woolly_op op;
    enum woolly_type wtype;
    int act; /* -1: any */
    const woolly_layout *layout;
    bool any_layout;
    int head_dim; /* attention; -1 any */
    int isa;      /* -1: any level */
} slot;

static bool slot_match(const woolly_kernel *k, const void *ctx)
{
    const slot *s = ctx;
    if (k->op != s->op || k->wtype != s->wtype || (s->act >= 0 && (int)k->act != s->act))
        return false;
    if ((!s->any_layout && k->layout != s->layout) || (s->isa >= 0 && (int)k->isa != s->isa))
        return false;
    return s->head_dim < 0 || k->head_dim == 0 || k->head_dim == s->head_dim;
}

const woolly_kernel *woolly_kernel_choose(enum woolly_op op, enum woolly_type wtype, enum woolly_act act,
                                          const woolly_layout *layout)
{
    const slot s = {op, wtype, (int)act, layout, false, -1, -1};
    return best_of(slot_match, &s);
}

const woolly_kernel *woolly_kernel_choose_small(enum woolly_type wtype, enum woolly_act act,
                                                const woolly_layout *layout)
{
    const woolly_kernel *gemm = woolly_kernel_choose(WOOLLY_OP_GEMM, wtype, act, layout);
    /* At the GEMM's level, else the nearest it nests in (the amx level's tile GEMMs have no small-batch
     * tiles: 2-16 tokens stay on the avx512 level's, as decode stays on its GEMV). */
    for (int isa = gemm ? (int)gemm->isa : -1; isa >= 0;) {
        for (int i = 0; i < N_KERNELS; i++) {
            const woolly_kernel *k = &KERNELS[i];
            if (is_small_default(k) && k->op == WOOLLY_OP_GEMM && k->wtype == wtype && k->act == act &&
                k->layout == layout && (int)k->isa == isa && woolly_kernel_runs(k))
                return k;
        }
        const int below = (int)woolly_isa_nests_in((enum woolly_isa)isa);
        isa = below == isa ? -1 : below;
    }
    return gemm;
}

/* The default GEMV (act < 0) only: the spec's default at the highest level with kernels for wtype. */
static bool default_gemv_match(const woolly_kernel *k, const void *ctx)
{
    const enum woolly_type *wtype = ctx;
    if (k->op != WOOLLY_OP_GEMV || k->wtype != *wtype)
        return false;
    /* A level's default, or a kernel of a level whose default this CPU lacks features for. */
    return is_default(k);
}

const woolly_kernel *woolly_kernel_default_gemv(enum woolly_type wtype, int act)
{
    const woolly_kernel *k = best_of(default_gemv_match, &wtype);
    if (!k) { /* the defaults need features this CPU lacks: the best of anything */
        const slot s = {WOOLLY_OP_GEMV, wtype, -1, NULL, true, -1, -1};
        k = best_of(slot_match, &s);
    }
    if (act >= 0 && k) {
        /* Only at the level that serves these weights: forcing a format never pulls a matrix down to a
         * lower level's kernels (an int8 path on F32 weights exists only as the scalar reference). */
        const slot s = {WOOLLY_OP_GEMV, wtype, act, NULL, true, -1, (int)k->isa};
        return best_of(slot_match, &s);
    }
    return k;
}

const woolly_kernel *woolly_kernel_choose_attn(enum woolly_type cache, int head_dim, enum woolly_act act)
{
    const slot s = {WOOLLY_OP_ATTN, cache, WOOLLY_ACT_F32, NULL, false, head_dim, -1};
    const woolly_kernel *f32 = best_of(slot_match, &s);
    if (act == WOOLLY_ACT_F32 || !f32)
        return f32;
    /* Rounded operands. A level above the F32 tiles' one, whose tiles are rounded only (amx: BF16 tile
     * products), comes first with its default, as a level's kernels come before those of the level it
     * nests in. */
    for (enum woolly_isa l = woolly_isa_active(); l != f32->isa && l != woolly_isa_nests_in(l);
         l = woolly_isa_nests_in(l)) {
        const slot s = {WOOLLY_OP_ATTN, cache, -1, NULL, false, head_dim, (int)l};
        const woolly_kernel *k = best_of(slot_match, &s);
        if (k && is_default(k))
            return k;
    }
    /* Then only the level F32 tiles would run at (a lower level's never win over them): the first format
     * of this CPU's order whose tiles run there, else F32. */
    const woolly_kernel *k = NULL;
    for (int i = 0; !k && i < g_defaults.n_rounded_attn; i++) {
        const int fmt = (int)g_defaults.rounded_attn[i];
        const slot s = {WOOLLY_OP_ATTN, cache, fmt, NULL, false, head_dim, (int)f32->isa};
        k = best_of(slot_match, &s);
    }
    return k ? k : f32;
}

enum woolly_act woolly_attn_act(unsigned matmul_acts)
{
    return matmul_acts & (1u << WOOLLY_ACT_Q8 | 1u << WOOLLY_ACT_BF16) ? WOOLLY_ACT_BF16 : WOOLLY_ACT_F32;
}

const woolly_kernel *woolly_kernel_choose_pack(enum woolly_act act)
{
    if (act == WOOLLY_ACT_F32)
        return NULL;
    const slot s = {WOOLLY_OP_PACK, WOOLLY_TYPE_F32, (int)act, NULL, false, -1, -1};
    return best_of(slot_match, &s);
}

const woolly_kernel *woolly_kernel_choose_ops(enum woolly_op op, int isa)
{
    const slot s = {op, WOOLLY_TYPE_F32, WOOLLY_ACT_F32, NULL, false, -1, isa};
    return best_of(slot_match, &s);
}

unsigned long long woolly_registry_hash(void)
{
    unsigned long long h = 1469598103934665603ull; /* FNV-1a over the names, in order */
    for (int i = 0; i < N_LISTED; i++) {
        for (const char *p = KERNELS[i].name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0xFF) * 1099511628211ull;
    }
    return h;
}
