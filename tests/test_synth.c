/* `woolly synth` end to end: the layout of llama.cpp's reference files (key set and order, tensor names,
 * shapes, types and order), determinism (same seed and arguments: same bytes, whatever the threads;
 * another seed: other weights), the weight distribution, the type mixes, the built-in tokenizer with
 * its chat templates, and errors for bad flags. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "gguf_check.h"
#include "testutil.h"
#include "tokenizer.h"

/* The generator's sample statistics over a whole tensor (>= 65536 values) are this close to the
 * requested N(0, 0.02) / 1 + N(0, 0.1) (relative, for the standard deviation). */
#define WEIGHT_STD_MAX_REL_ERR 0.02
#define NORM_STD_MAX_REL_ERR 0.15 /* a norm has only 256 values */

/* Runs `woolly synth ARGS -o OUT` and returns OUT (heap). `tag` names the output file. */
static char *synth(const char *tag, const char *args)
{
    char *out = strdup(tu_tmp_path(tag));
    cr_assert(out);
    char cmd[16384], *so, *se;
    snprintf(cmd, sizeof cmd, "synth -q %s -o %s", args, out);
    const int st = tu_run_cli(cmd, &so, &se);
    cr_assert_eq(st, 0, "woolly %s exited %d: %s", cmd, st, se);
    free(so), free(se);
    return out;
}

static char *vocab_arg(const char *name)
{
    static char buf[4200];
    char rel[128];
    snprintf(rel, sizeof rel, "vocab/%s.gguf", name);
    snprintf(buf, sizeof buf, "--vocab %s", tu_data(rel));
    return buf;
}

static bool key_is(const gguf_kv *kv, const char *key)
{
    return gguf_str_eq(kv->key, key);
}

/* Same keys in the same order (and, if `values`, the same values); tensors with the same names,
 * shapes, types and order. */
static void assert_layout_like(const gguf_file *got, const gguf_file *ref, bool values)
{
    cr_assert_eq(got->n_kv, ref->n_kv, "%llu keys, the reference has %llu", (unsigned long long)got->n_kv,
                 (unsigned long long)ref->n_kv);
    for (uint64_t i = 0; i < ref->n_kv; i++) {
        cr_assert(tu_gguf_str_equal(got->kv[i].key, ref->kv[i].key),
                  "key %llu is '%.*s', the reference has '%.*s'", (unsigned long long)i,
                  (int)got->kv[i].key.len, got->kv[i].key.ptr, (int)ref->kv[i].key.len, ref->kv[i].key.ptr);
        if (values)
            cr_assert(tu_gguf_value_equal(&got->kv[i].value, &ref->kv[i].value),
                      "key '%.*s' has another value", (int)ref->kv[i].key.len, ref->kv[i].key.ptr);
    }
    cr_assert_eq(got->n_tensors, ref->n_tensors);
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const gguf_tensor *a = &got->tensors[i], *b = &ref->tensors[i];
        cr_assert_str_eq(a->name, b->name, "tensor %llu", (unsigned long long)i);
        cr_assert(a->n_dims == b->n_dims && memcmp(a->ne, b->ne, sizeof a->ne) == 0, "%s: shape differs",
                  a->name);
        cr_assert_eq(a->type, b->type, "%s: %s, the reference has %s", a->name,
                     woolly_type_get(a->type)->name, woolly_type_get(b->type)->name);
    }
}

Test(synth, tiny_with_llama_vocab_is_laid_out_like_the_reference)
{
    char *out = synth("tiny-spm.gguf", vocab_arg("ggml-vocab-llama-spm"));
    gguf_file *got = tu_gguf_open(out), *ref = tu_gguf_open_data("models/tiny-llama-q4_k_m.gguf");
    assert_layout_like(got, ref, true);
    gguf_close(got), gguf_close(ref);
    remove(out), free(out);
}

Test(synth, tiny_granite_with_starcoder_vocab_is_laid_out_like_the_reference)
{
    char args[8192];
    snprintf(args, sizeof args, "--preset tiny-granite %s", vocab_arg("ggml-vocab-starcoder"));
    char *out = synth("tiny-granite.gguf", args);
    gguf_file *got = tu_gguf_open(out), *ref = tu_gguf_open_data("models/tiny-granite-q4_k_m.gguf");
    assert_layout_like(got, ref, true);
    gguf_close(got), gguf_close(ref);
    remove(out), free(out);
}

