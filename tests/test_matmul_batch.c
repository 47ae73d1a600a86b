/* The x86 levels' int8 matmuls on their interleaved layouts (AVX2: 8 rows, AVX-512: 16) give a token the
 * same bits whichever kernel its batch size takes: the GEMVs (one token), the small-batch GEMMs (2-16
 * tokens, a server step) and the prompt GEMMs sum the same integers and do the same float operations in
 * the same order. So a prompt's token computed alone (the rest of its prompt cached, or cut into another
 * batch) gets the numbers of the whole prompt's batch, which the attention's rounded tiles need: they
 * would turn last-bit differences into steps of their rounding (bench/journal/2026-11-27-zen3.md,
 * "Batch-invariant matmuls"). The AVX-512 cases run on a CPU without it in the build that emulates the level
 * (WOOLLY_EMULATE_AVX512). The amx level's tile GEMMs give the bits of the avx512 kernels on the same
 * layouts; on a CPU without AMX they run in the builds that emulate its tiles (WOOLLY_EMULATE_AMX, and
 * the avx512 one), and on one with AMX the same test holds the instructions to the bits of the emulation's
 * reference, the avx512 kernels. The float kernels (F32, F16 and BF16 weights on GGUF rows) keep the
 * same rule at the avx2 and avx512 levels. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "kernel_check.h"
#include "registry.h"

enum { MAX_KERNELS = 32 };

/* The kernels of weights `wtype` this CPU runs at level `isa` with activations `act` on layout `layout`
 * (NULL: GGUF rows, where BLIS's sgemm, a candidate the tuner may measure, sums in its own order and is
 * left out), as the check takes them. */
static int level_kernels(enum woolly_isa isa, enum woolly_type wtype, enum woolly_act act, const char *layout,
                         kc_matmul_kernel *out, int room)
{
    int n_all, n = 0;
    const woolly_kernel *all = woolly_kernel_list(&n_all);
    for (int i = 0; i < n_all && n < room; i++) {
        const woolly_kernel *k = &all[i];
        if ((k->op != WOOLLY_OP_GEMV && k->op != WOOLLY_OP_GEMM) || k->isa != isa || k->wtype != wtype ||
            k->act != act || !woolly_kernel_runs(k))
            continue;
        if (layout ? !k->layout || strcmp(k->layout->name, layout) : k->layout || strstr(k->name, "_blis"))
            continue;
        out[n++] = (kc_matmul_kernel){.fn = k->matmul,
                                      .name = k->name,
                                      .wtype = wtype,
                                      .act = act,
                                      .repack = k->layout ? k->layout->repack : NULL,
                                      .layout_rows = k->layout ? k->layout->rows : 0,
                                      .layout_block_bytes = k->layout ? k->layout->block_bytes : 0};
    }
    return n;
}

/* Names the n kernels (after `what`), then holds them to the same bits for 1, 4, 17 and 45 tokens of k
 * values and `rows` rows. */
static void check_batches(const kc_matmul_kernel *kerns, int n, const char *what, int64_t k, int64_t rows)
{
    fprintf(stderr, "%s kernels agree:", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %s", kerns[i].name);
    fprintf(stderr, "\n");
    const int64_t tokens[] = {1, 4, 17, 45};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        kc_check_same_bits(kerns, n, k, tokens[i], rows);
}

static void check_type(enum woolly_isa isa, enum woolly_type wtype, const char *layout)
{
    kc_matmul_kernel kerns[MAX_KERNELS];
    const int n = level_kernels(isa, wtype, WOOLLY_ACT_Q8, layout, kerns, MAX_KERNELS);
    const char *level = woolly_isa_name(isa);
    if (woolly_isa_active() < isa) {
        cr_assert_eq(n, 0, "%s: %s kernels run below the %s level", layout, level, level);
        fprintf(stderr, "%s: not run (the active level is %s)\n", layout,
                woolly_isa_name(woolly_isa_active()));
        return;
    }
    /* a GEMV, the small-batch GEMM and (Q4_K, Q6_K, Q8_0) the prompt GEMM at least */
    cr_assert_geq(n, 2, "%s: %d %s kernels", layout, n, level);
    char what[64];
    snprintf(what, sizeof what, "%s: %d %s", layout, n, level);
    check_batches(kerns, n, what, 1024, 72);
    /* The AVX-512 prompt GEMMs on decoded panels (any_q8_r16_panel.c.j2) carry the float sums from panel to
     * panel (512 to 2048 values) and serve 64 to 256 tokens per panel: a K of 9 super-blocks (a last
     * panel of one) and 131 tokens cross both. */
    if (isa == WOOLLY_ISA_AVX512)
        kc_check_same_bits(kerns, n, 2304, 131, 72);
}

Test(matmul_batch, q4_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q4_K, "q4k_r8");
}

