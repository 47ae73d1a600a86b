/* The ISA level table generated from the spec (isa.h): the levels profiles and WOOLLY_ISA name, their
 * nesting and CPU predicates, every kernel's level in it; the small ops chosen through the registry
 * like the other kernels; and the two hooks for levels to come: a level's per-thread setup, run once
 * on each thread of the pool, and a weight layout of the tiles kind round-tripping through its repack
 * and unpack routines. (Criterion runs each test in its own process: each sees a fresh registry, its
 * own environment and fresh threads.) */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "small_ops.h"
#include "testutil.h"
#include "threadpool.h"

/* ---- the table ---------------------------------------------------------------------------------- */

Test(isa_levels, keep_the_names_and_values_profiles_record)
{
    /* Profiles, repack caches and WOOLLY_ISA name these; their enum values index tables elsewhere. */
    static const char *const KNOWN[] = {"scalar", "avx2", "avx512", "neon"};
    static const enum woolly_isa VALUES[] = {WOOLLY_ISA_SCALAR, WOOLLY_ISA_AVX2, WOOLLY_ISA_AVX512,
                                             WOOLLY_ISA_NEON};
    cr_assert_geq(WOOLLY_ISA_COUNT, 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq((int)VALUES[i], i);
        cr_assert_str_eq(woolly_isa_name(VALUES[i]), KNOWN[i]);
    }
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++) {
        cr_assert_eq(woolly_isa_from_name(woolly_isa_name((enum woolly_isa)i)), i, "%s",
                     woolly_isa_name((enum woolly_isa)i));
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(woolly_isa_name((enum woolly_isa)i), woolly_isa_name((enum woolly_isa)j));
    }
    cr_assert_eq(woolly_isa_from_name("sse9"), -1);
    cr_assert_eq(woolly_isa_from_name(""), -1);
    cr_assert_str_eq(woolly_isa_name(WOOLLY_ISA_COUNT), "?");
}

Test(isa_levels, nest_in_one_reference_level_listed_before_them)
{
    cr_assert_eq(WOOLLY_ISA_REFERENCE, WOOLLY_ISA_SCALAR);
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++) {
        const enum woolly_isa l = (enum woolly_isa)i, below = woolly_isa_nests_in(l);
        cr_assert_eq(below == l, l == WOOLLY_ISA_REFERENCE, "%s nests in %s", woolly_isa_name(l),
                     woolly_isa_name(below));
        if (l != WOOLLY_ISA_REFERENCE) {
            /* The registry's "highest level" is the greatest value: a level is listed after its base. */
            cr_assert_lt(below, l, "%s is listed before %s, which it nests in", woolly_isa_name(l),
                         woolly_isa_name(below));
            cr_assert(woolly_isa_runs_at(below, l), "%s's kernels do not run at %s", woolly_isa_name(below),
                      woolly_isa_name(l));
            cr_assert(!woolly_isa_runs_at(l, below), "%s's kernels run at %s", woolly_isa_name(l),
                      woolly_isa_name(below));
        }
        cr_assert(woolly_isa_runs_at(l, l));
        cr_assert(woolly_isa_runs_at(WOOLLY_ISA_REFERENCE, l), "scalar kernels do not run at %s",
                  woolly_isa_name(l));
    }
    /* The nesting the levels had before the table, now read from it. */
    cr_assert(woolly_isa_runs_at(WOOLLY_ISA_AVX2, WOOLLY_ISA_AVX512));
    cr_assert(woolly_isa_runs_at(WOOLLY_ISA_SCALAR, WOOLLY_ISA_AVX512));
    cr_assert(!woolly_isa_runs_at(WOOLLY_ISA_AVX2, WOOLLY_ISA_NEON));
    cr_assert(!woolly_isa_runs_at(WOOLLY_ISA_NEON, WOOLLY_ISA_AVX512));
    cr_assert(!woolly_isa_runs_at(WOOLLY_ISA_COUNT, WOOLLY_ISA_SCALAR));
}

/* The predicates, on CPUs made up of the table's own fields: a CPU with none supports the reference
 * level only, and granting a level's fields (and its bases') supports it. */