/* The other families' files as the shared test data has them (written by another program, after
 * llama.cpp's converters): with the same shape, synth writes every tensor of the reference (name, shape,
 * type) and nothing else, and each of its hyperparameters has the reference's value. */
static void assert_family_like(const char *model, const char *shape)
{
    char rel[128], args[8192];
    snprintf(rel, sizeof rel, "models/%s.gguf", model);
    snprintf(args, sizeof args, "%s --type F16 --vocab %s", shape, tu_data(rel));
    char *out = synth(model, args);
    gguf_file *got = tu_gguf_open(out), *ref = tu_gguf_open_data(rel);
    cr_assert_eq(got->n_tensors, ref->n_tensors, "%s: %llu tensors, the reference has %llu", model,
                 (unsigned long long)got->n_tensors, (unsigned long long)ref->n_tensors);
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const gguf_tensor *b = &ref->tensors[i], *a = NULL;
        for (uint64_t j = 0; j < got->n_tensors && !a; j++)
            if (strcmp(got->tensors[j].name, b->name) == 0)
                a = &got->tensors[j];
        cr_assert(a != NULL, "%s: no %s", model, b->name);
        cr_assert(a->n_dims == b->n_dims && memcmp(a->ne, b->ne, sizeof a->ne) == 0, "%s: %s's shape differs",
                  model, a->name);
        cr_assert_eq(a->type, b->type, "%s: %s is %s, the reference's %s", model, a->name,
                     woolly_type_get(a->type)->name, woolly_type_get(b->type)->name);
    }
    gguf_str arch;
    woolly_error err = {{0}};
    cr_assert(gguf_get_str(ref, "general.architecture", &arch, &err));
    for (uint64_t i = 0; i < got->n_kv; i++) {
        const gguf_kv *kv = &got->kv[i];
        if (kv->key.len <= arch.len || memcmp(kv->key.ptr, arch.ptr, arch.len) != 0 || kv->key.ptr[arch.len] != '.')
            continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (strcmp(key + arch.len, ".vocab_size") == 0)
            continue; /* llama.cpp's converters do not write it; its value is the vocabulary's size */
        const gguf_kv *theirs = gguf_find_kv(ref, key);
        cr_assert(theirs != NULL, "%s: %s is not in the reference", model, key);
        cr_assert(tu_gguf_value_equal(&kv->value, &theirs->value), "%s: %s differs from the reference", model,
                  key);
    }
    gguf_close(got), gguf_close(ref);
    remove(out), free(out);
}

Test(synth, new_families_are_laid_out_like_the_references)
{
    assert_family_like("tiny-qwen2-f16", "--arch qwen2 --n-embd 128 --n-ff 384 --n-layer 2 --n-head 4 "
                                         "--n-head-kv 2 --n-ctx 4096 --rope-base 1e6 --norm-eps 1e-6 --tied");
    assert_family_like("tiny-qwen3-f16", "--arch qwen3 --n-embd 256 --n-ff 512 --n-layer 2 --n-head 4 "
                                         "--n-head-kv 2 --head-dim 64 --n-ctx 4096 --rope-base 1e6 "
                                         "--norm-eps 1e-6 --tied");
    assert_family_like("tiny-gemma3-f16", "--arch gemma3 --n-embd 128 --n-ff 512 --n-layer 4 --n-head 4 "
                                          "--n-head-kv 2 --head-dim 64 --n-ctx 4096 --rope-base 1e6 "
                                          "--norm-eps 1e-6 --tied --sliding-window 16 --swa-pattern 2");
    assert_family_like("tiny-phi3-f16", "--arch phi3 --n-embd 128 --n-ff 256 --n-layer 2 --n-head 4 "
                                        "--n-head-kv 2 --n-ctx 4096 --rope-base 10000 --norm-eps 1e-5 --untied");
}

Test(synth, mixtures_of_experts_are_laid_out_like_the_references)
{
    assert_family_like("tiny-qwen3moe-f16", "--arch qwen3moe --n-embd 256 --n-ff 512 --n-ff-exp 256 --n-expert 8 "
                                            "--n-expert-used 2 --n-layer 2 --n-head 4 --n-head-kv 2 --head-dim 128 "
                                            "--n-ctx 4096 --rope-base 1e6 --norm-eps 1e-6 --tied");
    assert_family_like("tiny-granitemoe-f16", "--arch granitemoe --n-embd 128 --n-ff 128 --n-expert 8 "
                                              "--n-expert-used 2 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ctx 4096 "
                                              "--rope-base 10000 --norm-eps 1e-6 --tied --embedding-scale 6 "
                                              "--residual-scale 0.4 --attention-scale 0.25 --logit-scale 8");
    assert_family_like("tiny-mixtral-f16", "--arch llama --n-embd 128 --n-ff 128 --n-expert 8 --n-expert-used 2 "
                                           "--n-layer 2 --n-head 4 --n-head-kv 2 --n-ctx 4096 --rope-base 1e6 "
                                           "--norm-eps 1e-5 --untied");
}