Test(matmul_batch, q5_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q5_K, "q5k_r8");
}

Test(matmul_batch, q6_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q6_K, "q6k_r8");
}

Test(matmul_batch, q8_0_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q8_0, "q80_r8");
}

/* Q8_0 at AVX-512: the GEMVs, the 4x32 tile and the prompt GEMM on decoded panels, the level's defaults. */
Test(matmul_batch, avx512_q8_0_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q8_0, "q80_r16");
}

Test(matmul_batch, avx512_q4_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q4_K, "q4k_r16");
}

Test(matmul_batch, avx512_q5_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q5_K, "q5k_r16");
}

Test(matmul_batch, avx512_q6_k_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q6_K, "q6k_r16");
}

/* The 32-value formats: the GEMV, the 4x8 tile and the row-broadcast prompt GEMM. */
Test(matmul_batch, legacy_32_value_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q4_0, "q40_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q4_1, "q41_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q5_0, "q50_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q5_1, "q51_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_IQ4_NL, "iq4nl_r8");
}

/* The 32-value formats at AVX-512: the GEMV, the 4x32 tile and the prompt GEMM on decoded panels. */
Test(matmul_batch, avx512_legacy_32_value_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q4_0, "q40_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q4_1, "q41_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q5_0, "q50_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q5_1, "q51_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_IQ4_NL, "iq4nl_r16");
}

/* Q2_K, Q3_K and IQ4_XS: the GEMV, the 4x8 tile and the row-broadcast prompt GEMM. */
Test(matmul_batch, q2_k_q3_k_iq4_xs_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q2_K, "q2k_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_Q3_K, "q3k_r8");
    check_type(WOOLLY_ISA_AVX2, WOOLLY_TYPE_IQ4_XS, "iq4xs_r8");
}

Test(matmul_batch, avx512_q2_k_q3_k_iq4_xs_kernels_agree_bit_for_bit)
{
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q2_K, "q2k_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_Q3_K, "q3k_r16");
    check_type(WOOLLY_ISA_AVX512, WOOLLY_TYPE_IQ4_XS, "iq4xs_r16");
}

/* The float kernels of a slot (weights `wtype` on GGUF rows or in `layout`, activations `act`) at level
 * `isa`: the same property for F32, F16 and BF16 weights (a server's cached prompt prefix sends a prompt's
 * last token through the GEMV, where the whole prompt took the GEMM). */