Test(isa_levels, cpu_predicates_read_the_required_fields)
{
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++) {
        const enum woolly_isa l = (enum woolly_isa)i;
        woolly_cpu none = {0};
        cr_assert_eq(woolly_isa_cpu_has(&none, l), l == WOOLLY_ISA_REFERENCE,
                     "%s on a CPU without any field: a level must require something", woolly_isa_name(l));
        woolly_cpu own = {0};
        woolly_isa_cpu_grant(&own, l);
        cr_assert(l == WOOLLY_ISA_REFERENCE || woolly_isa_nests_in(l) == WOOLLY_ISA_REFERENCE ||
                      !woolly_isa_cpu_has(&own, l),
                  "%s supported without the level it nests in", woolly_isa_name(l));
        woolly_cpu chain = {0};
        for (enum woolly_isa b = l;; b = woolly_isa_nests_in(b)) {
            woolly_isa_cpu_grant(&chain, b);
            if (b == woolly_isa_nests_in(b))
                break;
        }
        cr_assert(woolly_isa_cpu_has(&chain, l), "%s not supported with its fields granted", woolly_isa_name(l));
    }
    /* This CPU: whatever it supports, it supports what that nests in; the active level is supported. */
    const woolly_cpu *cpu = woolly_cpu_get();
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
        if (woolly_isa_cpu_has(cpu, (enum woolly_isa)i))
            cr_assert(woolly_isa_cpu_has(cpu, woolly_isa_nests_in((enum woolly_isa)i)));
    cr_assert(woolly_isa_cpu_has(cpu, woolly_isa_active()), "active level %s", woolly_isa_name(woolly_isa_active()));
}

Test(isa_levels, every_kernel_has_a_level_of_the_table)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    for (int i = 0; i < n; i++)
        cr_assert_lt((unsigned)ks[i].isa, (unsigned)WOOLLY_ISA_COUNT, "%s", ks[i].name);
    const enum woolly_op OPS[] = {WOOLLY_OP_SWIGLU, WOOLLY_OP_RMSNORM, WOOLLY_OP_GEGLU};
    for (int o = 0; o < 3; o++)
        for (int l = 0; l < WOOLLY_ISA_COUNT; l++) {
            const woolly_kernel *k = woolly_kernel_choose_ops(OPS[o], l);
            if (k)
                cr_assert(k->isa == (enum woolly_isa)l && strstr(k->name, woolly_isa_name(k->isa)), "%s", k->name);
        }
}

Test(isa_levels, an_unknown_forced_level_lists_the_table)
{
    setenv("WOOLLY_ISA", "sse9", 1);
    woolly_error err = {{0}};
    cr_assert_neq(woolly_isa_init(&err), 0);
    char names[256];
    woolly_isa_names(names, sizeof names);
    cr_assert(strstr(err.msg, names), "message: %s (levels: %s)", err.msg, names);
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
        cr_assert(strstr(names, woolly_isa_name((enum woolly_isa)i)), "%s lacks %s", names,
                  woolly_isa_name((enum woolly_isa)i));
    cr_assert(strstr(names, " or "), "%s", names);
}

Test(isa_levels, a_forced_level_is_the_active_one)
{
    setenv("WOOLLY_ISA", "scalar", 1);
    woolly_error err = {{0}};
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    cr_assert_eq(woolly_isa_active(), WOOLLY_ISA_SCALAR);
    cr_assert_eq(woolly_kernel_choose_ops(WOOLLY_OP_SWIGLU, -1)->isa, WOOLLY_ISA_SCALAR);
    for (int l = 1; l < WOOLLY_ISA_COUNT; l++)
        cr_assert_null(woolly_kernel_choose_ops(WOOLLY_OP_RMSNORM, l), "%s ops at the scalar level",
                       woolly_isa_name((enum woolly_isa)l));
}

/* ---- the small ops in the registry ------------------------------------------------------------ */

