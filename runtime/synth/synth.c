/* `woolly synth`: configuration (presets, validation), metadata in llama.cpp's key layout, and random
 * tensors streamed through the quantizer (quant_stream.c). */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "gguf.h"
#include "gguf_write.h"
#include "quant_stream.h"
#include "synth_vocab.h"

#define WEIGHT_STD 0.02f
#define NORM_MEAN 1.0f
#define NORM_STD 0.1f
#define QUANTIZATION_VERSION 2

/* ---- architectures and presets ------------------------------------------------------------------ */

/* What each architecture's files hold beyond the plain decoder's tensors and keys (llama.cpp's names;
 * tests/test_arch.c checks them against the runtime's tables). */
typedef struct {
    const char *arch;
    bool granite_scales; /* embedding, residual, attention and logit scales */
    bool qkv_bias;       /* attn_q/k/v.bias (qwen2) */
    bool qk_norm;        /* attn_q_norm, attn_k_norm: one head's width (qwen3, gemma3) */
    bool post_norms;     /* post_attention_norm, post_ffw_norm (gemma3) */
    bool fused;          /* attn_qkv (Q, K, V rows) and ffn_up (gate, then up rows), no ffn_gate (phi3) */
    bool head_dim_keys;  /* attention.key_length/value_length always written (else when not n_embd/n_head) */
    bool window_keys;    /* attention.sliding_window(_pattern), rope.freq_base_swa (gemma3) */
    bool experts;        /* a mixture of experts in place of the dense FFN: always (qwen3moe, granitemoe) */
    bool experts_may;    /* ...or when n_expert > 0 (llama: Mixtral's layout) */
    bool expert_ff_key;  /* expert_feed_forward_length: experts narrower than feed_forward_length (qwen3moe) */
    /* The built-in vocabulary's chat template where --chat-template names none: a model that says it is a
     * Phi-3 (its architecture, and so its name) has its family's special tokens looked up by name in
     * other runtimes, which refuse the file without them. */
    const char *chat_template;
} synth_family;

static const synth_family FAMILIES[] = {
    {.arch = "llama", .experts_may = true},
    {.arch = "granite", .granite_scales = true},
    {.arch = "granitemoe", .granite_scales = true, .experts = true},
    {.arch = "qwen2", .qkv_bias = true},
    {.arch = "qwen3", .qk_norm = true, .head_dim_keys = true},
    {.arch = "gemma3", .qk_norm = true, .post_norms = true, .head_dim_keys = true, .window_keys = true},
    {.arch = "phi3", .fused = true, .chat_template = "phi3"},
    {.arch = "qwen3moe", .qk_norm = true, .head_dim_keys = true, .experts = true, .expert_ff_key = true},
};

static const synth_family *family_of(const char *arch)
{
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (strcmp(FAMILIES[i].arch, arch) == 0)
            return &FAMILIES[i];
    return NULL;
}

/* The chat family of the file: --chat-template's, or the architecture's with the built-in vocabulary;
 * NULL for none (or a name woolly_synth_validate refuses). */
static const woolly_chat_family *chat_family_of(const woolly_synth_config *c)
{
    const synth_family *f = family_of(c->arch);
    const char *name = c->chat_template ? c->chat_template : !c->vocab_path && f ? f->chat_template : NULL;
    return name ? woolly_chat_family_get(name) : NULL;
}

const char *woolly_synth_arch_names(void)
{
    return "llama|granite|granitemoe|qwen2|qwen3|qwen3moe|gemma3|phi3";
}

int64_t woolly_synth_head_dim(const woolly_synth_config *c)
{
    return c->head_dim > 0 ? c->head_dim : c->n_head > 0 ? c->n_embd / c->n_head : 0;
}

typedef struct {
    const char *name, *arch;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx, n_vocab;
    float rope_base, norm_eps;
    bool tied_embd;
    int64_t n_swa, swa_pattern;
} preset;