/* Q4_K_M as llama.cpp's quantizer picks it for a mixture (not of 8 experts, whose attention it also
 * widens): the experts' down matrices follow ffn_down's rule (Q6_K in the last of 2 layers), gate and up
 * are Q4_K, the router stays F32; and the file runs. */
Test(synth, mixture_of_experts_q4_k_m_types_and_run)
{
    char *out = synth("tiny-qwen3moe-q4km.gguf", "--arch qwen3moe --n-embd 256 --n-ff 512 --n-ff-exp 256 "
                                                 "--n-expert 6 --n-expert-used 2 --n-layer 2 --n-head 4 "
                                                 "--n-head-kv 2 --head-dim 64 --tied");
    gguf_file *g = tu_gguf_open(out);
    const struct {
        const char *name;
        enum woolly_type type;
    } WANT[] = {
        {"blk.0.ffn_down_exps.weight", WOOLLY_TYPE_Q4_K}, {"blk.1.ffn_down_exps.weight", WOOLLY_TYPE_Q6_K},
        {"blk.0.ffn_gate_exps.weight", WOOLLY_TYPE_Q4_K}, {"blk.1.ffn_up_exps.weight", WOOLLY_TYPE_Q4_K},
        {"blk.0.ffn_gate_inp.weight", WOOLLY_TYPE_F32},   {"blk.1.ffn_gate_inp.weight", WOOLLY_TYPE_F32},
    };
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        const gguf_tensor *t = NULL;
        for (uint64_t j = 0; j < g->n_tensors && !t; j++)
            if (strcmp(g->tensors[j].name, WANT[i].name) == 0)
                t = &g->tensors[j];
        cr_assert(t != NULL, "no %s", WANT[i].name);
        cr_expect_eq(t->type, WANT[i].type, "%s is %s, expected %s", WANT[i].name, woolly_type_get(t->type)->name,
                     woolly_type_get(WANT[i].type)->name);
    }
    gguf_close(g);
    char cmd[8192], *so, *se;
    snprintf(cmd, sizeof cmd, "run -m %s -p hello -n 4", out);
    const int st = tu_run_cli(cmd, &so, &se);
    cr_expect_eq(st, 0, "woolly %s exited %d: %s", cmd, st, se);
    free(so), free(se);
    remove(out), free(out);
}

Test(synth, shape_flags_override_a_preset)
{
    /* the tiny-granite preset is the tiny preset with granite's flags: the same bytes */
    char *a = synth("tiny-granite-preset.gguf", "--preset tiny-granite");
    char *b = synth("tiny-granite-flags.gguf",
                    "--preset tiny --arch granite --tied --rope-base 1e7 --embedding-scale 12 "
                    "--residual-scale 0.22 --attention-scale 0.0078125 --logit-scale 16");
    size_t na, nb;
    char *da = tu_read_file(a, &na), *db = tu_read_file(b, &nb);
    cr_assert(na == nb && memcmp(da, db, na) == 0,
              "flags on the tiny preset differ from the tiny-granite preset");
    free(da), free(db);
    remove(a), remove(b), free(a), free(b);
}

Test(synth, same_seed_same_bytes_whatever_the_threads)
{
    char *a = synth("seed7-t1.gguf", "--seed 7 -t 1"), *b = synth("seed7-t3.gguf", "--seed 7 -t 3");
    size_t na, nb;
    char *da = tu_read_file(a, &na), *db = tu_read_file(b, &nb);
    cr_assert(na == nb && memcmp(da, db, na) == 0, "same seed, different files");
    free(da), free(db);
    remove(a), remove(b), free(a), free(b);
}

