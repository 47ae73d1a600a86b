/* The default profiles shipped per CPU class (tune/defaults/, built in): every one this build carries
 * parses against its kernels, each CPU is matched to its class alone, a malformed class profile is
 * rejected whole with its line, and a class's defaults take the spec's place while a tuning profile's
 * steps take theirs. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "class_check.h"
#include "class_profile.h"
#include "matmul.h"
#include "registry.h"
#include "testutil.h"

Test(class_profiles, every_shipped_profile_parses_against_this_build)
{
    for (int i = 0; i < woolly_n_shipped_profiles; i++) {
        const woolly_shipped_profile *s = &woolly_shipped_profiles[i];
        woolly_class_profile p;
        woolly_error err = {{0}};
        cr_assert_eq(cc_parse(s, &p, &err), 0, "%s", err.msg);
        char file[64];
        snprintf(file, sizeof file, "%s.profile", p.name);
        cr_expect_str_eq(s->file, file, "the class is not the file's name");
        for (int r = 0; r < p.n_defaults; r++)
            cr_expect_eq(woolly_kernel_by_name(p.defaults[r].kernel->name), p.defaults[r].kernel);
    }
    /* every class the sample CPUs name is shipped in this build */
    for (int c = 0; c < CC_N_CPUS; c++)
        if (CC_CPUS[c].cls)
            cr_expect_not_null(cc_shipped(CC_CPUS[c].cls), "no shipped profile for class %s", CC_CPUS[c].cls);
#if defined(__x86_64__)
    cr_expect_geq(woolly_n_shipped_profiles, 4);
#endif
}

Test(class_profiles, a_cpu_matches_its_class_only)
{
    woolly_class_profile ps[16];
    cr_assert_leq(woolly_n_shipped_profiles, 16);
    for (int i = 0; i < woolly_n_shipped_profiles; i++) {
        woolly_error err = {{0}};
        cr_assert_eq(cc_parse(&woolly_shipped_profiles[i], &ps[i], &err), 0, "%s", err.msg);
    }
    for (int c = 0; c < CC_N_CPUS; c++) {
        int n_match = 0;
        const char *matched = NULL;
        for (int i = 0; i < woolly_n_shipped_profiles; i++)
            if (woolly_class_profile_matches(&ps[i], CC_CPUS[c].signature)) {
                n_match++;
                matched = ps[i].name;
            }
        if (CC_CPUS[c].cls)
            cr_expect(n_match == 1 && !strcmp(matched, CC_CPUS[c].cls),
                      "%s: %d classes match (%s), expected %s", CC_CPUS[c].signature, n_match,
                      matched ? matched : "none", CC_CPUS[c].cls);
        else
            cr_expect_eq(n_match, 0, "%s: class %s matches, expected none", CC_CPUS[c].signature, matched);
    }
}

/* A class profile with rows at the scalar level, which every build has: Q4_K's defaults move from F32 to
 * int8 activations, BF16 attention tiles come first, and the one-query path prefetches nothing into L2. */
static const char VALID[] = "woolly-default-profile 1\n"
                            "class test\n"
                            "match x86_64 TestVendor family 1,2 model 3 features avx2,fma lacks avx512f\n"
                            "# a comment\n"
                            "default Q4_K scalar tokens=1 kernel=q4k_q8_gemv_scalar_1x1\n"
                            "default Q4_K scalar tokens=2-16 kernel=q4k_q8_gemm_scalar_4x1\n"
                            "default Q4_K scalar tokens=17+ kernel=q4k_q8_gemm_scalar_4x1\n"
                            "attn-rounded bf16,f16,i16\n"
                            "attn-decode-l2-ahead none\n"
                            "end 5\n";

static int parse_text(const char *text, size_t len, woolly_class_profile *p, woolly_error *err)
{
    int n;
    const woolly_kernel *ks = woolly_kernel_list(&n);
    char *copy = tu_heap_copy(text, len); /* exactly len bytes: the sanitizers see any read past the end */
    const int rc = woolly_class_profile_parse(copy, len, "defaults/test.profile", ks, n, p, err);
    free(copy);
    return rc;
}

