/* The seam the embeddings endpoint stands on: woolly_set_embeddings / woolly_get_embeddings keep each
 * token's final hidden state (after the output norm). Checked against the float64 references
 * (../shared/testdata/refs, refforward.py's logits): the hidden state times the file's own output
 * matrix, in float64, must give the reference logits as closely as the engine's logits do; keeping the
 * states must not change the logits; a token's state must not depend on the batch around it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "testutil.h"
#include "woolly.h"
#include "wtype.h"

typedef struct ref {
    int32_t *ids;
    int n;
    int n_vocab;
    float *logits;
} ref;

static ref load_ref(const char *model)
{
    char rel[256];
    ref r;
    snprintf(rel, sizeof rel, "refs/%s.tokens.txt", model);
    char *txt = tu_read_file(tu_data(rel), NULL);
    r.n = tu_parse_ids(txt, &r.ids);
    free(txt);
    size_t size;
    snprintf(rel, sizeof rel, "refs/%s.ref64.f32", model);
    r.logits = (float *)tu_read_file(tu_data(rel), &size);
    cr_assert(r.n > 0 && size % ((size_t)r.n * sizeof(float)) == 0);
    r.n_vocab = (int)(size / sizeof(float) / (size_t)r.n);
    return r;
}

/* The output matrix as the file stores it (the tied token embeddings when there is none), as floats. */
static float *output_matrix(const char *path, int n_vocab, int n_embd)
{
    woolly_error err;
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g, "%s", err.msg);
    const gguf_tensor *t = gguf_find_tensor(g, "output.weight");
    if (!t)
        t = gguf_find_tensor(g, "token_embd.weight");
    cr_assert(t && (int)t->ne[0] == n_embd && (int)t->ne[1] == n_vocab);
    float *w = malloc(sizeof *w * (size_t)n_vocab * (size_t)n_embd);
    const size_t row = woolly_row_bytes(t->type, n_embd);
    for (int v = 0; v < n_vocab; v++)
        cr_assert_eq(woolly_dequantize_row(t->type, (const char *)t->data + (size_t)v * row,
                                           w + (size_t)v * n_embd, n_embd),
                     0);
    gguf_close(g);
    return w;
}

static void check_model(const char *name, double max_nmse)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    char *path = strdup(tu_data(rel)); /* tu_data's buffer is reused */
    ref r = load_ref(name);
    woolly_model *m = woolly_model_open(path);
    cr_assert(m, "%s", woolly_last_error());
    const int d = woolly_model_n_embd(m), nv = woolly_model_n_vocab(m);
    cr_assert_eq(nv, r.n_vocab);
    woolly_context_params cp = woolly_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    cp.logits_all = true;
    woolly_context *c = woolly_context_open(m, &cp);
    cr_assert(c, "%s", woolly_last_error());

    /* Off: no states. Then the logits without them, to compare. */
    cr_assert_eq(woolly_eval(c, r.ids, r.n), 0, "%s", woolly_last_error());
    cr_expect_null(woolly_get_embeddings(c, 0));
    float *plain = malloc(sizeof *plain * (size_t)r.n * nv);
    for (int t = 0; t < r.n; t++)
        memcpy(plain + (size_t)t * nv, woolly_get_logits(c, t), sizeof *plain * nv);

    woolly_context_rewind(c, 0);
    cr_assert_eq(woolly_set_embeddings(c, true), 0);
    cr_assert_eq(woolly_eval(c, r.ids, r.n), 0, "%s", woolly_last_error());
    float *w = output_matrix(path, nv, d);
    float *from_state = malloc(sizeof *from_state * (size_t)r.n * nv);
    float *states = malloc(sizeof *states * (size_t)r.n * d);
    for (int t = 0; t < r.n; t++) {
        const float *e = woolly_get_embeddings(c, t);
        cr_assert(e, "token %d: %s", t, woolly_last_error());
        memcpy(states + (size_t)t * d, e, sizeof *e * d);
        cr_expect_eq(memcmp(woolly_get_logits(c, t), plain + (size_t)t * nv, sizeof(float) * nv), 0,
                     "%s: keeping the states changed token %d's logits", name, t);
        for (int v = 0; v < nv; v++) {
            double acc = 0.0;
            for (int i = 0; i < d; i++)
                acc += (double)e[i] * w[(size_t)v * d + i];
            from_state[(size_t)t * nv + v] = (float)acc;
        }
    }
    cr_expect_eq(woolly_get_embeddings(c, -1), woolly_get_embeddings(c, r.n - 1));
    cr_expect_null(woolly_get_embeddings(c, r.n));
    double nmse = 0.0, engine = 0.0;
    for (int t = 0; t < r.n; t++) {
        nmse += tu_nmse(from_state + (size_t)t * nv, r.logits + (size_t)t * nv, (size_t)nv);
        engine += tu_nmse(plain + (size_t)t * nv, r.logits + (size_t)t * nv, (size_t)nv);
    }
    nmse /= r.n;
    engine /= r.n;
    fprintf(stderr, "NMSE %s: hidden state x output matrix %.3g, engine logits %.3g\n", name, nmse, engine);
    cr_expect(nmse <= max_nmse, "%s: the hidden states give the reference logits at NMSE %g > %g", name, nmse,
              max_nmse);

    /* The same tokens as sequence 1 of a two-sequence batch, beside other tokens: the same states. */
    woolly_context_params cp2 = cp;
    cp2.logits_all = false;
    cp2.n_seq_max = 2;
    woolly_context *c2 = woolly_context_open(m, &cp2);
    cr_assert(c2, "%s", woolly_last_error());
    cr_assert_eq(woolly_set_embeddings(c2, true), 0);
    woolly_batch b;
    cr_assert_eq(woolly_batch_init(&b, 2 * r.n), 0);
    for (int t = 0; t < r.n; t++)
        woolly_batch_add(&b, r.ids[r.n - 1 - t], t, 0, false);
    for (int t = 0; t < r.n; t++)
        woolly_batch_add(&b, r.ids[t], t, 1, t == r.n - 1);
    cr_assert_eq(woolly_decode(c2, &b), 0, "%s", woolly_last_error());
    double worst = 0.0;
    for (int t = 0; t < r.n; t++) {
        const float *e = woolly_get_embeddings(c2, r.n + t);
        cr_assert(e);
        for (int i = 0; i < d; i++)
            worst = fmax(worst, fabs((double)e[i] - states[(size_t)t * d + i]));
    }
    cr_expect(worst <= 1e-5, "%s: a token's state depends on its batch (%g apart)", name, worst);
    woolly_set_embeddings(c2, false);
    b.n_tokens = 0;
    woolly_batch_add(&b, r.ids[0], r.n, 1, true);
    cr_assert_eq(woolly_decode(c2, &b), 0);
    cr_expect_null(woolly_get_embeddings(c2, 0), "states kept after woolly_set_embeddings(false)");
    woolly_batch_free(&b);
    woolly_context_close(c2);

    free(states);
    free(from_state);
    free(w);
    free(plain);
    woolly_context_close(c);
    woolly_model_close(m);
    free(path);
    free(r.ids);
    free(r.logits);
}

/* The bars are the logits tests' for the default dispatch (model_logits_check.h). */
Test(server_embd_seam, stories260K)
{
    check_model("stories260K", 2e-7);
}

Test(server_embd_seam, tiny_llama_f16)
{
    check_model("tiny-llama-f16", 1e-6);
}