static void check_float_in(enum woolly_isa isa, enum woolly_type wtype, enum woolly_act act,
                           const char *layout)
{
    kc_matmul_kernel kerns[MAX_KERNELS];
    const int n = level_kernels(isa, wtype, act, layout, kerns, MAX_KERNELS);
    const char *level = woolly_isa_name(isa);
    if (woolly_isa_active() < isa) {
        cr_assert_eq(n, 0, "%s kernels run below the %s level", level, level);
        return;
    }
    cr_assert_geq(n, 2, "%s %s x %s: %d kernels", level, woolly_type_get(wtype)->name, woolly_act_name(act), n);
    char what[64];
    snprintf(what, sizeof what, "%s %s x %s: %d", level, woolly_type_get(wtype)->name, woolly_act_name(act), n);
    /* 70 rows: whole tiles and the rows past them; k = 1000 ends in a part of a vector, 2320 is three
     * blocks of k of the GEMMs' (1024). */
    check_batches(kerns, n, what, 1000, 70);
    kc_check_same_bits(kerns, n, 2320, 9, 70);
    kc_check_same_bits(kerns, n, 1003, 7, 70); /* an odd k: the 16-row kernels' last column in one chain */
}

static void check_float(enum woolly_isa isa, enum woolly_type wtype, enum woolly_act act)
{
    check_float_in(isa, wtype, act, NULL);
}

Test(matmul_batch, float_kernels_agree_bit_for_bit)
{
    const enum woolly_type types[] = {WOOLLY_TYPE_F32, WOOLLY_TYPE_F16, WOOLLY_TYPE_BF16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_float(WOOLLY_ISA_AVX2, types[i], WOOLLY_ACT_F32);
        check_float(WOOLLY_ISA_AVX512, types[i], WOOLLY_ACT_F32);
        check_float(WOOLLY_ISA_AVX512, types[i], WOOLLY_ACT_F16);
    }
}

/* F16 and BF16 in 16 interleaved rows on F32 activations: the avx2 level's kernels
 * (matmul/avx2/half_r16.c.j2) and, where the CPU runs them, the avx512 level's (matmul/avx512/half_r16.c.j2),
 * all together: the two templates sum a row's products in the same order, so the levels give the same bits
 * too. */
static void check_half_r16(enum woolly_type wtype, const char *layout)
{
    kc_matmul_kernel kerns[MAX_KERNELS];
    const int n2 = level_kernels(WOOLLY_ISA_AVX2, wtype, WOOLLY_ACT_F32, layout, kerns, MAX_KERNELS);
    const int n =
        n2 + level_kernels(WOOLLY_ISA_AVX512, wtype, WOOLLY_ACT_F32, layout, kerns + n2, MAX_KERNELS - n2);
    if (!woolly_isa_runs_at(WOOLLY_ISA_AVX2, woolly_isa_active())) {
        cr_assert_eq(n, 0, "%s: x86 kernels run at the %s level", layout,
                     woolly_isa_name(woolly_isa_active()));
        return;
    }
    cr_assert_geq(n2, 2, "%s: %d avx2 kernels", layout, n2);
    if (woolly_isa_runs_at(WOOLLY_ISA_AVX512, woolly_isa_active()))
        cr_assert_geq(n - n2, 2, "%s: %d avx512 kernels", layout, n - n2);
    char what[64];
    snprintf(what, sizeof what, "%s x f32: %d", layout, n);
    check_batches(kerns, n, what, 1000, 70);
    kc_check_same_bits(kerns, n, 2320, 9, 70);
    kc_check_same_bits(kerns, n, 1003, 7, 70); /* an odd k: the last column in one chain */
    kc_check_same_bits(kerns, n, 64, 3, 8);    /* rows in one half group */
    kc_check_same_bits(kerns, n, 64, 5, 45);   /* after a 32-row tile, a half group in each half */
}

/* F16 and BF16 in 16 interleaved rows (and bf16_r16_dot.c.j2 on BF16 activations where the CPU has
 * AVX512-BF16): the GEMVs and GEMMs of the layout. */
Test(matmul_batch, half_r16_kernels_agree_bit_for_bit)
{
    check_half_r16(WOOLLY_TYPE_F16, "f16_r16");
    check_half_r16(WOOLLY_TYPE_BF16, "bf16_r16");
    if (woolly_cpu_get()->features & WOOLLY_CPU_AVX512BF16)
        check_float_in(WOOLLY_ISA_AVX512, WOOLLY_TYPE_BF16, WOOLLY_ACT_BF16, "bf16_r16");
    else
        fprintf(stderr, "bf16_r16 x BF16 not run: no AVX512-BF16\n");
}