Test(class_profiles, the_format_reads_its_rows_and_matches_by_signature)
{
    woolly_class_profile p;
    woolly_error err = {{0}};
    cr_assert_eq(parse_text(VALID, strlen(VALID), &p, &err), 0, "%s", err.msg);
    cr_expect_str_eq(p.name, "test");
    cr_assert_eq(p.n_defaults, 3);
    cr_expect_str_eq(p.defaults[0].kernel->name, "q4k_q8_gemv_scalar_1x1");
    cr_expect_eq(p.defaults[1].tokens, WOOLLY_TOKENS_SMALL);
    cr_expect_eq(p.defaults[2].tokens, WOOLLY_TOKENS_LARGE);
    cr_assert_eq(p.n_rounded_attn, 3);
    cr_expect(p.rounded_attn[0] == WOOLLY_ACT_BF16 && p.rounded_attn[1] == WOOLLY_ACT_F16 &&
              p.rounded_attn[2] == WOOLLY_ACT_I16);
    cr_expect_eq(p.attn_decode_l2, WOOLLY_ATTN_NO_L2_PREFETCH);
    static const struct {
        const char *sig;
        bool match;
    } SIGS[] = {
        {"x86_64 TestVendor family 2 model 3 features avx2,fma,f16c cores 2 cache 1K,2K,3K", true},
        {"x86_64 TestVendor family 1 model 3 features fma,avx2 cores 2 cache 1K,2K,3K", true},
        {"x86_64 TestVendor family 3 model 3 features avx2,fma cores 2 cache 1K,2K,3K", false},
        {"x86_64 TestVendor family 1 model 4 features avx2,fma cores 2 cache 1K,2K,3K", false},
        {"x86_64 TestVendor family 1 model 3 features avx2 cores 2 cache 1K,2K,3K", false},
        {"x86_64 TestVendor family 1 model 3 features avx2,fma,avx512f cores 2 cache 1K,2K,3K", false},
        {"x86_64 TestVendor family 1 model 3 features avx2,fma,avx512fp16 cores 2 cache 1K,2K,3K", true},
        {"x86_64 TestVendorX family 1 model 3 features avx2,fma cores 2 cache 1K,2K,3K", false},
        {"aarch64 TestVendor family 1 model 3 features avx2,fma cores 2 cache 1K,2K,3K", false},
        {"x86_64 TestVendor", false},
        {"", false},
    };
    for (size_t i = 0; i < sizeof SIGS / sizeof SIGS[0]; i++)
        cr_expect_eq(woolly_class_profile_matches(&p, SIGS[i].sig), SIGS[i].match, "'%s'", SIGS[i].sig);
}

/* Replaces the first `from` of VALID by `to` and expects a rejection naming `why`. */
static void expect_rejected(const char *from, const char *to, const char *why)
{
    const char *at = strstr(VALID, from);
    cr_assert(at != NULL, "'%s' is not in the profile", from);
    char bad[2048];
    snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - VALID), VALID, to, at + strlen(from));
    woolly_class_profile p;
    woolly_error err = {{0}};
    cr_expect_neq(parse_text(bad, strlen(bad), &p, &err), 0, "accepted with '%s' for '%s':\n%s", to, from,
                  bad);
    cr_expect(strstr(err.msg, why) != NULL, "'%s' for '%s': the message '%s' does not say '%s'", to, from,
              err.msg, why);
    cr_expect(strstr(err.msg, "defaults/test.profile") == err.msg, "the message '%s' does not name the file",
              err.msg);
}