Test(synth, another_seed_gives_other_weights)
{
    char *a = synth("seed1.gguf", "--seed 1"), *b = synth("seed2.gguf", "--seed 2");
    gguf_file *ga = tu_gguf_open(a), *gb = tu_gguf_open(b);
    assert_layout_like(ga, gb, true); /* the metadata does not depend on the seed */
    for (uint64_t i = 0; i < ga->n_tensors; i++) {
        const gguf_tensor *x = &ga->tensors[i], *y = &gb->tensors[i];
        cr_assert(x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) != 0,
                  "%s is the same for two seeds", x->name);
    }
    /* and no two tensors of one file share their values */
    const gguf_tensor *q = gguf_find_tensor(ga, "blk.0.attn_q.weight"),
                      *o = gguf_find_tensor(ga, "blk.0.attn_output.weight");
    cr_assert(memcmp(q->data, o->data, q->nbytes) != 0, "two tensors have the same values");
    gguf_close(ga), gguf_close(gb);
    remove(a), remove(b), free(a), free(b);
}

static void stats(const gguf_tensor *t, double *mean, double *std)
{
    const int64_t n = (int64_t)(t->ne[0] * t->ne[1]);
    float *y = malloc(sizeof(float) * (size_t)n);
    cr_assert(y);
    cr_assert_eq(woolly_dequantize_row(t->type, t->data, y, n), 0);
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++)
        s += y[i], ss += (double)y[i] * y[i];
    *mean = s / (double)n;
    *std = sqrt(ss / (double)n - *mean * *mean);
    free(y);
}

Test(synth, weights_and_norms_have_the_requested_distribution)
{
    char *out = synth("f32.gguf", "--type F32 --seed 3");
    gguf_file *g = tu_gguf_open(out);
    cr_assert_eq(tu_gguf_u32(g, "general.file_type"), 0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        cr_assert_eq(t->type, WOOLLY_TYPE_F32, "%s", t->name);
        double mean, std;
        stats(t, &mean, &std);
        if (t->n_dims == 1) {
            cr_assert(fabs(mean - 1.0) < 0.03 && fabs(std - 0.1) <= NORM_STD_MAX_REL_ERR * 0.1,
                      "%s: mean %g std %g, want 1 and 0.1", t->name, mean, std);
        } else {
            cr_assert(fabs(mean) < 0.001 && fabs(std - 0.02) <= WEIGHT_STD_MAX_REL_ERR * 0.02,
                      "%s: mean %g std %g, want 0 and 0.02", t->name, mean, std);
        }
    }
    gguf_close(g);
    remove(out), free(out);
}

static void check_uniform_type(const char *type, enum woolly_type want, uint32_t file_type)
{
    char args[64], tag[64];
    snprintf(args, sizeof args, "--type %s", type);
    snprintf(tag, sizeof tag, "type-%s.gguf", type);
    char *out = synth(tag, args);
    gguf_file *g = tu_gguf_open(out);
    cr_assert_eq(tu_gguf_u32(g, "general.file_type"), file_type);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(g->tensors[i].type, g->tensors[i].n_dims == 1 ? WOOLLY_TYPE_F32 : want, "%s: %s",
                     g->tensors[i].name, woolly_type_get(g->tensors[i].type)->name);
    /* as in llama.cpp's files: only quantized files record the quantization version */
    cr_assert_eq(gguf_find_kv(g, "general.quantization_version") != NULL, want != WOOLLY_TYPE_F16);
    gguf_close(g);
    remove(out), free(out);
}

Test(synth, uniform_types)
{
    check_uniform_type("Q6_K", WOOLLY_TYPE_Q6_K, 18);
    check_uniform_type("Q8_0", WOOLLY_TYPE_Q8_0, 7);
    check_uniform_type("F16", WOOLLY_TYPE_F16, 1);
}

Test(synth, rows_that_are_not_whole_k_blocks_fall_back)
{
    char *out = strdup(tu_tmp_path("n96.gguf")), cmd[8192], *so, *se;
    snprintf(cmd, sizeof cmd, "synth --n-embd 96 --n-ff 200 --n-head 2 --n-head-kv 1 -o %s", out);
    cr_assert_eq(tu_run_cli(cmd, &so, &se), 0, "%s", se);
    cr_assert(strstr(se, "not a multiple of 256") != NULL, "no note: %s", se);
    /* as llama-quantize falls back: Q4_K to Q5_0, Q6_K (the output, attn_v and ffn_down of some layers)
     * to Q8_0 in rows of 96; rows of 200 fit no block of 32 either: F16 */
    gguf_file *g = tu_gguf_open(out);
    int n_q5_0 = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const bool may_get_more = !strcmp(t->name, "output.weight") || strstr(t->name, "attn_v.weight");
        const bool ok = t->n_dims == 1       ? t->type == WOOLLY_TYPE_F32
                        : t->ne[0] % 32 != 0 ? t->type == WOOLLY_TYPE_F16
                                             : t->type == WOOLLY_TYPE_Q5_0 ||
                                                   (may_get_more && t->type == WOOLLY_TYPE_Q8_0);
        cr_assert(ok, "%s (row %llu): %s", t->name, (unsigned long long)t->ne[0], woolly_type_get(t->type)->name);
        n_q5_0 += t->type == WOOLLY_TYPE_Q5_0;
    }
    cr_assert_gt(n_q5_0, 0);
    cr_assert_eq(gguf_find_tensor(g, "output.weight")->type, WOOLLY_TYPE_Q8_0);
    gguf_close(g);
    free(so), free(se);
    remove(out), free(out);
}