Test(isa_levels, small_ops_are_chosen_like_the_other_kernels)
{
    const woolly_small_ops o = woolly_small_ops_choose();
    const woolly_kernel *s = woolly_kernel_choose_ops(WOOLLY_OP_SWIGLU, -1);
    const woolly_kernel *r = woolly_kernel_choose_ops(WOOLLY_OP_RMSNORM, -1);
    cr_assert(s && r && s->swiglu && r->rmsnorm && !s->rmsnorm && !r->swiglu);
    cr_assert(o.swiglu == s->swiglu && o.rmsnorm == r->rmsnorm);
    cr_assert_str_eq(o.swiglu_name, s->name);
    cr_assert_str_eq(o.rmsnorm_name, r->name);
    const woolly_kernel *g = woolly_kernel_choose_ops(WOOLLY_OP_GEGLU, -1);
    cr_assert(g && g->geglu && !g->swiglu && o.geglu == g->geglu && g->isa == s->isa, "geglu beside swiglu");
    cr_assert_str_eq(o.geglu_name, g->name);
    /* The highest level that runs here: none above it has the op. */
    for (int l = s->isa + 1; l < WOOLLY_ISA_COUNT; l++)
        cr_assert_null(woolly_kernel_choose_ops(WOOLLY_OP_SWIGLU, l));
    cr_assert(woolly_kernel_runs(s) && woolly_kernel_runs(r));
    cr_assert_null(woolly_kernel_by_name(s->name), "ops are not among the kernels a profile can name");
}

/* The hash profiles carry covers the listed kernels' names only, as before the small ops joined. */
Test(isa_levels, the_registry_hash_is_over_the_listed_kernels)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        cr_assert_neq(ks[i].op, WOOLLY_OP_SWIGLU);
        cr_assert_neq(ks[i].op, WOOLLY_OP_RMSNORM);
        cr_assert_neq(ks[i].op, WOOLLY_OP_GEGLU);
        for (const char *p = ks[i].name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0xFF) * 1099511628211ull;
    }
    cr_assert_eq(woolly_registry_hash(), h);
}

/* ---- per-thread setup ------------------------------------------------------------------------- */

enum { POOL_THREADS = 4, JOBS = 50 };

static atomic_int g_setups[WOOLLY_ISA_COUNT];
static _Thread_local int t_setups[WOOLLY_ISA_COUNT];
static _Thread_local int t_order[WOOLLY_ISA_COUNT], t_n_order;

#define SETUP_OF(level)                                                                                     \
    static void setup_##level(void)                                                                        \
    {                                                                                                      \
        atomic_fetch_add(&g_setups[level], 1);                                                             \
        t_setups[level]++;                                                                                 \
        t_order[t_n_order++ % WOOLLY_ISA_COUNT] = level;                                                   \
    }
SETUP_OF(0)
SETUP_OF(1)
SETUP_OF(2)
SETUP_OF(3)
SETUP_OF(4)
/* One setup per level: a level the spec adds needs one more here (the amx level, index 4, ran first on an
 * AMX CPU, where a table of four left it out). */
static const woolly_thread_init_fn SETUPS[] = {setup_0, setup_1, setup_2, setup_3, setup_4};
enum { LEVELS = sizeof SETUPS / sizeof SETUPS[0] };
_Static_assert((int)LEVELS >= (int)WOOLLY_ISA_COUNT, "a setup per ISA level");

typedef struct seen {
    atomic_int jobs, bad;
    enum woolly_isa active;
} seen;

/* Every job finds its thread set up already, once, for the active level and what it nests in only,
 * the reference level's first. */
static void check_job(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    seen *s = arg;
    atomic_fetch_add(&s->jobs, 1);
    int n = 0;
    for (int l = 0; l < WOOLLY_ISA_COUNT; l++) {
        const bool in_chain = woolly_isa_runs_at((enum woolly_isa)l, s->active);
        if (t_setups[l] != (in_chain ? 1 : 0))
            atomic_fetch_add(&s->bad, 1);
        n += in_chain;
    }
    if (t_n_order != n || t_order[0] != WOOLLY_ISA_REFERENCE || t_order[n - 1] != (int)s->active)
        atomic_fetch_add(&s->bad, 1);
}