Test(class_profiles, a_malformed_profile_is_rejected_whole)
{
    expect_rejected("woolly-default-profile 1", "woolly-default-profile 2", "not a default profile");
    expect_rejected("woolly-default-profile 1", "woolly-tune-profile 2", "not a default profile");
    expect_rejected("class test", "class zen5", "the file's name says 'test'");
    expect_rejected("class test", "class", "'class NAME'");
    expect_rejected("family 1,2 model", "family model", "is not 'match ARCH VENDOR");
    expect_rejected("family 1,2 model 3", "model 3 family 1,2", "in this order");
    expect_rejected("family 1,2", "family 1,x", "'x' in the family list");
    expect_rejected("family 1,2", "family 1,,2", "in the family list");
    expect_rejected(" lacks avx512f", " lacks avx512f,", "in the lacks list");
    expect_rejected(" lacks avx512f", " without avx512f", "expected family, model, features or lacks");
    expect_rejected("kernel=q4k_q8_gemv_scalar_1x1", "kernel=q4k_q8_gemv_scalar_9x9", "not in this build");
    expect_rejected("tokens=1 kernel=q4k_q8_gemv_scalar_1x1", "tokens=1 kernel=q4k_q8_gemm_scalar_4x1",
                    "not a GEMV of Q4_K weights at the scalar level");
    expect_rejected("kernel=q4k_q8_gemv_scalar_1x1", "kernel=q6k_q8_gemv_scalar_1x1", "not a GEMV of Q4_K");
    expect_rejected("default Q4_K scalar tokens=1", "default Q4_K avx9 tokens=1", "not an ISA level");
    expect_rejected("default Q4_K scalar tokens=1", "default Q4_Z scalar tokens=1", "not a weight type");
    expect_rejected("tokens=1 kernel", "tokens=3 kernel", "not a class");
    expect_rejected("tokens=1 kernel", "kernel=x tokens=1", "expected tokens=... and kernel=...");
    expect_rejected("tokens=17+ kernel=q4k_q8_gemm_scalar_4x1\n",
                    "tokens=17+ kernel=q4k_q8_gemm_scalar_4x1 x\n", "a default row is");
    expect_rejected("tokens=17+", "tokens=2-16", "a second default for Q4_K weights at scalar, tokens=2-16");
    /* the GEMV's activations without the GEMM's: a repacked matrix would have no GEMM */
    expect_rejected(
        "default Q4_K scalar tokens=17+ kernel=q4k_q8_gemm_scalar_4x1\nattn-rounded bf16,f16,i16\n"
        "attn-decode-l2-ahead none\nend 5",
        "attn-rounded bf16,f16,i16\nattn-decode-l2-ahead none\nend 4",
        "default q4k_f32_gemm_scalar_4x1 and GEMV q4k_q8_gemv_scalar_1x1 differ");
    expect_rejected("attn-rounded bf16,f16,i16", "attn-rounded bf16,f32", "'f32' is not a rounded");
    expect_rejected("attn-rounded bf16,f16,i16", "attn-rounded bf16,bf16", "listed twice");
    expect_rejected("attn-rounded bf16,f16,i16\n", "attn-rounded bf16\nattn-rounded f16\n",
                    "a second attn-rounded");
    expect_rejected("# a comment", "layout Q4_K 256x768 rows", "not a default profile's row");
    expect_rejected("ahead none", "ahead 0", "'attn-decode-l2-ahead none|N' (N from 1 to 16)");
    expect_rejected("ahead none", "ahead 17", "(N from 1 to 16)");
    expect_rejected("ahead none", "ahead far", "(N from 1 to 16)");
    expect_rejected("ahead none", "ahead 2 3", "(N from 1 to 16)");
    expect_rejected("ahead none\n", "ahead none\nattn-decode-l2-ahead 2\n", "a second attn-decode-l2-ahead");
    expect_rejected("end 5", "end 4", "does not count the 5 rows");
    expect_rejected("end 5\n", "end 5\n# more\n", "text after the end line");
    expect_rejected("\n# a", "\n\n# a", "empty word");
#if defined(__x86_64__)
    expect_rejected("default Q4_K scalar tokens=2-16 kernel=q4k_q8_gemm_scalar_4x1",
                    "default Q4_K avx2 tokens=2-16 kernel=q4k_q8_gemm_avx2_r8_40x8", "a small-batch tile");
#endif
}

#if defined(__x86_64__)
/* A level with GEMMs only (amx) takes the default GEMV of the level it nests in: its rows agree with that
 * GEMV's activations and layout, or the profile is rejected. */
Test(class_profiles, a_gemm_only_level_agrees_with_the_gemv_it_nests_on)
{
    static const char AMX[] = "woolly-default-profile 1\n"
                              "class test\n"
                              "match x86_64 TestVendor\n"
                              "default BF16 avx512 tokens=1 kernel=bf16_bf16_gemv_avx512_1x8\n"
                              "default BF16 avx512 tokens=17+ kernel=bf16_bf16_gemm_avx512_4x6\n"
                              "default BF16 amx tokens=17+ kernel=bf16_bf16_gemm_amx_32x32\n"
                              "end 3\n";
    woolly_class_profile p;
    woolly_error err = {{0}};
    cr_assert_eq(parse_text(AMX, strlen(AMX), &p, &err), 0, "%s", err.msg);
    cr_assert_eq(p.n_defaults, 3);
    cr_expect_str_eq(p.defaults[2].kernel->name, "bf16_bf16_gemm_amx_32x32");
    /* without the avx512 rows, BF16's GEMV there is the spec's, on F32 activations */
    static const char ALONE[] = "woolly-default-profile 1\n"
                                "class test\n"
                                "match x86_64 TestVendor\n"
                                "default BF16 amx tokens=17+ kernel=bf16_bf16_gemm_amx_32x32\n"
                                "end 1\n";
    cr_expect_neq(parse_text(ALONE, strlen(ALONE), &p, &err), 0, "accepted an amx row apart from its GEMV");
    cr_expect(strstr(err.msg, "default bf16_bf16_gemm_amx_32x32 and GEMV bf16_f32_gemv_avx512_r16_1x64 differ"),
              "%s", err.msg);
}
#endif