/* ---- the built-in tokenizer --------------------------------------------------------------------- */

static const gguf_array *arr(const gguf_file *g, const char *key, enum gguf_vtype t)
{
    woolly_error err = {{0}};
    const gguf_array *a = NULL;
    cr_assert(gguf_get_arr(g, key, t, &a, &err), "%s: %s", key, err.msg);
    return a;
}

static int64_t find_token(const gguf_array *tokens, const char *text, size_t len)
{
    for (uint64_t i = 0; i < tokens->n; i++)
        if (tokens->strs[i].len == len && memcmp(tokens->strs[i].ptr, text, len) == 0)
            return (int64_t)i;
    return -1;
}

static void assert_str_key(const gguf_file *g, const char *key, const char *want)
{
    woolly_error err = {{0}};
    gguf_str s;
    cr_assert(gguf_get_str(g, key, &s, &err), "%s: %s", key, err.msg);
    cr_assert(gguf_str_eq(s, want), "%s is '%.*s', want '%s'", key, (int)s.len, s.ptr, want);
}

/* GPT-2's byte-to-unicode map, computed the other way round from the library's: the 188 printable
 * Latin-1 bytes stand for themselves, the other 68 get U+0100.. in byte order. */
static uint32_t woolly_test_byte_cp(int b)
{
    uint32_t next = 256, cp = 0;
    for (int x = 0; x <= b; x++) {
        const bool self = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
        cp = self ? (uint32_t)x : next++;
    }
    return cp;
}

Test(synth, byte_map_spot_checks)
{
    cr_assert_eq(woolly_test_byte_cp(' '), 0x120);  /* 'Ġ' */
    cr_assert_eq(woolly_test_byte_cp('\n'), 0x10A); /* 'Ċ' */
    cr_assert_eq(woolly_test_byte_cp(0), 0x100);
    cr_assert_eq(woolly_test_byte_cp('A'), 'A');
    cr_assert_eq(woolly_test_byte_cp(0xAD), 0x143);
    cr_assert_eq(woolly_test_byte_cp(0xFF), 0xFF);
}

/* A valid byte-level BPE vocabulary of n tokens: unique tokens; the 256 byte tokens; each merge's parts
 * and their concatenation are tokens; every token is special, a byte, a merge result or an unused
 * filler. */
