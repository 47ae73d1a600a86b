/* Sliding-window attention through the whole forward pass: a one-layer llama model (woolly synth's tiny
 * shape cut to one layer, F32 weights) given `llama.attention.sliding_window` W, as Mistral's files may.
 * With one layer, position p's logits depend only on the tokens p - W + 1 .. p, and RoPE is relative, so
 * they equal the logits of the last of those W tokens evaluated alone from position 0 (within the float
 * error of rotating by other angles). Checked for a prompt evaluated in batches whose KV ring (W - 1 +
 * n_batch rounded up to 128 rows) wraps several times, and for generated tokens one at a time (the decode
 * path, its KV range split into chunks or not), with every cache type; and the same file without the key
 * misses those logits by far (so the check can fail). The ring's memory and its limits: the context's
 * cache is the ring's size, a rewind or a copy that needs positions the ring no longer holds is refused
 * with a message, and one within it goes on with the right logits. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "gguf.h"
#include "gguf_write.h"
#include "synth.h"
#include "testutil.h"

enum { W = 16, N_BATCH = 64, N_CTX = 512, N_TOKENS = 300, N_VOCAB = 4096 };

/* Float error of the same attention at other RoPE angles (measured on a Zen 3 at the AVX2 level: at most
 * 1.2e-13 with F32 weights and an F32 cache); an F16 or Q8_0 cache rounds K and V, rotated by other
 * angles, apart (at most 1.8e-9 and 1.0e-6): */
#define WINDOW_F32_MAX_NMSE 1e-10
#define WINDOW_F16_MAX_NMSE 1e-7
#define WINDOW_Q8_0_MAX_NMSE 1e-5
/* What the window changes: the logits with full attention differ from the window's by far more (at
 * least 0.25 measured). */
#define WINDOW_MATTERS_MIN_NMSE 1e-3

/* The synth model rewritten with the window key (window 0: the synth file as it is). */
static const char *window_model(int32_t window)
{
    static char plain[512], windowed[512];
    if (!plain[0]) {
        woolly_synth_config c;
        woolly_error err;
        cr_assert_eq(woolly_synth_preset("tiny", &c, &err), 0, "%s", err.msg);
        c.n_layer = 1;
        c.n_vocab = N_VOCAB;
        c.ftype = WOOLLY_FTYPE_F32;
        c.quiet = true;
        snprintf(plain, sizeof plain, "%s", tu_tmp_path("window-plain.gguf"));
        cr_assert_eq(woolly_synth_write(&c, plain, &err), 0, "%s", err.msg);
    }
    if (!window)
        return plain;
    snprintf(windowed, sizeof windowed, "%s", tu_tmp_path("window-16.gguf"));
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(plain, &err);
    cr_assert(g != NULL, "%s", err.msg);
    gguf_writer *w = gguf_writer_open(windowed, &err);
    cr_assert(w != NULL, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_kv; i++)
        gguf_writer_copy_kv(w, &g->kv[i]);
    gguf_writer_set_u32(w, "llama.attention.sliding_window", (uint32_t)window);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        cr_assert_geq(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne), 0, "%s", t->name);
    }
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(gguf_writer_write_data(w, g->tensors[i].data, g->tensors[i].nbytes, &err), 0, "%s",
                     err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    gguf_close(g);
    return windowed;
}

static woolly_model *load(int32_t window)
{
    woolly_error err;
    woolly_model *m = woolly_model_load(window_model(window), &err);
    cr_assert(m != NULL, "%s", err.msg);
    return m;
}

static woolly_context *open_ctx(woolly_model *m, woolly_kv_type kv, int32_t n_seq)
{
    woolly_context_params p = woolly_context_default_params();
    p.n_ctx = N_CTX;
    p.n_batch = N_BATCH;
    p.n_threads = 2;
    p.kv_type = kv;
    p.logits_all = true;
    p.n_seq_max = n_seq;
    woolly_error err;
    woolly_context *c = woolly_context_create(m, &p, &err);
    cr_assert(c != NULL, "%s", err.msg);
    return c;
}

static void tokens(woolly_token *ids)
{
    tu_rng r = {0x5117};
    for (int i = 0; i < N_TOKENS; i++)
        ids[i] = (woolly_token)(tu_rand_u64(&r) % (N_VOCAB - 1)) + 1;
}