/* The real models' shapes (their config.json), with random weights. */
static const preset PRESETS[] = {
    {"tiny", "llama", 256, 768, 2, 4, 2, 0, 512, 4096, 10000.0f, 1e-5f, false, 0, 0},
    {"tiny-granite", "granite", 256, 768, 2, 4, 2, 0, 512, 4096, 1e7f, 1e-5f, true, 0, 0},
    {"llama-1b", "llama", 2048, 8192, 16, 32, 8, 0, 4096, 32000, 10000.0f, 1e-5f, false, 0, 0},
    {"granite-8b", "granite", 4096, 12800, 40, 32, 8, 0, 4096, 49152, 1e7f, 1e-5f, true, 0, 0},
    {"qwen2.5-1.5b", "qwen2", 1536, 8960, 28, 12, 2, 128, 32768, 151936, 1e6f, 1e-6f, true, 0, 0},
    {"qwen3-4b", "qwen3", 2560, 9728, 36, 32, 8, 128, 40960, 151936, 1e6f, 1e-6f, true, 0, 0},
    /* Gemma 3 1B: five sliding layers (window 512) to one global */
    {"gemma3-1b", "gemma3", 1152, 6912, 26, 4, 1, 256, 32768, 262144, 1e6f, 1e-6f, true, 512, 6},
    {"phi3-mini", "phi3", 3072, 8192, 32, 32, 32, 96, 4096, 32064, 10000.0f, 1e-5f, false, 0, 0},
    {"mistral-7b", "llama", 4096, 14336, 32, 32, 8, 128, 32768, 32768, 1e6f, 1e-5f, false, 0, 0},
    /* Granite 3.0 3B-A800M: 40 experts 512 wide, 8 a token */
    {"granitemoe-3b", "granitemoe", 1536, 512, 32, 24, 8, 0, 4096, 49155, 10000.0f, 1e-6f, true, 0, 0},
    /* Qwen3-30B-A3B's layers (128 experts 768 wide, 8 a token; feed_forward_length 6144 is unused), 12
     * of its 48: the whole model in Q4_K_M, about 17.5 GB, leaves a 24 GiB machine too little room */
    {"qwen3moe-30b-a3b-12l", "qwen3moe", 2048, 6144, 12, 32, 4, 128, 40960, 151936, 1e6f, 1e-6f, false, 0, 0},
};

/* The mixtures' experts and the scales in which a preset differs from granite-3.3-8b's. */
static const struct {
    const char *name;
    int64_t n_expert, n_expert_used, n_ff_exp;
    float attention_scale, logit_scale; /* 0: granite-3.3-8b's */
} PRESET_EXTRAS[] = {
    /* Granite 3.0 3B-A800M's config.json: attention_multiplier 1/64 (its head size), logits_scaling 6 */
    {"granitemoe-3b", 40, 8, 0, 0.015625f, 6.0f},
    {"qwen3moe-30b-a3b-12l", 128, 8, 768, 0, 0},
};

const char *woolly_synth_preset_names(void)
{
    return "tiny, tiny-granite, llama-1b, granite-8b, qwen2.5-1.5b, qwen3-4b, gemma3-1b, phi3-mini, mistral-7b, "
           "granitemoe-3b, qwen3moe-30b-a3b-12l";
}