static void assert_valid_bpe(const gguf_file *g, uint64_t n)
{
    assert_str_key(g, "tokenizer.ggml.model", "gpt2");
    assert_str_key(g, "tokenizer.ggml.pre", "default");
    const gguf_array *tokens = arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
    const gguf_array *types = arr(g, "tokenizer.ggml.token_type", GGUF_I32);
    const gguf_array *merges = arr(g, "tokenizer.ggml.merges", GGUF_STRING);
    cr_assert_eq(tokens->n, n);
    cr_assert_eq(types->n, n);
    cr_assert_eq(tu_gguf_u32(g, "llama.vocab_size"), n);
    cr_assert(merges->n >= 200, "only %llu merges learned", (unsigned long long)merges->n);

    uint8_t *reached = calloc(n, 1); /* 1: byte token, 2: merge result */
    cr_assert(reached);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = i + 1; j < n && j < i + 2000; j++) /* learned tokens are within the first ~2000 */
            cr_assert(!tu_gguf_str_equal(tokens->strs[i], tokens->strs[j]),
                      "tokens %llu and %llu are the same", (unsigned long long)i, (unsigned long long)j);
    /* GPT-2's byte map: '!'..'~' stand for themselves, the space is U+0120 (UTF-8 C4 A0), byte 0 U+0100 */
    int bytes_found = 0;
    for (int b = 0; b < 256; b++) {
        char text[3];
        size_t len;
        uint32_t cp = woolly_test_byte_cp(b);
        if (cp < 0x80)
            text[0] = (char)cp, len = 1;
        else
            text[0] = (char)(0xC0 | (cp >> 6)), text[1] = (char)(0x80 | (cp & 0x3F)), len = 2;
        const int64_t id = find_token(tokens, text, len);
        cr_assert(id >= 0, "no token for byte %d", b);
        reached[id] = 1;
        bytes_found++;
    }
    cr_assert_eq(bytes_found, 256);
    for (uint64_t m = 0; m < merges->n; m++) {
        const gguf_str s = merges->strs[m];
        const char *sp = memchr(s.ptr, ' ', s.len);
        cr_assert(sp != NULL, "merge %llu has no space", (unsigned long long)m);
        const size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        cr_assert(find_token(tokens, s.ptr, ll) >= 0, "merge '%.*s': left part is no token", (int)s.len,
                  s.ptr);
        cr_assert(find_token(tokens, sp + 1, rl) >= 0, "merge '%.*s': right part is no token", (int)s.len,
                  s.ptr);
        char joined[512];
        cr_assert(ll + rl < sizeof joined);
        memcpy(joined, s.ptr, ll);
        memcpy(joined + ll, sp + 1, rl);
        const int64_t id = find_token(tokens, joined, ll + rl);
        cr_assert(id >= 0, "merge '%.*s': the concatenation is no token", (int)s.len, s.ptr);
        reached[id] = 2;
    }
    for (uint64_t i = 0; i < n; i++) {
        const int32_t type = (int32_t)gguf_arr_i64(types, i);
        if (reached[i])
            cr_assert_eq(type, 1, "token %llu is reachable but of type %d", (unsigned long long)i, type);
        else
            cr_assert(type == 3 || type == 5,
                      "token %llu '%.*s' is unreachable but of type %d (not control/unused)",
                      (unsigned long long)i, (int)tokens->strs[i].len, tokens->strs[i].ptr, type);
    }
    free(reached);
}

Test(synth, builtin_tokenizer_is_a_valid_byte_level_bpe)
{
    char *out = synth("builtin.gguf", "");
    gguf_file *g = tu_gguf_open(out), *ref = tu_gguf_open_data("models/tiny-llama-q4_k_m.gguf");
    assert_valid_bpe(g, 4096);
    const gguf_array *tokens = arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
    const uint32_t bos = tu_gguf_u32(g, "tokenizer.ggml.bos_token_id"),
                   eos = tu_gguf_u32(g, "tokenizer.ggml.eos_token_id");
    cr_assert(bos == eos && gguf_str_eq(tokens->strs[bos], "<|endoftext|>"));
    cr_assert(gguf_find_kv(g, "tokenizer.chat_template") == NULL);
    /* The padding tokens stand for no text: a random model that samples them prints nothing for them. */
    woolly_error err = {{0}};
    woolly_tokenizer *tok = woolly_tokenizer_open(g, &err);
    cr_assert(tok != NULL, "%s", err.msg);
    const int32_t last = (int32_t)tokens->n - 1;
    cr_assert(strncmp(woolly_tokenizer_piece(tok, last), "<|filler_", 9) == 0, "last token is %s",
              woolly_tokenizer_piece(tok, last));
    cr_assert_eq(woolly_token_bytes(tok, last, NULL, 0), 0);
    woolly_tokenizer_close(tok);
    /* every key that is not the tokenizer's is as in the reference; tensors as in the reference but for
     * the vocabulary dimension */
    for (uint64_t i = 0; i < ref->n_kv; i++) {
        const gguf_kv *kv = &ref->kv[i];
        if (kv->key.len >= 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0)
            continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        const gguf_kv *mine = gguf_find_kv(g, key);
        cr_assert(mine != NULL, "key %s missing", key);
        if (!key_is(kv, "llama.vocab_size"))
            cr_assert(tu_gguf_value_equal(&mine->value, &kv->value), "key %s differs", key);
    }
    cr_assert_eq(g->n_tensors, ref->n_tensors);
    for (uint64_t i = 0; i < ref->n_tensors; i++) {
        const gguf_tensor *a = &g->tensors[i], *b = &ref->tensors[i];
        cr_assert_str_eq(a->name, b->name);
        cr_assert(a->type == b->type && a->ne[0] == b->ne[0] && (a->ne[1] == b->ne[1] || b->ne[1] == 32000),
                  "%s differs", a->name);
    }
    gguf_close(g), gguf_close(ref);
    remove(out), free(out);
}