/* The logits of the last of the W tokens that end at position p, evaluated alone from position 0. */
static void alone(woolly_context *c, const woolly_token *ids, int p, float *out)
{
    const int first = p + 1 > W ? p + 1 - W : 0;
    cr_assert_eq(woolly_context_rewind(c, 0), 0);
    cr_assert_eq(woolly_eval(c, ids + first, p + 1 - first), 0, "%s", woolly_last_error());
    memcpy(out, woolly_get_logits(c, -1), sizeof(float) * N_VOCAB);
}

static double max_nmse_of(woolly_kv_type kv)
{
    return kv == WOOLLY_KV_F32   ? WINDOW_F32_MAX_NMSE
           : kv == WOOLLY_KV_F16 ? WINDOW_F16_MAX_NMSE
                                 : WINDOW_Q8_0_MAX_NMSE;
}

/* A prompt of N_TOKENS in batches of N_BATCH, then generated tokens one at a time (split into KV chunks
 * as `split` says), against each position's W tokens alone. */
static void check_window(woolly_kv_type kv, int split)
{
    woolly_model *m = load(W);
    woolly_context *c = open_ctx(m, kv, 1), *ref = open_ctx(m, kv, 1);
    c->attn_split = split;
    woolly_token ids[N_TOKENS];
    tokens(ids);
    enum { PROMPT = 200 };
    float *want = malloc(sizeof(float) * N_VOCAB);
    cr_assert(want != NULL);
    /* the prompt: N_BATCH tokens a call (the ring of 128 rows wraps at 128 and 256) */
    for (int p0 = 0; p0 < PROMPT; p0 += N_BATCH) {
        const int n = PROMPT - p0 < N_BATCH ? PROMPT - p0 : N_BATCH;
        cr_assert_eq(woolly_eval(c, ids + p0, n), 0, "%s", woolly_last_error());
        for (int t = 0; t < n; t += 7) {
            alone(ref, ids, p0 + t, want);
            const double e = tu_nmse(woolly_get_logits(c, t), want, N_VOCAB);
            cr_expect_leq(e, max_nmse_of(kv), "kv %d: prompt position %d: NMSE %.3g against its window alone",
                          (int)kv, p0 + t, e);
        }
    }
    /* generated tokens: the decode path, over the ring's end at 256 */
    for (int p = PROMPT; p < N_TOKENS; p++) {
        cr_assert_eq(woolly_eval(c, ids + p, 1), 0, "%s", woolly_last_error());
        if (p % 5 && p != N_TOKENS - 1)
            continue;
        alone(ref, ids, p, want);
        const double e = tu_nmse(woolly_get_logits(c, -1), want, N_VOCAB);
        cr_expect_leq(e, max_nmse_of(kv),
                      "kv %d split %d: generated position %d: NMSE %.3g against its window", (int)kv, split,
                      p, e);
    }
    free(want);
    woolly_context_close(ref);
    woolly_context_close(c);
    woolly_model_close(m);
}

Test(model_window, f32_cache_prompt_and_decode)
{
    check_window(WOOLLY_KV_F32, 0);
}

Test(model_window, f32_cache_decode_split_in_chunks)
{
    check_window(WOOLLY_KV_F32, 3);
}

Test(model_window, f16_cache)
{
    check_window(WOOLLY_KV_F16, 0);
}

Test(model_window, q8_0_cache)
{
    check_window(WOOLLY_KV_Q8_0, 0);
}

/* Without the key, the same weights attend to everything before: far from the window's logits. */
Test(model_window, the_window_changes_the_logits)
{
    woolly_model *full = load(0), *win = load(W);
    cr_expect_eq(full->cfg.n_swa, 0);
    cr_expect_eq(win->cfg.n_swa, W);
    cr_expect_eq(win->cfg.swa_pattern, 0, "Mistral's window: every layer slides");
    woolly_context *c = open_ctx(full, WOOLLY_KV_F32, 1), *ref = open_ctx(win, WOOLLY_KV_F32, 1);
    woolly_token ids[N_TOKENS];
    tokens(ids);
    float want[N_VOCAB];
    cr_assert_eq(woolly_eval(c, ids, N_BATCH), 0, "%s", woolly_last_error());
    for (int p = W + 8; p < N_BATCH; p += 13) {
        alone(ref, ids, p, want);
        const double e = tu_nmse(woolly_get_logits(c, p), want, N_VOCAB);
        cr_expect_geq(e, WINDOW_MATTERS_MIN_NMSE,
                      "position %d: full attention within NMSE %.3g of the window's", p, e);
    }
    woolly_context_close(ref);
    woolly_context_close(c);
    woolly_model_close(full);
    woolly_model_close(win);
}