int woolly_synth_preset(const char *name, woolly_synth_config *c, woolly_error *err)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        *c = (woolly_synth_config){.n_embd = p->n_embd,
                                   .n_ff = p->n_ff,
                                   .n_layer = p->n_layer,
                                   .n_head = p->n_head,
                                   .n_head_kv = p->n_head_kv,
                                   .head_dim = p->head_dim,
                                   .n_ctx = p->n_ctx,
                                   .n_vocab = p->n_vocab,
                                   .rope_base = p->rope_base,
                                   .norm_eps = p->norm_eps,
                                   .tied_embd = p->tied_embd,
                                   .n_swa = p->n_swa,
                                   .swa_pattern = p->swa_pattern,
                                   .rope_base_swa = 10000.0f};
        snprintf(c->arch, sizeof c->arch, "%s", p->arch);
        /* Granite 3.x's scales (granite-3.3-8b-instruct); unused by the others */
        c->embedding_scale = 12.0f;
        c->residual_scale = 0.22f;
        c->attention_scale = 0.0078125f;
        c->logit_scale = 16.0f;
        for (size_t j = 0; j < sizeof PRESET_EXTRAS / sizeof PRESET_EXTRAS[0]; j++)
            if (strcmp(PRESET_EXTRAS[j].name, name) == 0) {
                c->n_expert = PRESET_EXTRAS[j].n_expert;
                c->n_expert_used = PRESET_EXTRAS[j].n_expert_used;
                c->n_ff_exp = PRESET_EXTRAS[j].n_ff_exp;
                if (PRESET_EXTRAS[j].attention_scale > 0)
                    c->attention_scale = PRESET_EXTRAS[j].attention_scale;
                if (PRESET_EXTRAS[j].logit_scale > 0)
                    c->logit_scale = PRESET_EXTRAS[j].logit_scale;
            }
        c->ftype = WOOLLY_FTYPE_Q4_K_M;
        return 0;
    }
    return woolly_fail(err, "unknown preset '%s' (presets: %s)", name, woolly_synth_preset_names());
}

static int check_range(const char *what, int64_t v, int64_t lo, int64_t hi, woolly_error *err)
{
    if (v < lo || v > hi)
        return woolly_fail(err, "%s is %lld, must be in [%lld, %lld]", what, (long long)v, (long long)lo,
                           (long long)hi);
    return 0;
}

static int check_positive(const char *what, float v, woolly_error *err)
{
    if (!(v > 0) || !isfinite(v))
        return woolly_fail(err, "%s is %g, must be a positive finite number", what, (double)v);
    return 0;
}

