/* `woolly tune --preset NAME`'s model: the matrix shapes and attention dimensions of every synth preset, the
 * families' real shapes included (qwen2.5-1.5b, qwen3-4b, gemma3-1b, phi3-mini, mistral-7b), come from the
 * synth preset table and its tensor table (no second copy of the shapes), without writing or measuring
 * anything. Checked per preset: the attention dimensions are the preset's; the shapes hold exactly the
 * weights of the file synth would write (fused tensors counted by their parts); phi3's fused attn_qkv and
 * gate+up ffn_up are tuned as the matrices the runtime multiplies by, not as their fused rows; and the
 * command names every preset in its help and refuses an unknown one. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"
#include "testutil.h"
#include "tune.h"

enum { MAX_PRESETS = 32 };

/* The preset names synth lists (", "-separated), into names (static storage); returns how many. */
static int preset_names(char names[MAX_PRESETS][32])
{
    int n = 0;
    for (const char *s = woolly_synth_preset_names(); *s && n < MAX_PRESETS;) {
        const size_t len = strcspn(s, ",");
        cr_assert(len > 0 && len < 32, "preset list: %s", woolly_synth_preset_names());
        snprintf(names[n++], 32, "%.*s", (int)len, s);
        s += len;
        s += strspn(s, ", ");
    }
    return n;
}

/* The weights of the preset's matrices as synth writes them: every 2-D tensor but the token embedding,
 * which is a matrix only when it doubles as the output (tied), and one expert's of a mixture's 3-D
 * tensor (the tuner's table holds one matrix of its shape per tensor, as for a file). */
static double synth_matrix_elements(const woolly_synth_config *c)
{
    const size_t n = woolly_synth_tensor_table(c, NULL, 0);
    woolly_synth_tensor *t = calloc(n, sizeof *t);
    cr_assert(t != NULL && woolly_synth_tensor_table(c, t, n) == n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].n_dims < 2 || (!c->tied_embd && !strcmp(t[i].name, "token_embd.weight")))
            continue;
        sum += (double)t[i].ne[0] * (double)t[i].ne[1];
    }
    free(t);
    return sum;
}

static bool has_rows(const woolly_tune_model *m, int64_t rows, int64_t cols)
{
    for (int i = 0; i < m->n_shapes; i++)
        if (m->shapes[i].rows == rows && m->shapes[i].cols == cols)
            return true;
    return false;
}

Test(tune_shapes, every_preset_from_the_synth_table)
{
    char names[MAX_PRESETS][32];
    const int n = preset_names(names);
    static const char *const FAMILIES[] = {"qwen2.5-1.5b", "qwen3-4b", "gemma3-1b", "phi3-mini", "mistral-7b"};
    for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++) {
        bool listed = false;
        for (int i = 0; i < n; i++)
            listed |= !strcmp(names[i], FAMILIES[f]);
        cr_expect(listed, "synth lists no preset %s", FAMILIES[f]);
    }
    for (int i = 0; i < n; i++) {
        woolly_synth_config c;
        woolly_error err = {{0}};
        cr_assert_eq(woolly_synth_preset(names[i], &c, &err), 0, "%s", err.msg);
        woolly_tune_model m;
        cr_assert_eq(woolly_tune_model_from_preset(names[i], &m, &err), 0, "%s: %s", names[i], err.msg);
        cr_expect_eq(m.n_layer, c.n_layer, "%s", names[i]);
        cr_expect_eq(m.n_head, c.n_head, "%s", names[i]);
        cr_expect_eq(m.n_head_kv, c.n_head_kv, "%s", names[i]);
        cr_expect_eq(m.head_dim, woolly_synth_head_dim(&c), "%s", names[i]);
        cr_expect_eq(m.n_ctx, c.n_ctx, "%s", names[i]);
        cr_assert_gt(m.n_shapes, 0, "%s", names[i]);
        double elements = 0;
        for (int s = 0; s < m.n_shapes; s++) {
            const woolly_tune_shape *sh = &m.shapes[s];
            cr_expect(sh->rows > 0 && sh->cols > 0 && sh->n_tensors > 0, "%s: shape %s", names[i], sh->example);
            bool any_class = false;
            for (int k = 0; k < WOOLLY_TOKENS_CLASSES; k++)
                any_class |= sh->classes[k];
            cr_expect(any_class, "%s: %s runs in no batch class", names[i], sh->example);
            elements += (double)sh->rows * (double)sh->cols * sh->n_tensors;
        }
        cr_expect_eq(elements, synth_matrix_elements(&c), "%s: the shapes hold %.0f weights, synth writes %.0f",
                     names[i], elements, synth_matrix_elements(&c));
        cr_expect_gt(m.matrix_bytes, 0.0, "%s", names[i]);
        /* the projections: Q [n_head * head_dim][n_embd], K and V [n_head_kv * head_dim][n_embd]; the FFN */
        const int64_t hd = woolly_synth_head_dim(&c);
        cr_expect(has_rows(&m, c.n_head * hd, c.n_embd), "%s: no Q shape", names[i]);
        cr_expect(has_rows(&m, c.n_head_kv * hd, c.n_embd), "%s: no K/V shape", names[i]);
        const int64_t ff = c.n_expert > 0 && c.n_ff_exp > 0 ? c.n_ff_exp : c.n_ff; /* an expert's, if any */
        cr_expect(has_rows(&m, ff, c.n_embd), "%s: no gate/up shape", names[i]);
        cr_expect(has_rows(&m, c.n_embd, ff), "%s: no down shape", names[i]);
        if (!strcmp(c.arch, "phi3")) { /* the fused tensors by their parts */
            cr_expect(!has_rows(&m, (c.n_head + 2 * c.n_head_kv) * hd, c.n_embd), "%s: attn_qkv fused", names[i]);
            cr_expect(!has_rows(&m, 2 * c.n_ff, c.n_embd), "%s: ffn_up fused", names[i]);
        }
        woolly_tune_model_free(&m);
    }
}

Test(tune_shapes, phi3_mini_at_head_dimension_96)
{
    woolly_tune_model m;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_tune_model_from_preset("phi3-mini", &m, &err), 0, "%s", err.msg);
    cr_expect_eq(m.head_dim, 96);
    cr_expect_eq(m.n_head, 32);
    cr_expect_eq(m.n_head_kv, 32);
    cr_expect(has_rows(&m, 3072, 3072) && has_rows(&m, 8192, 3072) && has_rows(&m, 3072, 8192));
    cr_expect(has_rows(&m, 32064, 3072), "the output matrix");
    woolly_tune_model_free(&m);
}

Test(tune_shapes, the_command_names_every_preset)
{
    char *out, *err;
    cr_assert_eq(tu_run_cli("tune --help", &out, &err), 0, "%s", err);
    char names[MAX_PRESETS][32];
    const int n = preset_names(names);
    for (int i = 0; i < n; i++)
        cr_expect(strstr(out, names[i]), "tune --help does not name preset %s:\n%s", names[i], out);
    free(out), free(err);
    cr_expect_eq(tu_run_cli("tune --preset phi3-huge --budget 1 -o /dev/null", &out, &err), 1);
    cr_expect(strstr(err, "unknown preset 'phi3-huge'"), "%s", err);
    free(out), free(err);
}
