/* Tuning profiles as files: the writer's text parses back to the same profile, byte for byte; a profile
 * for another CPU, build, version or ISA level, cut anywhere, or with any garbled line is rejected whole
 * with a message naming the line (attention rows included); and a run given such a profile says so in one
 * warning line and runs with the defaults. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu.h"
#include "matmul.h"
#include "profile.h"
#include "profile_check.h"
#include "testutil.h"

/* Rows of several shapes, classes, thread counts and layouts, with every parameter set somewhere. */
static woolly_profile *valid_profile(void)
{
    woolly_profile *p = pc_new();
    pc_layout(p, WOOLLY_TYPE_Q4_K, 256, 768, NULL);
    pc_matmul(p, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_1, 2,
              (woolly_matmul_step){pc_kernel("q4k_f16_gemv_scalar_1x1"), 48, 0, 256, 64, 1});
    pc_matmul(p, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_SMALL, 2,
              (woolly_matmul_step){pc_kernel("q4k_q8_gemm_scalar_4x1"), 16, 4, 512, 128, 2});
    pc_matmul(p, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_LARGE, 2,
              (woolly_matmul_step){pc_kernel("q4k_f32_gemm_scalar_4x1"), 64, 8, 256, 0, 0});
    pc_matmul(p, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_1, 1,
              (woolly_matmul_step){pc_kernel("q4k_f32_gemv_scalar_1x1"), 0, 0, 0, 0, 0});
    /* The shape of a big matrix in this CPU's default layout, with its default kernel. */
    enum woolly_act act;
    const woolly_layout *l;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_matmul_default_format(WOOLLY_TYPE_Q4_K, 4096, WOOLLY_ACT_MASK_ALL, &act, &l, &err), 0,
                 "%s", err.msg);
    const woolly_kernel *gemv = woolly_kernel_choose(WOOLLY_OP_GEMV, WOOLLY_TYPE_Q4_K, act, l);
    cr_assert(gemv != NULL);
    pc_layout(p, WOOLLY_TYPE_Q4_K, 4096, 4096, l);
    pc_matmul(p, WOOLLY_TYPE_Q4_K, 4096, 4096, WOOLLY_TOKENS_1, 2,
              (woolly_matmul_step){gemv, 4 * gemv->tile_n, 0, 1024, 512, 2});
    pc_layout(p, WOOLLY_TYPE_Q6_K, 128, 256, NULL);
    pc_matmul(p, WOOLLY_TYPE_Q6_K, 128, 256, WOOLLY_TOKENS_1, 2,
              (woolly_matmul_step){pc_kernel("q6k_f32_gemv_scalar_1x1"), 32, 0, 0, 0, 0});
    /* Attention: tiled and untiled kernels, both phases, another cache type and thread count. */
    pc_attn(p, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_DECODE, 2, "attn_f16_flash_scalar_d64_b8x64", 1, 3);
    pc_attn(p, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_PREFILL, 2, "attn_f16_flash_scalar_any", 24, 1);
    pc_attn(p, WOOLLY_TYPE_Q8_0, 128, WOOLLY_ATTN_PREFILL, 1, "attn_q80_flash_scalar_d128_b8x64", 8, 1);
    return p;
}

static woolly_profile *parse_text(const char *text, size_t len, woolly_error *err)
{
    /* A heap copy of exactly len bytes, so that the sanitizers see any read past the end. */
    char *copy = tu_heap_copy(text, len);
    woolly_profile *p = woolly_profile_parse(copy, len, "test.profile", err);
    free(copy);
    return p;
}