/* The ring's memory: a sliding layer keeps 128 rows (W - 1 + n_batch rounded up), not n_ctx. */
Test(model_window, the_cache_holds_the_ring_only)
{
    woolly_model *full = load(0), *win = load(W);
    woolly_context *a = open_ctx(full, WOOLLY_KV_F16, 1), *b = open_ctx(win, WOOLLY_KV_F16, 1);
    const size_t row = 2 * (size_t)win->cfg.n_head_kv * woolly_row_bytes(WOOLLY_TYPE_F16, win->cfg.head_dim);
    cr_expect_eq(woolly_kv_cache_total_bytes(&a->kv), row * N_CTX);
    cr_expect_eq(woolly_kv_cache_total_bytes(&b->kv), row * 128);
    cr_expect_eq(woolly_kv_cache_ring(&b->kv, 0), 128);
    cr_expect_eq(woolly_kv_cache_bytes_swa(WOOLLY_TYPE_F16, N_CTX, N_BATCH, 1, (const int32_t[]){W},
                                           win->cfg.n_head_kv, win->cfg.head_dim),
                 row * 128);
    woolly_context_close(a);
    woolly_context_close(b);
    woolly_model_close(full);
    woolly_model_close(win);
}

/* A rewind or a copy the ring can serve goes on with the right logits; one that needs positions it no
 * longer holds is refused, and says why. */
Test(model_window, rewind_and_copy_within_the_ring_only)
{
    woolly_model *m = load(W);
    woolly_context *c = open_ctx(m, WOOLLY_KV_F32, 2), *ref = open_ctx(m, WOOLLY_KV_F32, 1);
    woolly_token ids[N_TOKENS];
    tokens(ids);
    float want[N_VOCAB];
    for (int p0 = 0; p0 < 250; p0 += N_BATCH)
        cr_assert_eq(woolly_eval(c, ids + p0, 250 - p0 < N_BATCH ? 250 - p0 : N_BATCH), 0, "%s",
                     woolly_last_error());
    /* the ring holds positions 122 .. 249: going on from 100 needs 85 .. 99 */
    cr_expect_eq(woolly_context_rewind(c, 100), -1);
    cr_expect(strstr(woolly_last_error(), "sliding-window") != NULL, "%s", woolly_last_error());
    cr_expect_eq(woolly_context_n_past(c), 250, "a refused rewind changes nothing");
    cr_expect_eq(woolly_seq_copy(c, 0, 1, 100), -1);
    cr_expect(strstr(woolly_last_error(), "sliding-window") != NULL, "%s", woolly_last_error());
    /* going on from 200 needs 185 .. 199: held */
    cr_assert_eq(woolly_seq_copy(c, 0, 1, 200), 0, "%s", woolly_last_error());
    cr_assert_eq(woolly_context_rewind(c, 200), 0, "%s", woolly_last_error());
    cr_assert_eq(woolly_eval(c, ids + 200, 3), 0, "%s", woolly_last_error());
    alone(ref, ids, 202, want);
    cr_expect_leq(tu_nmse(woolly_get_logits(c, 2), want, N_VOCAB), WINDOW_F32_MAX_NMSE, "after the rewind");
    /* the copy goes on as sequence 1 */
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 4), 0);
    for (int i = 0; i < 4; i++)
        woolly_batch_add(&b, ids[200 + i], 200 + i, 1, i == 3);
    cr_assert_eq(woolly_decode(c, &b), 0, "%s", woolly_last_error());
    alone(ref, ids, 203, want);
    cr_expect_leq(tu_nmse(woolly_get_logits(c, 3), want, N_VOCAB), WINDOW_F32_MAX_NMSE, "after the copy");
    woolly_batch_free(&b);
    /* back to 0 always works */
    cr_expect_eq(woolly_context_rewind(c, 0), 0);
    woolly_context_close(ref);
    woolly_context_close(c);
    woolly_model_close(m);
}