int woolly_synth_validate(const woolly_synth_config *c, woolly_error *err)
{
    const synth_family *fam = family_of(c->arch);
    if (!fam)
        return woolly_fail(err, "unknown architecture '%s' (expected %s)", c->arch, woolly_synth_arch_names());
    if (check_range("n_embd", c->n_embd, 1, 65536, err) || check_range("n_ff", c->n_ff, 1, 262144, err) ||
        check_range("n_layer", c->n_layer, 1, 1024, err) || check_range("n_head", c->n_head, 1, 1024, err) ||
        check_range("n_head_kv", c->n_head_kv, 1, 1024, err) ||
        check_range("n_ctx", c->n_ctx, 1, 1 << 24, err) || check_range("head_dim", c->head_dim, 0, 1024, err) ||
        check_range("sliding window", c->n_swa, 0, 1 << 24, err) ||
        check_range("sliding-window pattern", c->swa_pattern, 0, 1024, err))
        return -1;
    if (fam->experts && c->n_expert == 0)
        return woolly_fail(err, "%s needs experts (--n-expert)", c->arch);
    if (c->n_expert != 0 && !fam->experts && !fam->experts_may)
        return woolly_fail(err, "%s has no mixture of experts (n_expert is %lld, must be 0)", c->arch,
                           (long long)c->n_expert);
    if (c->n_expert != 0 && (check_range("n_expert", c->n_expert, 1, 1024, err) ||
                             check_range("n_expert_used", c->n_expert_used, 1, c->n_expert, err)))
        return -1;
    if (c->n_expert == 0 && c->n_expert_used != 0)
        return woolly_fail(err, "n_expert_used is %lld without experts (n_expert 0)", (long long)c->n_expert_used);
    if (c->n_ff_exp != 0 && !(fam->expert_ff_key && c->n_expert > 0))
        return woolly_fail(err, "an expert width of its own (n_ff_exp %lld) is qwen3moe's only; the others' "
                                "experts are n_ff wide", (long long)c->n_ff_exp);
    if (check_range("n_ff_exp", c->n_ff_exp, 0, 262144, err))
        return -1;
    if (c->head_dim == 0 && c->n_embd % c->n_head != 0)
        return woolly_fail(err, "n_head %lld does not divide n_embd %lld (give --head-dim)", (long long)c->n_head,
                           (long long)c->n_embd);
    if (woolly_synth_head_dim(c) % 2 != 0)
        return woolly_fail(err, "the head size %lld must be even (RoPE rotates pairs)",
                           (long long)woolly_synth_head_dim(c));
    if (c->n_swa > 0 && !fam->window_keys && strcmp(c->arch, "llama") != 0)
        return woolly_fail(err, "%s has no sliding-window attention", c->arch);
    if (c->n_head % c->n_head_kv != 0)
        return woolly_fail(err, "n_head_kv %lld does not divide n_head %lld", (long long)c->n_head_kv,
                           (long long)c->n_head);
    if (check_positive("rope base", c->rope_base, err) || check_positive("norm epsilon", c->norm_eps, err) ||
        (fam->window_keys && check_positive("sliding layers' rope base", c->rope_base_swa, err)))
        return -1;
    if (fam->granite_scales && (check_positive("embedding scale", c->embedding_scale, err) ||
                                            check_positive("residual scale", c->residual_scale, err) ||
                                            check_positive("attention scale", c->attention_scale, err) ||
                                            check_positive("logit scale", c->logit_scale, err)))
        return -1;
    if (c->chat_template && !woolly_chat_family_get(c->chat_template))
        return woolly_fail(err, "unknown chat template '%s' (expected %s)", c->chat_template,
                           woolly_chat_family_names());
    const woolly_chat_family *family = chat_family_of(c);
    if (strcmp(woolly_ftype_name(c->ftype), "?") == 0)
        return woolly_fail(err, "unknown type %d", (int)c->ftype);
    if (!c->vocab_path && check_range("n_vocab", c->n_vocab, woolly_synth_vocab_min(family), 1 << 24, err))
        return -1;
    if (c->vocab_path && c->n_vocab != 0 && check_range("n_vocab", c->n_vocab, 1, 1 << 24, err))
        return -1;
    return 0;
}

/* ---- random rows -------------------------------------------------------------------------------- */

/* SplitMix64: a fast generator whose every output is a good hash of its counter, which lets each row
 * start its own stream (so rows can be made in any order, on any thread). */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t seed;
    uint64_t index; /* tensor number in the file */
    int64_t k;      /* row length */
    float mean, std;
} random_tensor;

static int random_row(void *ctx, int64_t row, float *dst, woolly_error *err)
{
    (void)err;
    const random_tensor *t = ctx;
    uint64_t s = t->seed;
    s = splitmix64(&s) ^ t->index;
    s = splitmix64(&s) ^ (uint64_t)row;
    /* Box-Muller: two normal values per 64 random bits (24 bits for the radius, 24 for the angle) */
    for (int64_t i = 0; i < t->k; i += 2) {
        const uint64_t z = splitmix64(&s);
        const float u1 = ((float)(z >> 40) + 0.5f) * (1.0f / 16777216.0f); /* (0, 1) */
        const float u2 = (float)(z & 0xFFFFFF) * (1.0f / 16777216.0f);     /* [0, 1) */
        const float r = sqrtf(-2.0f * logf(u1)), a = 6.28318530718f * u2;
        dst[i] = t->mean + t->std * r * cosf(a);
        if (i + 1 < t->k)
            dst[i + 1] = t->mean + t->std * r * sinf(a);
    }
    return 0;
}

/* ---- the tensors -------------------------------------------------------------------------------- */

typedef struct {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[3];
    float mean, std; /* of its values: norms around 1, weights and biases around 0 */
} tensor_spec;

/* ne1 0: a vector; ne2 0: a matrix, else that many matrices (a mixture's experts) */
static void spec(tensor_spec *s, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2, bool norm)
{
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    s->ne[0] = ne0;
    s->ne[1] = ne1 ? ne1 : 1;
    s->ne[2] = ne2 ? ne2 : 1;
    s->mean = norm ? NORM_MEAN : 0.0f;
    s->std = norm ? NORM_STD : WEIGHT_STD;
}