Test(profile, round_trip_gives_the_same_rows_and_the_same_text)
{
    woolly_profile *p = valid_profile();
    size_t len;
    char *text = pc_text(p, &len);
    woolly_error err = {{0}};
    woolly_profile *q = parse_text(text, len, &err);
    cr_assert(q != NULL, "%s\n%s", err.msg, text);
    cr_expect_eq(q->n_layouts, p->n_layouts);
    cr_assert_eq(q->n_matmuls, p->n_matmuls);
    cr_expect_eq(q->strict, false);
    cr_expect_eq(q->mix[0], 128);
    cr_expect_eq(q->mix[2], 512);
    for (int i = 0; i < p->n_layouts; i++) {
        const woolly_profile_layout *a = &p->layouts[i], *b = &q->layouts[i];
        cr_expect(a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->layout == b->layout,
                  "layout row %d differs", i);
    }
    for (int i = 0; i < p->n_matmuls; i++) {
        const woolly_profile_matmul *a = &p->matmuls[i], *b = &q->matmuls[i];
        cr_expect(a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->cls == b->cls &&
                      a->threads == b->threads && a->default_kernel == b->default_kernel,
                  "matmul row %d: key differs", i);
        const woolly_matmul_step *x = &a->step, *y = &b->step;
        cr_expect(x->kernel == y->kernel && x->rows_per_call == y->rows_per_call &&
                      x->tokens_per_call == y->tokens_per_call && x->k_per_call == y->k_per_call &&
                      x->prefetch == y->prefetch && x->threads == y->threads,
                  "matmul row %d: step differs", i);
        cr_expect(a->us == b->us && a->default_us == b->default_us, "matmul row %d: times differ", i);
    }
    cr_assert_eq(q->n_attns, p->n_attns);
    for (int i = 0; i < p->n_attns; i++) {
        const woolly_profile_attn *a = &p->attns[i], *b = &q->attns[i];
        cr_expect(a->cache == b->cache && a->head_dim == b->head_dim && a->phase == b->phase &&
                      a->threads == b->threads && a->kernel == b->kernel &&
                      a->queries_per_call == b->queries_per_call && a->kv_split == b->kv_split &&
                      a->queries == b->queries && a->positions == b->positions &&
                      a->default_kernel == b->default_kernel && a->us == b->us &&
                      a->default_us == b->default_us,
                  "attn row %d differs", i);
    }
    const woolly_profile_attn *at = woolly_profile_find_attn(q, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_DECODE, 2);
    cr_assert(at != NULL);
    cr_expect_str_eq(at->kernel->name, "attn_f16_flash_scalar_d64_b8x64");
    cr_expect_eq(at->kv_split, 3);
    cr_expect_null(woolly_profile_find_attn(q, WOOLLY_TYPE_F16, 64, WOOLLY_ATTN_DECODE, 1));
    cr_expect_null(woolly_profile_find_attn(q, WOOLLY_TYPE_F16, 128, WOOLLY_ATTN_PREFILL, 2));
    cr_expect_null(woolly_profile_find_attn(q, WOOLLY_TYPE_F32, 64, WOOLLY_ATTN_PREFILL, 2));
    /* Looking rows up by key. */
    const woolly_profile_matmul *r =
        woolly_profile_find_matmul(q, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_SMALL, 2);
    cr_assert(r != NULL);
    cr_expect_str_eq(r->step.kernel->name, "q4k_q8_gemm_scalar_4x1");
    cr_expect_eq(r->step.tokens_per_call, 4);
    cr_expect_null(woolly_profile_find_matmul(q, WOOLLY_TYPE_Q4_K, 256, 768, WOOLLY_TOKENS_SMALL, 3));
    cr_expect_null(woolly_profile_find_layout(q, WOOLLY_TYPE_Q6_K, 256, 768));

    char *again = pc_text(q, NULL);
    cr_expect_str_eq(again, text, "the text of the parsed profile differs from the written one");
    free(again);
    free(text);
    woolly_profile_free(q);
    woolly_profile_free(p);
}