static void check_template(const char *family, const char *const *markers, const char *bos, const char *eos)
{
    char args[64], tag[64];
    snprintf(args, sizeof args, "--chat-template %s --n-vocab 3000", family);
    snprintf(tag, sizeof tag, "chat-%s.gguf", family);
    char *out = synth(tag, args);
    gguf_file *g = tu_gguf_open(out);
    assert_valid_bpe(g, 3000);
    woolly_error err = {{0}};
    gguf_str tmpl;
    cr_assert(gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err), "%s: no chat template", family);
    const gguf_array *tokens = arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
    const gguf_array *types = arr(g, "tokenizer.ggml.token_type", GGUF_I32);
    cr_assert(memmem(tmpl.ptr, tmpl.len, markers[0], strlen(markers[0])) != NULL, "%s template lacks %s",
              family, markers[0]);
    cr_assert(memmem(tmpl.ptr, tmpl.len, "{%", 2) != NULL &&
                  memmem(tmpl.ptr, tmpl.len, "messages", 8) != NULL,
              "%s: not a Jinja chat template", family);
    for (const char *const *m = markers; *m; m++) {
        const int64_t id = find_token(tokens, *m, strlen(*m));
        cr_assert(id >= 0, "%s: no token %s", family, *m);
        cr_assert_eq(gguf_arr_i64(types, (uint64_t)id), 3, "%s: %s is not a control token", family, *m);
        cr_assert(memmem(tmpl.ptr, tmpl.len, *m, strlen(*m)) != NULL, "%s template does not use %s", family,
                  *m);
    }
    cr_assert(gguf_str_eq(tokens->strs[tu_gguf_u32(g, "tokenizer.ggml.bos_token_id")], bos), "%s: bos",
              family);
    cr_assert(gguf_str_eq(tokens->strs[tu_gguf_u32(g, "tokenizer.ggml.eos_token_id")], eos), "%s: eos",
              family);
    gguf_close(g);
    remove(out), free(out);
}

Test(synth, chat_templates_come_with_their_special_tokens)
{
    static const char *const granite[] = {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", NULL};
    static const char *const llama3[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", NULL};
    static const char *const chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
    static const char *const llama2[] = {"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", NULL};
    static const char *const phi3[] = {"<|assistant|>", "<|user|>", "<|system|>", "<|end|>", NULL};
    check_template("granite", granite, "<|end_of_text|>", "<|end_of_text|>");
    check_template("llama3", llama3, "<|begin_of_text|>", "<|eot_id|>");
    check_template("chatml", chatml, "<|endoftext|>", "<|im_end|>");
    check_template("llama2", llama2, "<s>", "</s>");
    check_template("phi3", phi3, "<s>", "<|end|>");
}

/* A phi3 model's built-in vocabulary comes with Phi-3's template and the tokens other runtimes look up
 * by name in a Phi-3 (<s>, </s>, <unk>, <|endoftext|>) without --chat-template; a vocabulary file's
 * tokens are the file's. */
Test(synth, phi3_gets_its_family_tokens_by_default)
{
    char *out = synth("phi3-default.gguf", "--preset tiny --arch phi3 --n-vocab 1000");
    gguf_file *g = tu_gguf_open(out);
    const gguf_array *tokens = arr(g, "tokenizer.ggml.tokens", GGUF_STRING);
    static const char *const NAMED[] = {"<s>", "</s>", "<unk>", "<|endoftext|>", "<|user|>", "<|assistant|>",
                                        "<|end|>"};
    for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++)
        cr_expect(find_token(tokens, NAMED[i], strlen(NAMED[i])) >= 0, "no token %s", NAMED[i]);
    woolly_error err = {{0}};
    gguf_str tmpl;
    cr_assert(gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err), "no chat template");
    cr_expect(memmem(tmpl.ptr, tmpl.len, "<|assistant|>", 13) != NULL);
    gguf_close(g);
    remove(out), free(out);

    char args[8192];
    snprintf(args, sizeof args, "--preset tiny --arch phi3 %s", vocab_arg("ggml-vocab-llama-spm"));
    out = synth("phi3-spm.gguf", args);
    g = tu_gguf_open(out);
    cr_expect(gguf_find_kv(g, "tokenizer.chat_template") == NULL, "a chat template beside a vocabulary file");
    gguf_close(g);
    remove(out), free(out);
}