/* At most this many tensors per layer (phi3's fused ones replace three and two). */
#define MAX_LAYER_TENSORS 15

/* The tensors in the order of llama.cpp's files: the global ones by name, then each layer's by name. */
static size_t plan_tensors(const woolly_synth_config *c, tensor_spec *t)
{
    const synth_family *f = family_of(c->arch);
    const uint64_t e = (uint64_t)c->n_embd, hd = (uint64_t)woolly_synth_head_dim(c);
    const uint64_t q = hd * (uint64_t)c->n_head, kv = hd * (uint64_t)c->n_head_kv;
    const uint64_t ff = (uint64_t)c->n_ff, v = (uint64_t)c->n_vocab;
    const bool moe = c->n_expert > 0;
    const uint64_t nx = (uint64_t)c->n_expert, fx = c->n_ff_exp > 0 ? (uint64_t)c->n_ff_exp : ff;
    size_t n = 0;
    if (!c->tied_embd)
        spec(&t[n++], "output.weight", e, v, 0, false);
    spec(&t[n++], "output_norm.weight", e, 0, 0, true);
    spec(&t[n++], "token_embd.weight", e, v, 0, false);
    for (int64_t i = 0; i < c->n_layer; i++) {
        /* role, row length, rows (0: a vector), matrices (0: one), is a norm, present */
        const struct {
            const char *role;
            uint64_t ne0, ne1, ne2;
            bool norm, present;
        } LAYER[] = {
            {"attn_k.bias", kv, 0, 0, false, f->qkv_bias},
            {"attn_k.weight", e, kv, 0, false, !f->fused},
            {"attn_k_norm.weight", hd, 0, 0, true, f->qk_norm},
            {"attn_norm.weight", e, 0, 0, true, true},
            {"attn_output.weight", q, e, 0, false, true},
            {"attn_q.bias", q, 0, 0, false, f->qkv_bias},
            {"attn_q.weight", e, q, 0, false, !f->fused},
            {"attn_q_norm.weight", hd, 0, 0, true, f->qk_norm},
            {"attn_qkv.weight", e, q + 2 * kv, 0, false, f->fused},
            {"attn_v.bias", kv, 0, 0, false, f->qkv_bias},
            {"attn_v.weight", e, kv, 0, false, !f->fused},
            {"ffn_down.weight", ff, e, 0, false, !moe},
            {"ffn_down_exps.weight", fx, e, nx, false, moe},
            {"ffn_gate.weight", e, ff, 0, false, !f->fused && !moe},
            {"ffn_gate_exps.weight", e, fx, nx, false, moe},
            {"ffn_gate_inp.weight", e, nx, 0, false, moe},
            {"ffn_norm.weight", e, 0, 0, true, true},
            {"ffn_up.weight", e, f->fused ? 2 * ff : ff, 0, false, !moe},
            {"ffn_up_exps.weight", e, fx, nx, false, moe},
            {"post_attention_norm.weight", e, 0, 0, true, f->post_norms},
            {"post_ffw_norm.weight", e, 0, 0, true, f->post_norms},
        };
        for (size_t r = 0; r < sizeof LAYER / sizeof LAYER[0]; r++) {
            if (!LAYER[r].present)
                continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)i, LAYER[r].role);
            spec(&t[n++], name, LAYER[r].ne0, LAYER[r].ne1, LAYER[r].ne2, LAYER[r].norm);
        }
    }
    return n;
}

static size_t max_tensors(const woolly_synth_config *c)
{
    return 3 + MAX_LAYER_TENSORS * (size_t)c->n_layer;
}