/* Replaces the first `from` of the valid profile's text by `to` and expects a rejection naming `why`. */
static void expect_rejected(const char *from, const char *to, const char *why)
{
    woolly_profile *p = valid_profile();
    size_t len;
    char *text = pc_text(p, &len);
    woolly_profile_free(p);
    char *at = strstr(text, from);
    cr_assert(at != NULL, "'%s' is not in the profile:\n%s", from, text);
    const size_t n = strlen(text) - strlen(from) + strlen(to);
    char *bad = malloc(n + 1);
    cr_assert(bad != NULL);
    snprintf(bad, n + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    woolly_error err = {{0}};
    woolly_profile *q = parse_text(bad, n, &err);
    cr_expect_null(q, "accepted with '%s' for '%s':\n%s", to, from, bad);
    cr_expect(strstr(err.msg, why) != NULL, "'%s' for '%s': the message '%s' does not say '%s'", to, from,
              err.msg, why);
    cr_expect(strstr(err.msg, "test.profile line ") == err.msg,
              "the message '%s' does not name the file and line", err.msg);
    woolly_profile_free(q);
    free(bad);
    free(text);
}

Test(profile, rejects_another_cpu_build_version_or_level)
{
    expect_rejected(" family ", " family 1", "measured on another CPU");
    expect_rejected(" cores ", " cores 7", "measured on another CPU");
    expect_rejected("\nregistry ", "\nregistry 0", "made for another build");
    expect_rejected("\nwoolly ", "\nwoolly 9", "tune again");
    /* format 1 had no attention rows: such a profile is tuned again */
    expect_rejected("woolly-tune-profile 2", "woolly-tune-profile 1", "this build reads");
    expect_rejected("woolly-tune-profile 2", "llama-tune-profile 2", "not a Woolly tuning profile");
    char isa[32], other[32];
    snprintf(isa, sizeof isa, "\nisa %s\n", woolly_isa_name(woolly_isa_active()));
    snprintf(other, sizeof other, "\nisa %s\n", woolly_isa_active() == WOOLLY_ISA_SCALAR ? "avx2" : "scalar");
    expect_rejected(isa, other, "another ISA level");
}

Test(profile, rejects_a_garbled_line)
{
    expect_rejected("accuracy default", "accuracy fast", "accuracy");
    expect_rejected("mix 128,0,512", "mix 128,0", "mix D,S,L");
    expect_rejected("kernel=q4k_f16_gemv_scalar_1x1", "kernel=q4k_f16_gemv_scalar_9x9", "not in this build");
    expect_rejected("kernel=q4k_f16_gemv_scalar_1x1", "kernel=q4k_f16_gemm_scalar_4x1", "not a GEMV kernel");
    expect_rejected("kernel=q4k_f16_gemv_scalar_1x1", "kernel=q6k_f16_gemv_scalar_1x1", "does not take Q4_K");
    expect_rejected("tokens=2-16", "tokens=3", "not a class");
    expect_rejected("threads=2", "threads=0", "threads=0");
    expect_rejected("rows_per_call=48", "rows_per_call=4x", "not an integer");
    expect_rejected("k_per_call=256 prefetch=64", "k_per_call=100 prefetch=64", "multiple of 256");
    expect_rejected("prefetch=64", "prefetch=-1", "not an integer");
    expect_rejected("tokens_per_call=0 k_per_call=256", "tokens_per_call=4 k_per_call=256",
                    "no token blocking");
    expect_rejected("tokens_per_call=4", "tokens_per_call=3", "tile");
    expect_rejected("split=1 us", "split=1  us", "empty word");
    expect_rejected("split=1 us", "us=1 split", "expected split=");
    expect_rejected(" us=12.500", " us=x", "microseconds");
    expect_rejected(" us=12.500", " us=12.500 extra=1", "KEY=VALUE words");
    expect_rejected("layout Q4_K 256x768 rows", "layout Q4_K 256x768 q9_r3", "not in this build");
    expect_rejected("layout Q4_K 256x768 rows", "layout Q4_Z 256x768 rows", "not a weight type");
    expect_rejected("layout Q4_K 256x768 rows", "layout Q4_K 256by768 rows", "not a shape");
    expect_rejected("layout Q4_K 256x768 rows\n", "", "no layout row");
    expect_rejected("layout Q6_K 128x256 rows\n", "layout Q6_K 128x256 rows\nlayout Q6_K 128x256 rows\n",
                    "a second layout");
    expect_rejected("\nend ", "\n\nend ", "empty word");
    expect_rejected("\nend ", "\nkv F16 d64 decode threads=2\nend ", "not a profile row");
    expect_rejected("\nend ", "\nattn F16 d64 decode threads=2\nend ", "an attn row is");
    expect_rejected("\nend ", "\nend 1", "does not count");
    expect_rejected("_gemv_scalar_1x1 rows_per_call=48",
                    "_gemv_scal\xff"
                    "r_1x1 rows_per_call=48",
                    "not in this build");
    expect_rejected("accuracy default", "accuracy strict", "strict accuracy");
}

Test(profile, rejects_a_garbled_attn_row)
{
    expect_rejected("attn F16 d64 decode", "attn F17 d64 decode", "not a KV cache type");
    expect_rejected("attn F16 d64 decode", "attn Q4_K d64 decode", "not a KV cache type");
    expect_rejected("attn F16 d64 decode", "attn F16 64 decode", "not a head dimension");
    expect_rejected("attn F16 d64 decode", "attn F16 d63 decode", "head dimension 63");
    expect_rejected("attn F16 d64 decode", "attn F16 d128 decode", "not an attention kernel for a F16 cache");
    expect_rejected("attn F16 d64 decode", "attn F16 d64 sideways", "not decode or prefill");
    expect_rejected("kernel=attn_f16_flash_scalar_d64_b8x64", "kernel=attn_f32_flash_scalar_d64_b8x64",
                    "not an attention kernel for a F16 cache");
    expect_rejected("kernel=attn_f16_flash_scalar_d64_b8x64", "kernel=q4k_f32_gemv_scalar_1x1",
                    "not an attention kernel");
    expect_rejected("kernel=attn_f16_flash_scalar_d64_b8x64", "kernel=attn_f16_flash_scalar_d64_b9x64",
                    "not in this build");
    expect_rejected("default=attn_f16_flash_scalar_any default_us=330",
                    "default=attn_q80_flash_scalar_any default_us=330", "default kernel");
    expect_rejected("queries_per_call=1 kv_split=3", "queries_per_call=2 kv_split=3", "one query per call");
    expect_rejected("queries_per_call=1 kv_split=3", "queries_per_call=1 kv_split=0", "kv_split=0");
    expect_rejected("queries_per_call=1 kv_split=3", "queries_per_call=1 kv_split=65", "kv_split=65");
    expect_rejected("queries_per_call=24 kv_split=1", "queries_per_call=24 kv_split=2", "does not split");
    expect_rejected("queries_per_call=24 kv_split=1", "queries_per_call=0 kv_split=1", "queries_per_call=0");
    expect_rejected("queries_per_call=24 kv_split=1", "queries_per_call=x kv_split=1", "not an integer");
    expect_rejected("kv_split=3 queries=1 positions=4096", "kv_split=3 queries=2 positions=4096",
                    "queries=2");
    expect_rejected("queries=512 positions=512", "queries=512 positions=511", "at most the positions");
    expect_rejected("kv_split=3 queries=1", "queries=1 kv_split=3", "expected kv_split=");
    expect_rejected("us=310.500", "us=-310.500", "microseconds");
    expect_rejected(" us=310.500", " us=310.500 extra=1", "KEY=VALUE words");
}

Test(profile, rejects_a_duplicate_row_and_text_after_the_end)
{
    woolly_profile *p = valid_profile();
    char *text = pc_text(p, NULL);
    woolly_profile_free(p);
    /* the first matmul line, twice */
    char *first = strstr(text, "\nmatmul ") + 1, *eol = strchr(first, '\n');
    const size_t line = (size_t)(eol - first) + 1;
    char *dup = malloc(strlen(text) + line + 1);
    cr_assert(dup != NULL);
    snprintf(dup, strlen(text) + line + 1, "%.*s%.*s%s", (int)(first - text), text, (int)line, first, first);
    woolly_error err = {{0}};
    woolly_profile *q = parse_text(dup, strlen(dup), &err);
    cr_expect_null(q);
    cr_expect(strstr(err.msg, "a second matmul row") != NULL, "%s", err.msg);
    woolly_profile_free(q);
    free(dup);

    char *after = malloc(strlen(text) + 64);
    cr_assert(after != NULL);
    sprintf(after, "%slayout Q6_K 64x256 rows\n", text);
    q = parse_text(after, strlen(after), &err);
    cr_expect_null(q);
    cr_expect(strstr(err.msg, "after the end line") != NULL, "%s", err.msg);
    woolly_profile_free(q);

    /* a NUL byte inside a line */
    const size_t n = strlen(text);
    char *nul = tu_heap_copy(text, n);
    nul[strstr(text, "kernel=") - text + 3] = 0;
    q = woolly_profile_parse(nul, n, "test.profile", &err);
    cr_expect_null(q);
    cr_expect(strstr(err.msg, "NUL") != NULL, "%s", err.msg);
    woolly_profile_free(q);
    free(nul);
    free(after);
    free(text);
}

Test(profile, rejects_a_profile_cut_anywhere)
{
    woolly_profile *p = valid_profile();
    size_t len;
    char *text = pc_text(p, &len);
    woolly_profile_free(p);
    for (size_t cut = 0; cut < len; cut++) {
        woolly_error err = {{0}};
        woolly_profile *q = parse_text(text, cut, &err);
        cr_assert_null(q, "accepted when cut after %zu of %zu bytes", cut, len);
        cr_assert(err.msg[0], "no message for a cut after %zu bytes", cut);
    }
    free(text);
}

Test(profile, default_place_is_in_the_xdg_cache_keyed_by_the_cpu)
{
    char path[1024], path2[1024];
    setenv("XDG_CACHE_HOME", "/somewhere/cache", 1);
    cr_assert_eq(woolly_profile_default_path(path, sizeof path), 0);
    cr_expect(strncmp(path, "/somewhere/cache/woolly/tune-", 29) == 0, "%s", path);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx.profile", woolly_cpu_signature_hash());
    cr_expect(strstr(path, hash) != NULL, "%s does not end in the CPU signature's hash %s", path, hash);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    cr_assert_eq(woolly_profile_default_path(path2, sizeof path2), 0);
    cr_expect(strncmp(path2, "/home/someone/.cache/woolly/tune-", 33) == 0, "%s", path2);
    cr_expect_str_eq(strrchr(path, '/'), strrchr(path2, '/'));
}

/* ---- what a run does with a profile ------------------------------------------------------------- */

static const char *tiny(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", tu_data("models/tiny-llama-q4_k_m.gguf"));
    return path;
}

/* `woolly logits` on three tokens with the given extra flags: the logits (heap), stderr in *err. */
static char *logits(const char *flags, char **err, size_t *size)
{
    char out[4096], args[16384];
    snprintf(out, sizeof out, "%s", tu_tmp_path("logits.f32"));
    snprintf(args, sizeof args, "logits -m %s --tokens 1,450,4996 -o %s %s", tiny(), out, flags);
    const int st = tu_run_cli(args, NULL, err);
    cr_assert_eq(st, 0, "woolly %s failed: %s", args, *err);
    char *x = tu_read_file(out, size);
    remove(out);
    return x;
}

static int count_lines_with(const char *s, const char *needle)
{
    int n = 0;
    for (const char *line = s; line && *line;) {
        const char *eol = strchr(line, '\n');
        const size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        n += strstr(buf, needle) != NULL;
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* A run with a bad profile: exit 0, one warning line naming the file and the defaults, and exactly the
 * logits of a run without a profile. */
static void expect_one_warning(const char *flags, const char *path, const char *why)
{
    char *err_none, *err;
    size_t n_none, n;
    char *none = logits("--tune-profile none", &err_none, &n_none);
    cr_expect_eq(count_lines_with(err_none, "warning"), 0, "%s", err_none);
    char *x = logits(flags, &err, &n);
    cr_expect_eq(count_lines_with(err, "warning"), 1, "expected one warning line:\n%s", err);
    cr_expect(strstr(err, path) && strstr(err, "using the default kernels") && strstr(err, why),
              "the warning does not name %s, '%s' and the defaults:\n%s", path, why, err);
    cr_expect(n == n_none && !memcmp(x, none, n), "the logits differ from the defaults'");
    free(x), free(none), free(err), free(err_none);
}

static void save_mutated(const char *path, const char *from, const char *to)
{
    woolly_profile *p = valid_profile();
    char *text = pc_text(p, NULL);
    woolly_profile_free(p);
    char *at = strstr(text, from);
    cr_assert(at != NULL);
    char *bad = malloc(strlen(text) + strlen(to) + 1);
    cr_assert(bad != NULL);
    sprintf(bad, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    pc_save_text(path, bad);
    free(bad);
    free(text);
}

Test(profile_run, a_rejected_profile_gives_one_warning_and_the_defaults)
{
    char path[4096], flags[8192];
    snprintf(path, sizeof path, "%s", tu_tmp_path("wrong-registry.profile"));
    save_mutated(path, "\nregistry ", "\nregistry 0");
    snprintf(flags, sizeof flags, "--tune-profile %s", path);
    expect_one_warning(flags, path, "another build");

    save_mutated(path, "\nend ", "\n\nend ");
    setenv("WOOLLY_TUNE_PROFILE", path, 1); /* the variable does what the flag does */
    expect_one_warning("", path, "line");
    unsetenv("WOOLLY_TUNE_PROFILE");
    remove(path);

    snprintf(flags, sizeof flags, "--tune-profile %s", path); /* now missing */
    expect_one_warning(flags, path, "cannot open");

    save_mutated(path, "\nend ", "\nend "); /* valid, but WOOLLY_ACT overrides every profile */
    setenv("WOOLLY_ACT", "f32", 1);
    expect_one_warning(flags, path, "WOOLLY_ACT");
    unsetenv("WOOLLY_ACT");
    remove(path);
}

Test(profile_run, runs_load_the_profile_from_this_cpus_place_and_bench_names_it)
{
    char cache[4096], path[4096], args[8192];
    snprintf(cache, sizeof cache, "%s", tu_tmp_path("xdg"));
    mkdir(cache, 0755);
    setenv("XDG_CACHE_HOME", cache, 1);
    cr_assert_eq(woolly_profile_default_path(path, sizeof path), 0);
    snprintf(args, sizeof args, "bench -m %s -p 4 -n 2 -r 1 -t 2", tiny());
    char *out, *err;
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "tuning profile: defaults\n") != NULL, "no profile yet:\n%s", out);
    cr_expect_eq(count_lines_with(err, "warning"), 0, "%s", err);
    free(out), free(err);

    char dir[4200];
    snprintf(dir, sizeof dir, "%s/woolly", cache);
    mkdir(dir, 0755);
    save_mutated(path, "\nend ", "\nend ");
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    char want[8192];
    snprintf(want, sizeof want, "tuning profile: %s (", path);
    cr_expect(strstr(out, want) != NULL, "bench does not name %s:\n%s", path, out);
    /* blk.0.ffn_down (Q4_K 256x768) has rows for three classes at 2 threads, blk.1.attn_v (Q6_K 128x256)
     * for one, and attention (F16 cache, head dimension 64) for decode and prefill */
    cr_expect(strstr(out, "(6 tuned steps for 2 threads)") != NULL, "the profile's rows are not in use:\n%s",
              out);
    cr_expect_eq(count_lines_with(err, "warning"), 0, "%s", err);
    free(out), free(err);

    save_mutated(path, " family ", " family 1");
    cr_assert_eq(tu_run_cli(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "tuning profile: defaults\n") != NULL, "%s", out);
    cr_expect_eq(count_lines_with(err, "warning"), 1, "%s", err);
    cr_expect(strstr(err, "another CPU") != NULL, "%s", err);
    free(out), free(err);
    remove(path);
    rmdir(dir);
    rmdir(cache);
}

/* Strict accuracy keeps attention's operands in F32: a strict profile naming BF16 tiles is refused for
 * their rounding (on a CPU without AVX512-BF16, as a kernel that does not run here), and the same row
 * goes into a default-accuracy profile where the kernel runs. */
Test(profile, strict_accuracy_refuses_bf16_attention)
{
    const woolly_kernel *k = woolly_kernel_by_name("attn_f16_flash_avx512_d64_b32x64_bf16");
    const woolly_profile_attn row = {.cache = WOOLLY_TYPE_F16,
                                     .head_dim = 64,
                                     .phase = WOOLLY_ATTN_PREFILL,
                                     .threads = 2,
                                     .kernel = k,
                                     .queries_per_call = 32,
                                     .kv_split = 1,
                                     .queries = 512,
                                     .positions = 512,
                                     .us = 9000.0,
                                     .default_kernel = pc_kernel("attn_f16_flash_scalar_any"),
                                     .default_us = 9400.0};
#if defined(__x86_64__)
    cr_assert_not_null(k, "the BF16 tiles are not in this x86 build");
#else
    if (!k)
        return; /* no AVX-512 kernels in this build: nothing to refuse */
#endif
    for (int strict = 0; strict < 2; strict++) {
        woolly_profile *p = woolly_profile_new(strict, (const int32_t[WOOLLY_TOKENS_CLASSES]){128, 0, 512});
        cr_assert_not_null(p);
        woolly_error err = {{0}};
        const int rc = woolly_profile_add_attn(p, &row, &err);
        if (!woolly_kernel_runs(k))
            cr_expect(rc != 0 && strstr(err.msg, "does not run on this CPU"), "%s", err.msg);
        else if (strict)
            cr_expect(rc != 0 && strstr(err.msg, "strict accuracy excludes"), "strict: %s", err.msg);
        else
            cr_expect_eq(rc, 0, "default accuracy: %s", err.msg);
        woolly_profile_free(p);
    }
}