Test(synth, vocab_file_with_a_chat_template)
{
    char args[8192];
    snprintf(args, sizeof args, "--type Q8_0 --chat-template granite %s", vocab_arg("ggml-vocab-starcoder"));
    char *out = synth("starcoder-granite-template.gguf", args);
    gguf_file *g = tu_gguf_open(out), *v = tu_gguf_open_data("vocab/ggml-vocab-starcoder.gguf");
    /* every tokenizer key of the vocab file, unchanged, plus the template */
    for (uint64_t i = 0; i < v->n_kv; i++) {
        const gguf_kv *kv = &v->kv[i];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        const gguf_kv *mine = gguf_find_kv(g, key);
        if (strncmp(key, "tokenizer.", 10) == 0)
            cr_assert(mine && tu_gguf_value_equal(&mine->value, &kv->value), "tokenizer key %s not copied",
                      key);
    }
    woolly_error err = {{0}};
    gguf_str tmpl;
    cr_assert(gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err));
    cr_assert(memmem(tmpl.ptr, tmpl.len, "<|start_of_role|>", 17) != NULL);
    cr_assert_eq(tu_gguf_u32(g, "llama.vocab_size"), 49152);
    gguf_close(g), gguf_close(v);
    remove(out), free(out);
}

/* ---- bad flags ---------------------------------------------------------------------------------- */

static void assert_fails(const char *args, const char *message_part)
{
    char cmd[16500];
    snprintf(cmd, sizeof cmd, "synth %s", args);
    tu_cli_fails(cmd, message_part);
}

Test(synth, bad_flags_fail_with_a_message)
{
    char out[4200], a[16384];
    snprintf(out, sizeof out, "%s", tu_tmp_path("never.gguf"));
#define FAILS(flags, msg)                                                                                    \
    do {                                                                                                     \
        snprintf(a, sizeof a, "%s -o %s", flags, out);                                                       \
        assert_fails(a, msg);                                                                                \
    } while (0)
    FAILS("--preset huge", "unknown preset 'huge'");
    FAILS("--n-head 3", "n_head 3 does not divide n_embd 256");
    FAILS("--n-head-kv 3", "n_head_kv 3 does not divide n_head 4");
    FAILS("--n-embd 0", "n_embd is 0");
    FAILS("--n-layer 5000", "n_layer is 5000");
    FAILS("--n-embd 12x", "--n-embd '12x'");
    FAILS("--n-embd 28 --n-head 4", "head size 7 must be even");
    FAILS("--head-dim 33", "head size 33 must be even");
    FAILS("--arch qwen2 --sliding-window 16", "qwen2 has no sliding-window attention");
    FAILS("--head-dim 2000", "head_dim is 2000");
    FAILS("--n-embd 260 --n-head 20 --n-head-kv 20", "must be even");
    FAILS("--type Q2_K", "unknown --type 'Q2_K'");
    FAILS("--chat-template vicuna", "unknown chat template 'vicuna'");
    FAILS("--arch gpt2", "unknown --arch 'gpt2'");
    FAILS("--seed -1", "--seed '-1'");
    FAILS("--seed 99999999999999999999", "--seed");
    FAILS("--rope-base 0", "rope base is 0");
    FAILS("--n-vocab 100", "n_vocab is 100");
    FAILS("--n-vocab 260 --chat-template llama3", "n_vocab is 260");
    FAILS("--preset tiny --preset llama-1b", "more than once");
    FAILS("--arch qwen3moe", "qwen3moe needs experts");
    FAILS("--arch qwen2 --n-expert 8 --n-expert-used 2", "qwen2 has no mixture of experts");
    FAILS("--n-expert 8 --n-expert-used 9", "n_expert_used is 9");
    FAILS("--n-expert 8", "n_expert_used is 0");
    FAILS("--n-expert-used 2", "n_expert_used is 2 without experts");
    FAILS("--n-expert 8 --n-expert-used 2 --n-ff-exp 64", "qwen3moe's only");
    FAILS("-t 0", "-t 0 is out of range [1, 256]");
    FAILS("--frobnicate 3", "unknown option '--frobnicate'");
    FAILS("--arch granite --logit-scale -1", "logit scale");
    snprintf(a, sizeof a, "%s --n-vocab 1000 -o %s", vocab_arg("ggml-vocab-starcoder"), out);
    assert_fails(a, "does not match the 49152 tokens");
    snprintf(a, sizeof a, "--vocab %s/missing.gguf -o %s", tu_data("vocab"), out);
    assert_fails(a, "missing.gguf");
    assert_fails("--seed 1", "-o OUT.gguf is required");
    assert_fails("--n-embd", "--n-embd needs a value");
#undef FAILS
    FILE *f = fopen(out, "rb");
    cr_assert(f == NULL, "a failed run left %s behind", out);
}