size_t woolly_synth_tensor_table(const woolly_synth_config *c, woolly_synth_tensor *out, size_t cap)
{
    if (!family_of(c->arch))
        return 0;
    tensor_spec *specs = calloc(max_tensors(c), sizeof *specs);
    if (!specs)
        return 0;
    const size_t n = plan_tensors(c, specs);
    const woolly_mix_model mix = {
        .n_layer = (int)c->n_layer, .tied_embd = c->tied_embd, .n_expert = (int)c->n_expert};
    for (size_t i = 0; i < n && i < cap; i++) {
        woolly_synth_tensor *t = &out[i];
        snprintf(t->name, sizeof t->name, "%s", specs[i].name);
        t->n_dims = specs[i].n_dims;
        t->ne[0] = specs[i].ne[0];
        t->ne[1] = specs[i].ne[1];
        t->ne[2] = specs[i].ne[2];
        t->type = woolly_mix_type(c->ftype, specs[i].name, specs[i].n_dims, specs[i].ne, &mix, NULL, 0);
    }
    free(specs);
    return n;
}

/* ---- metadata ----------------------------------------------------------------------------------- */

/* The tokenizer keys: all tokenizer.* keys of the vocab file, or the built-in vocabulary's. Sets
 * *n_vocab to the vocabulary's size. */
static int write_tokenizer(gguf_writer *w, const woolly_synth_config *c, int64_t *n_vocab, woolly_error *err)
{
    const woolly_chat_family *family = chat_family_of(c);
    if (c->vocab_path) {
        gguf_file *g = gguf_open(c->vocab_path, err);
        if (!g)
            return -1;
        woolly_error kerr = {{0}};
        const gguf_array *tokens = NULL;
        if (!gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, &kerr)) {
            gguf_close(g);
            return woolly_fail(err, "%s: no usable tokenizer.ggml.tokens array%s%s", c->vocab_path,
                               kerr.msg[0] ? ": " : "", kerr.msg);
        }
        if (c->n_vocab != 0 && (uint64_t)c->n_vocab != tokens->n) {
            const uint64_t have = tokens->n;
            gguf_close(g);
            return woolly_fail(err, "n_vocab %lld does not match the %llu tokens of %s",
                               (long long)c->n_vocab, (unsigned long long)have, c->vocab_path);
        }
        if (tokens->n == 0 || tokens->n > (1 << 24)) {
            const uint64_t have = tokens->n;
            gguf_close(g);
            return woolly_fail(err, "%s: %llu tokens (expected 1 to %d)", c->vocab_path,
                               (unsigned long long)have, 1 << 24);
        }
        *n_vocab = (int64_t)tokens->n;
        for (uint64_t i = 0; i < g->n_kv; i++)
            if (g->kv[i].key.len > 10 && memcmp(g->kv[i].key.ptr, "tokenizer.", 10) == 0)
                gguf_writer_copy_kv(w, &g->kv[i]);
        /* a template whose markers this vocabulary cannot encode as single tokens still works as text,
         * but say so */
        for (const char *const *sp = family ? family->specials : NULL; sp && *sp && !c->quiet; sp++) {
            bool found = false;
            for (uint64_t i = 0; i < tokens->n && !found; i++)
                found = gguf_str_eq(tokens->strs[i], *sp);
            if (!found)
                fprintf(stderr, "note: %s has no token %s, which the %s chat template uses\n", c->vocab_path,
                        *sp, family->name);
        }
        gguf_close(g);
    } else {
        woolly_synth_vocab v;
        if (woolly_synth_vocab_build(c->n_vocab, family, &v, err) != 0)
            return -1;
        gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tokens, v.n);
        gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", v.types, v.n);
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merges, v.n_merges);
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", v.bos);
        gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", v.eos);
        gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v.add_bos);
        gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
        *n_vocab = (int64_t)v.n;
        woolly_synth_vocab_free(&v);
    }
    if (family)
        gguf_writer_set_str(w, "tokenizer.chat_template", family->jinja);
    return 0;
}