static void run_pool_with_setups(void)
{
    woolly_error err = {{0}};
    cr_assert_eq(woolly_isa_init(&err), 0, "%s", err.msg);
    for (int l = 0; l < WOOLLY_ISA_COUNT; l++)
        cr_assert_null(woolly_isa_set_thread_init((enum woolly_isa)l, SETUPS[l]),
                       "%s has a setup of its own: this test would replace it", woolly_isa_name((enum woolly_isa)l));
    seen s = {.active = woolly_isa_active()};
    atomic_init(&s.jobs, 0);
    atomic_init(&s.bad, 0);
    woolly_threadpool *p = woolly_threadpool_open(POOL_THREADS, &err);
    cr_assert_not_null(p, "%s", err.msg);
    for (int i = 0; i < JOBS; i++)
        woolly_threadpool_run_n(p, check_job, &s, i % 3 == 2 ? 1 : POOL_THREADS);
    woolly_threadpool_close(p);
    cr_assert_eq(atomic_load(&s.bad), 0, "%d jobs found their thread not set up once, in order", atomic_load(&s.bad));
    cr_assert_gt(atomic_load(&s.jobs), JOBS);
    for (int l = 0; l < WOOLLY_ISA_COUNT; l++) {
        const bool in_chain = woolly_isa_runs_at((enum woolly_isa)l, s.active);
        cr_assert_eq(atomic_load(&g_setups[l]), in_chain ? POOL_THREADS : 0, "%s's setup ran %d times on %d threads",
                     woolly_isa_name((enum woolly_isa)l), atomic_load(&g_setups[l]), POOL_THREADS);
    }
}

Test(isa_thread_init, runs_once_on_each_pool_thread_at_the_detected_level)
{
    unsetenv("WOOLLY_ISA");
    run_pool_with_setups();
}

Test(isa_thread_init, runs_only_the_forced_levels_setups)
{
    setenv("WOOLLY_ISA", "scalar", 1);
    run_pool_with_setups();
    cr_assert_eq(atomic_load(&g_setups[WOOLLY_ISA_SCALAR]), POOL_THREADS);
}

Test(isa_thread_init, the_spec_gives_no_level_one_yet)
{
    for (int l = 0; l < WOOLLY_ISA_COUNT; l++)
        cr_assert_null(woolly_isa_set_thread_init((enum woolly_isa)l, NULL), "%s",
                       woolly_isa_name((enum woolly_isa)l));
}

/* ---- a tiles layout --------------------------------------------------------------------------- */

/* A test's layout of the tiles kind: Q8_0 in AMX's int8 weight tiles, 16 rows a group. A block (one
 * Q8_0 block of each of the 16 rows) is one tile of 8 rows of 64 bytes, tile row j holding values 4j ..
 * 4j + 3 of each of the 16 weight rows, then the 16 scales. */
enum { T_ROWS = 16, T_INTERLEAVE = 4 };
typedef struct {
    int8_t tile[WOOLLY_QK8_0 / T_INTERLEAVE][T_ROWS][T_INTERLEAVE];
    uint16_t d[T_ROWS];
} block_q80_t16;
_Static_assert(sizeof(block_q80_t16) == 544, "one tile and 16 scales");

static block_q80_t16 *tile_block(void *w, size_t w_row_bytes, int64_t r, int64_t b)
{
    return (block_q80_t16 *)((char *)w + (size_t)(r / T_ROWS) * T_ROWS * w_row_bytes) + b;
}

static void repack_q80_t16(const woolly_repack_args *a)
{
    const int64_t nb = a->k / WOOLLY_QK8_0, r_end = (a->r1 + T_ROWS - 1) / T_ROWS * T_ROWS;
    for (int64_t r = a->r0; r < r_end; r++) {
        const woolly_block_q8_0 *src = (const woolly_block_q8_0 *)((const char *)a->src + r * a->src_row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            block_q80_t16 *t = tile_block(a->dst, a->dst_row_bytes, r, b);
            const bool pad = r >= a->r1;
            t->d[r % T_ROWS] = pad ? 0 : src[b].d;
            for (int i = 0; i < WOOLLY_QK8_0; i++)
                t->tile[i / T_INTERLEAVE][r % T_ROWS][i % T_INTERLEAVE] = pad ? 0 : src[b].qs[i];
        }
    }
}