/* The amx level's GEMMs beside the avx512 kernels of their layout: a whole step of tiles (32 tokens),
 * steps that end in partial tiles (17, 45), and more tokens than share one panel of decoded weights (131). */
static void check_amx(enum woolly_type wtype, const char *layout)
{
    kc_matmul_kernel kerns[MAX_KERNELS];
    const int n512 = level_kernels(WOOLLY_ISA_AVX512, wtype, WOOLLY_ACT_Q8, layout, kerns, MAX_KERNELS);
    const int n = n512 + level_kernels(WOOLLY_ISA_AMX, wtype, WOOLLY_ACT_Q8, layout, kerns + n512, MAX_KERNELS - n512);
    if (!woolly_isa_runs_at(WOOLLY_ISA_AMX, woolly_isa_active())) {
        cr_assert_eq(n - n512, 0, "%s: amx kernels run below the amx level", layout);
        fprintf(stderr, "%s: amx not run (the active level is %s)\n", layout, woolly_isa_name(woolly_isa_active()));
        return;
    }
    cr_assert_geq(n512, 1, "%s: no avx512 kernel to compare with", layout);
    cr_assert_geq(n - n512, 1, "%s: no amx kernel", layout);
    fprintf(stderr, "%s: %d avx512 and %d amx kernels agree\n", layout, n512, n - n512);
    const int64_t tokens[] = {1, 17, 32, 45, 131};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        kc_check_same_bits(kerns, n, 1024, tokens[i], 72);
}

Test(matmul_batch, amx_kernels_agree_with_avx512_bit_for_bit)
{
    static const struct {
        enum woolly_type wtype;
        const char *layout;
    } types[] = {
        {WOOLLY_TYPE_Q4_K, "q4k_r16"},   {WOOLLY_TYPE_Q5_K, "q5k_r16"},   {WOOLLY_TYPE_Q6_K, "q6k_r16"},
        {WOOLLY_TYPE_Q8_0, "q80_r16"},   {WOOLLY_TYPE_Q4_0, "q40_r16"},   {WOOLLY_TYPE_Q4_1, "q41_r16"},
        {WOOLLY_TYPE_Q5_0, "q50_r16"},   {WOOLLY_TYPE_Q5_1, "q51_r16"},   {WOOLLY_TYPE_IQ4_NL, "iq4nl_r16"},
        {WOOLLY_TYPE_Q2_K, "q2k_r16"},   {WOOLLY_TYPE_Q3_K, "q3k_r16"},   {WOOLLY_TYPE_IQ4_XS, "iq4xs_r16"},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_amx(types[i].wtype, types[i].layout);
}

/* Each amx kernel loads its tile configuration on the thread that runs it: on more threads than the CPU
 * has cores, and on threads created anew, its bits are those of one thread (the emulation stops the
 * program at a tile instruction on a thread without a configuration, as the CPU faults). */
Test(matmul_batch, amx_kernels_run_on_any_thread)
{
    kc_matmul_kernel kerns[MAX_KERNELS];
    const int n = level_kernels(WOOLLY_ISA_AMX, WOOLLY_TYPE_Q4_K, WOOLLY_ACT_Q8, "q4k_r16", kerns, MAX_KERNELS);
    if (!woolly_isa_runs_at(WOOLLY_ISA_AMX, woolly_isa_active())) {
        fprintf(stderr, "amx not run (the active level is %s)\n", woolly_isa_name(woolly_isa_active()));
        return;
    }
    cr_assert_geq(n, 1);
    const int threads = 4 * woolly_cpu_get()->n_cores; /* more threads than cores, whatever the machine */
    for (int i = 0; i < n; i++)
        kc_check_threads(&kerns[i], 512, 40, threads < 512 ? threads : 512, 2);
}