static void write_hparams(gguf_writer *w, const woolly_synth_config *c, int64_t n_vocab)
{
    char key[96], name[96];
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s." k, c->arch), key)
    snprintf(name, sizeof name, "synthetic-%s-%lldx%lld", c->arch, (long long)c->n_embd,
             (long long)c->n_layer);
    gguf_writer_set_str(w, "general.name", name);
    gguf_writer_set_u32(w, ARCH_KEY("context_length"), (uint32_t)c->n_ctx);
    gguf_writer_set_u32(w, ARCH_KEY("embedding_length"), (uint32_t)c->n_embd);
    gguf_writer_set_u32(w, ARCH_KEY("block_count"), (uint32_t)c->n_layer);
    gguf_writer_set_u32(w, ARCH_KEY("feed_forward_length"), (uint32_t)c->n_ff);
    gguf_writer_set_u32(w, ARCH_KEY("attention.head_count"), (uint32_t)c->n_head);
    gguf_writer_set_u32(w, ARCH_KEY("attention.head_count_kv"), (uint32_t)c->n_head_kv);
    const synth_family *f = family_of(c->arch);
    const int64_t hd = woolly_synth_head_dim(c);
    if (f->head_dim_keys || hd != c->n_embd / c->n_head) {
        gguf_writer_set_u32(w, ARCH_KEY("attention.key_length"), (uint32_t)hd);
        gguf_writer_set_u32(w, ARCH_KEY("attention.value_length"), (uint32_t)hd);
    }
    gguf_writer_set_u32(w, ARCH_KEY("rope.dimension_count"), (uint32_t)hd);
    gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base"), c->rope_base);
    if (c->n_swa > 0)
        gguf_writer_set_u32(w, ARCH_KEY("attention.sliding_window"), (uint32_t)c->n_swa);
    if (f->window_keys && c->n_swa > 0) {
        gguf_writer_set_u32(w, ARCH_KEY("attention.sliding_window_pattern"), (uint32_t)c->swa_pattern);
        gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base_swa"), c->rope_base_swa);
    }
    gguf_writer_set_f32(w, ARCH_KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    gguf_writer_set_u32(w, ARCH_KEY("vocab_size"), (uint32_t)n_vocab);
    if (c->n_expert > 0) {
        gguf_writer_set_u32(w, ARCH_KEY("expert_count"), (uint32_t)c->n_expert);
        gguf_writer_set_u32(w, ARCH_KEY("expert_used_count"), (uint32_t)c->n_expert_used);
        if (f->expert_ff_key)
            gguf_writer_set_u32(w, ARCH_KEY("expert_feed_forward_length"),
                                (uint32_t)(c->n_ff_exp > 0 ? c->n_ff_exp : c->n_ff));
    }
    if (f->granite_scales) {
        gguf_writer_set_f32(w, ARCH_KEY("embedding_scale"), c->embedding_scale);
        gguf_writer_set_f32(w, ARCH_KEY("residual_scale"), c->residual_scale);
        gguf_writer_set_f32(w, ARCH_KEY("attention.scale"), c->attention_scale);
        gguf_writer_set_f32(w, ARCH_KEY("logit_scale"), c->logit_scale);
    }
#undef ARCH_KEY
    /* as llama.cpp: the quantizer records the block format version, the F16/BF16/F32 converter does not */
    if (c->ftype != WOOLLY_FTYPE_F32 && c->ftype != WOOLLY_FTYPE_F16 && c->ftype != WOOLLY_FTYPE_BF16)
        gguf_writer_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION);
    gguf_writer_set_u32(w, "general.file_type", (uint32_t)c->ftype);
}

/* ---- writing ------------------------------------------------------------------------------------ */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double t0;
    char (*notes)[160];
} progress_ctx;