static void unpack_q80_t16(const void *w, size_t w_row_bytes, int64_t k, int64_t r, void *row)
{
    woolly_block_q8_0 *dst = row;
    for (int64_t b = 0; b < k / WOOLLY_QK8_0; b++) {
        const block_q80_t16 *t = tile_block((void *)w, w_row_bytes, r, b);
        dst[b].d = t->d[r % T_ROWS];
        for (int i = 0; i < WOOLLY_QK8_0; i++)
            dst[b].qs[i] = t->tile[i / T_INTERLEAVE][r % T_ROWS][i % T_INTERLEAVE];
    }
}

Test(layout_kinds, the_specs_layouts_are_row_groups)
{
    int n;
    const woolly_layout *ls = woolly_layout_list(&n);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++)
        cr_assert_eq(ls[i].kind, WOOLLY_LAYOUT_ROW_GROUPS, "%s", ls[i].name);
}

Test(layout_kinds, a_tiles_layout_round_trips_through_repack_and_unpack)
{
    const woolly_layout t16 = {"q80_t16",      WOOLLY_TYPE_Q8_0, T_ROWS, sizeof(block_q80_t16),
                               repack_q80_t16, unpack_q80_t16,   WOOLLY_LAYOUT_TILES};
    enum { ROWS = 37, K = 3 * WOOLLY_QK8_0 }; /* a partial last group */
    const size_t src_rb = woolly_row_bytes(WOOLLY_TYPE_Q8_0, K);
    const size_t dst_rb = woolly_layout_row_bytes(&t16, WOOLLY_TYPE_Q8_0, K);
    cr_assert_eq(dst_rb * T_ROWS, 3 * sizeof(block_q80_t16), "the registry's row bytes of a tiles layout");
    cr_assert_eq(woolly_layout_row_bytes(&t16, WOOLLY_TYPE_Q8_0, K + 1), 0);
    const int64_t padded = (ROWS + T_ROWS - 1) / T_ROWS * T_ROWS;
    uint8_t *src = malloc(src_rb * ROWS), *dst = malloc(dst_rb * (size_t)padded), *row = malloc(src_rb);
    cr_assert(src && dst && row);
    tu_rng rng = {7};
    for (size_t i = 0; i < src_rb * ROWS; i++)
        src[i] = (uint8_t)tu_rand_u64(&rng);
    memset(dst, 0xA5, dst_rb * (size_t)padded);
    /* In two calls, as the repack splits a matrix across threads: whole groups, then the rest. */
    t16.repack(&(woolly_repack_args){src, src_rb, dst, dst_rb, K, 0, T_ROWS});
    t16.repack(&(woolly_repack_args){src, src_rb, dst, dst_rb, K, T_ROWS, ROWS});
    for (int64_t r = 0; r < padded; r++) {
        memset(row, 0x5A, src_rb);
        t16.unpack(dst, dst_rb, K, r, row);
        if (r < ROWS) {
            cr_assert(!memcmp(row, src + (size_t)r * src_rb, src_rb), "row %lld", (long long)r);
        } else {
            for (size_t i = 0; i < src_rb; i++)
                cr_assert_eq(row[i], 0, "padding row %lld byte %zu", (long long)r, i);
        }
    }
    /* K-interleaved: tile row j of a block holds 4 consecutive values of each row, as a tile load reads them. */
    const block_q80_t16 *b1 = tile_block(dst, dst_rb, 20, 1);
    const woolly_block_q8_0 *s20 = (const woolly_block_q8_0 *)(src + 20 * src_rb);
    cr_assert_eq(b1->tile[5][20 % T_ROWS][2], s20[1].qs[5 * T_INTERLEAVE + 2]);
    free(src), free(dst), free(row);
}