Test(class_profiles, a_profile_cut_anywhere_is_rejected)
{
    const size_t len = strlen(VALID);
    for (size_t cut = 0; cut < len; cut++) {
        woolly_class_profile p;
        woolly_error err = {{0}};
        cr_assert_neq(parse_text(VALID, cut, &p, &err), 0, "accepted when cut after %zu of %zu bytes", cut,
                      len);
        cr_assert(err.msg[0], "no message for a cut after %zu bytes", cut);
    }
}

/* The class's defaults replace the spec's (an F32 GEMV at the scalar level), and a tuning profile's step
 * replaces the class's for its class of batch sizes. */
Test(class_profiles, a_class_overrides_the_spec_and_a_tuned_step_overrides_the_class)
{
    setenv("WOOLLY_ISA", "scalar", 1);
    const woolly_kernel *spec_gemv = woolly_kernel_default_gemv(WOOLLY_TYPE_Q4_K, -1);
    cr_assert(spec_gemv && spec_gemv->act == WOOLLY_ACT_F32, "the spec's scalar Q4_K GEMV: %s",
              spec_gemv ? spec_gemv->name : "none");
    woolly_error err = {{0}};
    cr_assert_eq(woolly_kernel_defaults_from(VALID, strlen(VALID), "test.profile", &err), 0, "%s", err.msg);
    cr_expect_str_eq(woolly_kernel_defaults_class(), "test");
    const woolly_kernel *gemv = woolly_kernel_default_gemv(WOOLLY_TYPE_Q4_K, -1);
    cr_assert_str_eq(gemv->name, "q4k_q8_gemv_scalar_1x1");
    cr_expect(woolly_kernel_is_default(gemv) && !woolly_kernel_is_default(spec_gemv));
    enum woolly_act act;
    const woolly_layout *layout;
    cr_assert_eq(
        woolly_matmul_default_format(WOOLLY_TYPE_Q4_K, 256, WOOLLY_ACT_MASK_ALL, &act, &layout, &err), 0,
        "%s", err.msg);
    cr_expect(act == WOOLLY_ACT_Q8 && !layout, "default format %s", woolly_act_name(act));
    /* strict accuracy has no int8: the best F16/F32 GEMV, the class's choice aside */
    cr_assert_eq(
        woolly_matmul_default_format(WOOLLY_TYPE_Q4_K, 256, WOOLLY_ACT_MASK_STRICT, &act, &layout, &err), 0,
        "%s", err.msg);
    cr_expect(act == WOOLLY_ACT_F32 || act == WOOLLY_ACT_F16, "strict: %s", woolly_act_name(act));

    static uint8_t data[16 * 144];
    woolly_matrix w = woolly_matrix_rows(data, WOOLLY_TYPE_Q4_K, 16, 256, "w");
    w.act = WOOLLY_ACT_Q8;
    woolly_matmul_plan plan;
    cr_assert_eq(woolly_matmul_plan_init(&plan, &w, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(plan.step[WOOLLY_TOKENS_1].kernel, gemv);
    cr_expect_str_eq(plan.step[WOOLLY_TOKENS_SMALL].kernel->name, "q4k_q8_gemm_scalar_4x1");
    cr_expect_str_eq(plan.step[WOOLLY_TOKENS_LARGE].kernel->name, "q4k_q8_gemm_scalar_4x1");
    woolly_matmul_step tuned[WOOLLY_TOKENS_CLASSES] = {{0}};
    tuned[WOOLLY_TOKENS_1].kernel = spec_gemv;
    tuned[WOOLLY_TOKENS_LARGE].kernel = woolly_kernel_by_name("q4k_f16_gemm_scalar_4x1");
    cr_assert_eq(woolly_matmul_plan_init(&plan, &w, tuned, &err), 0, "%s", err.msg);
    cr_expect_eq(plan.step[WOOLLY_TOKENS_1].kernel, spec_gemv, "the tuned GEMV is not taken");
    cr_expect_str_eq(plan.step[WOOLLY_TOKENS_SMALL].kernel->name, "q4k_q8_gemm_scalar_4x1");
    cr_expect_str_eq(plan.step[WOOLLY_TOKENS_LARGE].kernel->name, "q4k_f16_gemm_scalar_4x1");

    /* attention: the class's order, whatever runs at this level (the F32 kernel at the scalar level) */
    enum woolly_act order[3];
    cr_assert_eq(woolly_kernel_attn_rounded_order(order), 3);
    cr_expect_eq(order[0], WOOLLY_ACT_BF16);
    cr_expect_eq(woolly_kernel_attn_decode_l2(), WOOLLY_ATTN_NO_L2_PREFETCH);
    /* a malformed one leaves the defaults as they were */
    cr_expect_neq(woolly_kernel_defaults_from(VALID, strlen(VALID) - 1, "test.profile", &err), 0);
    cr_expect_str_eq(woolly_kernel_defaults_class(), "test");
}