static void print_progress(void *ctx, size_t i, size_t n, const woolly_stream_tensor *t)
{
    const progress_ctx *p = ctx;
    char shape[64];
    if (t->n_dims == 1)
        snprintf(shape, sizeof shape, "%llu", (unsigned long long)t->ne[0]);
    else if (t->n_dims == 2)
        snprintf(shape, sizeof shape, "%llu x %llu", (unsigned long long)t->ne[0],
                 (unsigned long long)t->ne[1]);
    else
        snprintf(shape, sizeof shape, "%llu x %llu x %llu", (unsigned long long)t->ne[0],
                 (unsigned long long)t->ne[1], (unsigned long long)t->ne[2]);
    fprintf(stderr, "[%4zu/%zu] %-28s %-14s %-5s%s%s  (%.1f s)\n", i + 1, n, t->name, shape,
            woolly_type_get(t->type)->name, p->notes[i][0] ? "  note: " : "", p->notes[i],
            now_seconds() - p->t0);
}

int woolly_synth_write(const woolly_synth_config *cfg, const char *out, woolly_error *err)
{
    if (woolly_synth_validate(cfg, err) != 0)
        return -1;
    woolly_synth_config c = *cfg;
    const double t0 = now_seconds();
    const int n_threads = c.n_threads > 0 ? c.n_threads : woolly_cpu_get()->n_cores;

    gguf_writer *w = gguf_writer_open(out, err);
    if (!w)
        return -1;
    gguf_writer_set_str(w, "general.architecture", c.arch);
    int64_t n_vocab = 0;
    if (write_tokenizer(w, &c, &n_vocab, err) != 0) {
        gguf_writer_close(w, NULL);
        return -1;
    }
    c.n_vocab = n_vocab;
    write_hparams(w, &c, n_vocab);

    const size_t cap = max_tensors(&c);
    tensor_spec *specs = calloc(cap, sizeof *specs);
    random_tensor *gen = calloc(cap, sizeof *gen);
    woolly_stream_tensor *plan = calloc(cap, sizeof *plan);
    char(*notes)[160] = calloc(cap, sizeof *notes);
    int status = -1;
    if (!specs || !gen || !plan || !notes) {
        woolly_fail(err, "out of memory planning %zu tensors", cap);
    } else {
        const size_t n = plan_tensors(&c, specs);
        const woolly_mix_model mix = {
            .n_layer = (int)c.n_layer, .tied_embd = c.tied_embd, .n_expert = (int)c.n_expert};
        for (size_t i = 0; i < n; i++) {
            const tensor_spec *s = &specs[i];
            gen[i] = (random_tensor){.seed = c.seed,
                                     .index = i,
                                     .k = (int64_t)s->ne[0],
                                     .mean = s->mean,
                                     .std = s->std};
            plan[i] = (woolly_stream_tensor){
                .name = s->name,
                .n_dims = s->n_dims,
                .ne = {s->ne[0], s->ne[1], s->ne[2], 1},
                .type = woolly_mix_type(c.ftype, s->name, s->n_dims, s->ne, &mix, notes[i], sizeof notes[i]),
                .rows = random_row,
                .ctx = &gen[i]};
        }
        progress_ctx pc = {.t0 = t0, .notes = notes};
        status = woolly_stream_declare(w, plan, n, err);
        if (status == 0)
            status = gguf_writer_write_header(w, err);
        if (status == 0)
            status = woolly_stream_write(w, plan, n, n_threads, c.quiet ? NULL : print_progress, &pc, err);
        if (status == 0 && !c.quiet) {
            uint64_t bytes = 0;
            for (size_t i = 0; i < n; i++)
                bytes += woolly_stream_tensor_bytes(&plan[i]);
            fprintf(stderr,
                    "synthesized %s (%s, %s): %zu tensors, %.2f MiB of tensor data, %.1f s on %d threads\n",
                    out, c.arch, woolly_ftype_name(c.ftype), n, (double)bytes / (1 << 20), now_seconds() - t0,
                    n_threads);
        }
    }
    woolly_error cerr = {{0}};
    if (gguf_writer_close(w, &cerr) != 0 && status == 0) {
        *err = cerr;
        status = -1;
    }
    free(specs), free(gen), free(plan), free(notes);
    return status;
}
