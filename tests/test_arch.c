/* The architecture tables (runtime/model/arch.h): every table is consistent (unique names, sizes of
 * known hyperparameters, a place in the tuner for every matrix, keys that set what the decoder checks),
 * general.architecture picks llama or granite and names the supported ones otherwise, a 3-D (experts)
 * tensor passes the shape check where a table names one, the model's matrix list keeps the order the
 * repack cache and the plans index by, `woolly synth`'s tensor lists agree with the tables, and the
 * tuner finds the matrices and reads the attention as the runtime does. */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "gguf_write.h"
#include "model.h"
#include "quant.h"
#include "synth.h"
#include "testutil.h"
#include "tune.h"

static gguf_str str(const char *s)
{
    return (gguf_str){.ptr = s, .len = strlen(s)};
}

/* ---- the tables ---------------------------------------------------------------------------------- */

Test(arch, the_registry_names_the_families)
{
    cr_expect_str_eq(woolly_arch_names(", "), "llama, granite, qwen2, qwen3, phi3, gemma3, qwen3moe, granitemoe");
    cr_expect_eq(woolly_arch_count(), 8);
    cr_expect_eq(woolly_arch_find(str("llama")), woolly_arch_get(0));
    cr_expect_eq(woolly_arch_find(str("granite")), woolly_arch_get(1));
    cr_expect_eq(woolly_arch_find(str("gemma3")), woolly_arch_get(5));
    cr_expect_null(woolly_arch_find(str("gpt2")));
    cr_expect_null(woolly_arch_find(str("decoder")), "the keys-only base is no architecture");
    cr_expect_null(woolly_arch_find(str("llam")), "a prefix is not a name");
    cr_expect_null(woolly_arch_get(8));
    for (int i = 0; i < woolly_arch_count(); i++)
        for (int j = 0; j < i; j++)
            cr_expect_str_neq(woolly_arch_get(i)->name, woolly_arch_get(j)->name);
}

/* Every field a size or a default refers to is an int32_t hyperparameter of woolly_config. */
static void expect_dim(const woolly_arch *a, const char *what, const woolly_dim *d)
{
    const uint16_t fields[3] = {d->mul[0], d->mul[1], d->per};
    cr_expect(d->mul[0] != 0, "%s: %s: a size names at least one field", a->name, what);
    for (int i = 0; i < 3; i++)
        cr_expect(!fields[i] || woolly_config_field_name(fields[i], WOOLLY_KEY_INT),
                  "%s: %s: offset %u is not a size of woolly_config", a->name, what, fields[i]);
}

static bool is_slot_free(uint16_t *used, int *n, uint16_t slot)
{
    for (int i = 0; i < *n; i++)
        if (used[i] == slot)
            return false;
    used[(*n)++] = slot;
    return true;
}

Test(arch, every_table_names_its_tensors_consistently)
{
    for (int ai = 0; ai < woolly_arch_count(); ai++) {
        const woolly_arch *a = woolly_arch_get(ai);
        const int n = woolly_arch_n_tensors(a);
        int embeddings = 0, matrices = 0;
        uint16_t block_slots[64], global_slots[64];
        int n_block = 0, n_global = 0;
        cr_assert_lt(n, 64);
        for (int i = 0; i < n; i++) {
            const woolly_arch_tensor *t = woolly_arch_tensor_at(a, i);
            cr_expect(t->name && *t->name && strncmp(t->name, "blk.", 4), "%s: tensor %d's name", a->name, i);
            for (int j = 0; j < i; j++)
                cr_expect(strcmp(t->name, woolly_arch_tensor_at(a, j)->name) ||
                              t->per_block != woolly_arch_tensor_at(a, j)->per_block,
                          "%s: '%s' named twice", a->name, t->name);
            const int nd = woolly_tensor_kind_dims(t->kind);
            cr_expect(nd >= 1 && nd <= 3, "%s: '%s' has an unknown kind", a->name, t->name);
            for (int d = 0; d < nd; d++)
                if (d != 1 || !t->n_parts) /* a fused matrix's rows are its parts' */
                    expect_dim(a, t->name, &t->ne[d]);
            cr_expect(t->n_parts == 0 || (t->kind == WOOLLY_TENSOR_MATRIX && t->n_parts >= 2 &&
                                          t->n_parts <= WOOLLY_ARCH_MAX_PARTS && !t->tied),
                      "%s: '%s': only a matrix has parts, two or more", a->name, t->name);

            /* Its slots (its parts' for a fused matrix): inside the struct it is bound into, aligned for
             * its type, no other tensor's. */
            const bool mat = t->kind == WOOLLY_TENSOR_MATRIX || t->kind == WOOLLY_TENSOR_EMBEDDING ||
                             t->kind == WOOLLY_TENSOR_EXPERTS;
            const size_t size = mat ? sizeof(woolly_matrix) : sizeof(const float *);
            const size_t align = mat ? alignof(woolly_matrix) : alignof(const float *);
            for (int j = 0; j < (t->n_parts ? t->n_parts : 1); j++) {
                const uint16_t slot = t->n_parts ? t->parts[j].slot : t->slot;
                if (t->n_parts)
                    expect_dim(a, t->name, &t->parts[j].rows);
                cr_expect(slot + size <= (t->per_block ? sizeof(woolly_layer) : sizeof(woolly_weights)),
                          "%s: '%s' is bound past its struct", a->name, t->name);
                cr_expect(slot % align == 0, "%s: '%s''s slot is misaligned", a->name, t->name);
                cr_expect(t->per_block ? is_slot_free(block_slots, &n_block, slot)
                                       : is_slot_free(global_slots, &n_global, slot),
                          "%s: '%s' shares its slot", a->name, t->name);
            }

            /* A matrix is multiplied by: the repack gives it a layout and the tuner measures it for the
             * classes it names (each expert of an experts tensor too); nothing else has classes. */
            if (t->kind == WOOLLY_TENSOR_MATRIX || t->kind == WOOLLY_TENSOR_EXPERTS) {
                matrices++;
                cr_expect(t->classes != 0 && !(t->classes & ~WOOLLY_CLASSES_ALL),
                          "%s: matrix '%s' names no batch classes for the tuner", a->name, t->name);
            } else {
                cr_expect_eq(t->classes, 0, "%s: '%s' is no matrix but has classes", a->name, t->name);
            }
            embeddings += t->kind == WOOLLY_TENSOR_EMBEDDING;
            cr_expect(t->kind != WOOLLY_TENSOR_EMBEDDING || (!t->per_block && !t->optional),
                      "%s: the embedding ('%s') is one required global tensor", a->name, t->name);

            /* A tied tensor is optional and stands in for a global matrix-shaped one of the table. */
            if (t->tied) {
                int layer;
                const woolly_arch_tensor *u = woolly_arch_match(a, t->tied, &layer);
                cr_expect(t->optional && t->kind == WOOLLY_TENSOR_MATRIX, "%s: '%s' is tied", a->name,
                          t->name);
                cr_expect(u && !u->per_block && !u->optional && woolly_tensor_kind_dims(u->kind) == 2,
                          "%s: '%s' is tied to '%s', no required global matrix of the table", a->name,
                          t->name, t->tied);
            }
        }
        cr_expect_eq(embeddings, 1, "%s: one token embedding gives n_vocab", a->name);
        cr_expect_gt(matrices, 0, "%s", a->name);
    }
}

Test(arch, every_table_sets_what_the_decoder_checks)
{
    /* woolly_arch_read_config divides and compares these after the INT keys, then reads the floats. */
    const uint16_t decoder_ints[] = {WOOLLY_HP(n_embd),    WOOLLY_HP(n_layer),    WOOLLY_HP(n_head),
                                     WOOLLY_HP(n_head_kv), WOOLLY_HP(n_ff),       WOOLLY_HP(n_ctx_train),
                                     WOOLLY_HP(head_dim),  WOOLLY_HP(head_dim_v), WOOLLY_HP(n_rot)};
    const uint16_t decoder_floats[] = {WOOLLY_HP(rope_base), WOOLLY_HP(rms_eps)};
    for (int ai = 0; ai < woolly_arch_count(); ai++) {
        const woolly_arch *a = woolly_arch_get(ai);
        uint16_t set[64];
        int n_set = 0;
        for (int i = 0; i < woolly_arch_n_keys(a); i++) {
            const woolly_arch_key *k = woolly_arch_key_at(a, i);
            cr_expect(k->key && *k->key, "%s: key %d", a->name, i);
            for (int j = 0; j < i; j++)
                cr_expect_str_neq(k->key, woolly_arch_key_at(a, j)->key, "%s: key named twice", a->name);
            cr_expect(woolly_config_field_name(k->field, k->type), "%s: '%s' lands in no %s field", a->name,
                      k->key, k->type == WOOLLY_KEY_INT ? "int32_t" : "float");
            if (k->type == WOOLLY_KEY_INT) {
                /* A default or a bound uses only fields the INT keys before it set. */
                const uint16_t uses[] = {k->def.mul[0], k->def.mul[1], k->def.per, k->hi_field};
                for (size_t u = 0; u < sizeof uses / sizeof uses[0]; u++) {
                    bool before = !uses[u];
                    for (int s = 0; s < n_set; s++)
                        before |= set[s] == uses[u];
                    cr_expect(before, "%s: '%s' uses a field no key before it sets", a->name, k->key);
                }
                cr_expect(k->required || k->def.mul[0] || (k->def_int >= 0 && k->def_int >= k->lo),
                          "%s: '%s' has no default in its range", a->name, k->key);
                cr_expect(k->lo >= 0 && (k->hi_field || k->hi >= k->lo), "%s: '%s''s range", a->name, k->key);
                cr_assert_lt(n_set, 64);
                set[n_set++] = k->field;
            }
        }
        for (size_t f = 0; f < sizeof decoder_ints / sizeof decoder_ints[0]; f++) {
            bool found = false;
            for (int s = 0; s < n_set; s++)
                found |= set[s] == decoder_ints[f];
            cr_expect(found, "%s: no key sets %s", a->name,
                      woolly_config_field_name(decoder_ints[f], WOOLLY_KEY_INT));
        }
        for (size_t f = 0; f < sizeof decoder_floats / sizeof decoder_floats[0]; f++) {
            bool found = false;
            for (int i = 0; i < woolly_arch_n_keys(a); i++)
                found |= woolly_arch_key_at(a, i)->type == WOOLLY_KEY_FLOAT &&
                         woolly_arch_key_at(a, i)->field == decoder_floats[f];
            cr_expect(found, "%s: no key sets %s", a->name,
                      woolly_config_field_name(decoder_floats[f], WOOLLY_KEY_FLOAT));
        }
    }
}

Test(arch, the_forward_pass_runs_every_table_and_names_what_it_lacks)
{
    char why[160];
    for (int i = 0; i < woolly_arch_count(); i++)
        cr_expect(woolly_forward_runs(woolly_arch_get(i), why, sizeof why), "%s: %s",
                  woolly_arch_get(i)->name, why);
    woolly_arch moe = *woolly_arch_find(str("llama"));
    moe.steps.moe_ffn = true; /* the last step it lacked */
    cr_expect(woolly_forward_runs(&moe, why, sizeof why), "%s", why);
}

Test(arch, granite_is_llama_and_its_scales)
{
    const woolly_arch *llama = woolly_arch_find(str("llama")), *granite = woolly_arch_find(str("granite"));
    cr_assert(llama && granite);
    cr_expect_eq(woolly_arch_n_tensors(granite), woolly_arch_n_tensors(llama));
    for (int i = 0; i < woolly_arch_n_tensors(llama); i++)
        cr_expect_eq(woolly_arch_tensor_at(granite, i), woolly_arch_tensor_at(llama, i));
    cr_expect_eq(woolly_arch_n_keys(granite), woolly_arch_n_keys(llama) + 4);
    cr_expect_str_eq(woolly_arch_key_at(granite, woolly_arch_n_keys(llama))->key, "embedding_scale");
}

Test(arch, sizes_read_as_their_expressions)
{
    const woolly_config c = {.n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_rot = 10};
    const woolly_dim q = WOOLLY_DIM2(n_head, head_dim), per = WOOLLY_DIM_PER(n_embd, n_head),
                     half = WOOLLY_DIM_DIV(n_rot, 2);
    char buf[64];
    cr_expect_eq(woolly_dim_value(&q, &c), 64);
    cr_expect_str_eq(woolly_dim_text(&q, buf, sizeof buf), "n_head * head_dim");
    cr_expect_eq(woolly_dim_value(&per, &c), 16);
    cr_expect_str_eq(woolly_dim_text(&per, buf, sizeof buf), "n_embd / n_head");
    cr_expect_eq(woolly_dim_value(&half, &c), 5);
    cr_expect_str_eq(woolly_dim_text(&half, buf, sizeof buf), "n_rot / 2");
}

/* ---- recognition and hyperparameters ------------------------------------------------------------- */

/* A GGUF file of keys only: general.architecture `arch`, a small decoder's hyperparameters, and what
 * `more` writes (NULL: nothing). */
static gguf_file *keys_file_with(const char *arch, bool scales,
                                 void (*more)(gguf_writer *w, const char *arch))
{
    const char *path = tu_tmp_path("arch_keys.gguf");
    woolly_error err = {{0}};
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    gguf_writer_set_str(w, "general.architecture", arch);
    char key[128];
#define SET(type, k, v) (snprintf(key, sizeof key, "%s.%s", arch, k), gguf_writer_set_##type(w, key, v))
    SET(u32, "embedding_length", 64);
    SET(u32, "block_count", 2);
    SET(u32, "attention.head_count", 4);
    SET(u32, "attention.head_count_kv", 2);
    SET(u32, "feed_forward_length", 128);
    SET(u32, "context_length", 256);
    SET(f32, "attention.layer_norm_rms_epsilon", 1e-5f);
    if (scales) {
        SET(f32, "embedding_scale", 12.0f);
        SET(f32, "attention.scale", 0.125f);
    }
#undef SET
    if (more)
        more(w, arch);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g != NULL, "%s", err.msg);
    remove(path);
    return g;
}

static gguf_file *keys_file(const char *arch, bool scales)
{
    return keys_file_with(arch, scales, NULL);
}

static void set_key_str(gguf_writer *w, const char *arch, const char *k, const char *v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    gguf_writer_set_str(w, key, v);
}

static void set_key_f32(gguf_writer *w, const char *arch, const char *k, float v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    gguf_writer_set_f32(w, key, v);
}

static void set_key_u32(gguf_writer *w, const char *arch, const char *k, uint32_t v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    gguf_writer_set_u32(w, key, v);
}

static void yarn_keys(gguf_writer *w, const char *arch)
{
    set_key_str(w, arch, "rope.scaling.type", "yarn");
    set_key_f32(w, arch, "rope.scaling.factor", 4.0f);
    set_key_u32(w, arch, "rope.scaling.original_context_length", 32768);
}

static void factor_only(gguf_writer *w, const char *arch)
{
    set_key_f32(w, arch, "rope.scaling.factor", 2.0f);
}

static void dynamic_scaling(gguf_writer *w, const char *arch)
{
    set_key_str(w, arch, "rope.scaling.type", "dynamic");
}

/* rope.scaling.type as llama.cpp reads it: yarn with its factor and original context; absent, a factor
 * alone is linear; another type is refused by name. */
Test(arch, rope_scaling_is_read_as_llama_cpp_reads_it)
{
    woolly_config c;
    woolly_error err = {{0}};
    gguf_file *g = keys_file_with("qwen2", false, yarn_keys);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.rope_scaling, WOOLLY_ROPE_SCALING_YARN);
    cr_expect_eq(c.rope_scale, 4.0f);
    cr_expect_eq(c.rope_orig_ctx, 32768);
    cr_expect_eq(c.rope_attn_factor, 1.0f);
    gguf_close(g);

    g = keys_file_with("llama", false, factor_only);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.rope_scaling, WOOLLY_ROPE_SCALING_LINEAR);
    cr_expect_eq(c.rope_scale, 2.0f);
    cr_expect_eq(c.rope_orig_ctx, 256, "absent: the trained context");
    gguf_close(g);

    g = keys_file("llama", false);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.rope_scaling, WOOLLY_ROPE_SCALING_NONE);
    gguf_close(g);

    g = keys_file_with("qwen3", false, dynamic_scaling);
    cr_expect_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), -1);
    cr_expect_str_eq(err.msg,
                     "m.gguf: RoPE scaling 'dynamic' is not supported (none, linear, yarn, longrope)");
    gguf_close(g);
}

static void gemma3_keys(gguf_writer *w, const char *arch)
{
    set_key_u32(w, arch, "attention.sliding_window", 512);
    set_key_f32(w, arch, "final_logit_softcapping", 30.0f);
}

/* gemma3's keys and derived values: its window, the pattern 6 and sliding base 10000 when absent, the
 * softcapping (0 when absent), the embedding scale sqrt(n_embd); other tables read none of them. */
Test(arch, gemma3_reads_its_window_and_derives_its_scale)
{
    woolly_config c;
    woolly_error err = {{0}};
    gguf_file *g = keys_file_with("gemma3", false, gemma3_keys);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.n_swa, 512);
    cr_expect_eq(c.swa_pattern, 6);
    cr_expect_eq(c.rope_base_swa, 10000.0f);
    cr_expect_eq(c.logit_softcap, 30.0f);
    cr_expect_eq(c.embedding_scale, 8.0f, "sqrt(64)");
    cr_expect_eq(c.attention_scale, 0.25f, "1/sqrt(head_dim)");
    cr_expect_eq(woolly_layer_window(&c, 4), 512);
    cr_expect_eq(woolly_layer_window(&c, 5), 0, "every 6th layer is global");
    gguf_close(g);

    g = keys_file("gemma3", false);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.n_swa, 0, "no window key: no layer slides");
    cr_expect_eq(c.logit_softcap, 0.0f);
    gguf_close(g);

    g = keys_file_with("qwen2", false, gemma3_keys);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.n_swa, 0, "qwen2 reads no window");
    cr_expect_eq(c.logit_softcap, 0.0f);
    cr_expect_eq(c.embedding_scale, 1.0f);
    cr_expect_eq(c.rope_base_swa, c.rope_base, "without a base of its own: the model's");
    gguf_close(g);
}

Test(arch, llama_is_recognized_with_its_defaults)
{
    gguf_file *g = keys_file("llama", true);
    woolly_config c;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.arch, woolly_arch_find(str("llama")));
    cr_expect_eq(c.n_embd, 64);
    cr_expect_eq(c.n_head_kv, 2);
    cr_expect_eq(c.head_dim, 16, "key_length defaults to n_embd / n_head");
    cr_expect_eq(c.n_rot, 16, "rope.dimension_count defaults to the head dimension");
    cr_expect_eq(c.rope_base, 10000.0f);
    cr_expect_eq(c.rope_scale, 1.0f);
    cr_expect_eq(c.attention_scale, 0.25f, "llama reads no attention.scale: 1/sqrt(head_dim)");
    cr_expect_eq(c.embedding_scale, 1.0f, "llama reads no embedding_scale");
    gguf_close(g);
}

Test(arch, granite_reads_its_scales)
{
    gguf_file *g = keys_file("granite", true);
    woolly_config c;
    woolly_error err = {{0}};
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.arch, woolly_arch_find(str("granite")));
    cr_expect_eq(c.embedding_scale, 12.0f);
    cr_expect_eq(c.attention_scale, 0.125f);
    cr_expect_eq(c.residual_scale, 1.0f, "absent: the decoder's 1");
    cr_expect_eq(c.logit_scale, 1.0f);
    gguf_close(g);

    g = keys_file("granite", false);
    cr_assert_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), 0, "%s", err.msg);
    cr_expect_eq(c.attention_scale, 0.25f, "absent: 1/sqrt(head_dim)");
    gguf_close(g);
}

Test(arch, another_architecture_is_refused_naming_the_supported_ones)
{
    gguf_file *g = keys_file("falcon", false);
    woolly_config c;
    woolly_error err = {{0}};
    cr_expect_eq(woolly_arch_read_config(g, "m.gguf", &c, &err), -1);
    cr_expect_str_eq(err.msg, "m.gguf: architecture 'falcon' is not supported (supported: llama, granite, "
                              "qwen2, qwen3, phi3, gemma3, qwen3moe, granitemoe)");
    gguf_close(g);
}

/* ---- tensors: recognition and shapes, with llama's experts ---------------------------------------- */

static gguf_tensor file_tensor(const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    return (gguf_tensor){.name = (char *)name, .n_dims = ne2 > 1 ? 3 : 2, .ne = {ne0, ne1, ne2, 1}};
}

Test(arch, a_3d_experts_tensor_passes_as_the_kind_its_table_names)
{
    const woolly_arch *llama = woolly_arch_find(str("llama"));
    const woolly_config c = {.arch = llama, .n_embd = 8, .n_ff = 32, .n_ff_exp = 16, .n_expert = 4};
    int layer;
    const woolly_arch_tensor *t = woolly_arch_match(llama, "blk.3.ffn_up_exps.weight", &layer);
    cr_assert(t != NULL, "the table's own tensor is recognized");
    cr_expect_eq(layer, 3);
    cr_expect_eq(t->kind, WOOLLY_TENSOR_EXPERTS);
    cr_expect(woolly_arch_tensor_applies(t, &c), "with experts");
    const woolly_arch_tensor *dense = woolly_arch_match(llama, "blk.0.ffn_up.weight", &layer);
    cr_assert(dense != NULL);
    cr_expect_not(woolly_arch_tensor_applies(dense, &c), "the dense FFN is not a file with experts'");
    const woolly_config no_experts = {.arch = llama, .n_embd = 8, .n_ff = 32};
    cr_expect(woolly_arch_tensor_applies(dense, &no_experts));
    cr_expect_not(woolly_arch_tensor_applies(t, &no_experts), "no experts in a dense file");

    woolly_error err = {{0}};
    gguf_tensor right = file_tensor("blk.3.ffn_up_exps.weight", 8, 16, 4);
    cr_expect_eq(woolly_arch_check_shape(t, &c, &right, "m.gguf", &err), 0, "%s", err.msg);

    gguf_tensor few = file_tensor("blk.3.ffn_up_exps.weight", 8, 16, 3);
    cr_expect_eq(woolly_arch_check_shape(t, &c, &few, "m.gguf", &err), -1);
    cr_expect_str_eq(err.msg, "m.gguf: tensor 'blk.3.ffn_up_exps.weight' has shape [8, 16, 3, 1], expected "
                              "[8, 16, 4] (ne[0] = row length, ne[2] = experts)");

    gguf_tensor flat = file_tensor("blk.3.ffn_up_exps.weight", 8, 64, 1);
    cr_expect_eq(woolly_arch_check_shape(t, &c, &flat, "m.gguf", &err), -1, "the experts stacked in 2-D");
    cr_expect(strstr(err.msg, "has shape [8, 64, 1, 1], expected [8, 16, 4]") != NULL, "%s", err.msg);

    /* A matrix stays 2-D: the same 3-D tensor where the table names a matrix is refused. */
    const woolly_arch_tensor *gate = woolly_arch_match(llama, "blk.0.ffn_gate_inp.weight", &layer);
    gguf_tensor cube = file_tensor("blk.0.ffn_gate_inp.weight", 8, 4, 4);
    cr_assert(gate != NULL);
    cr_expect_eq(woolly_arch_check_shape(gate, &c, &cube, "m.gguf", &err), -1);
    cr_expect(strstr(err.msg, "expected [8, 4] (ne[0] = row length)") != NULL, "%s", err.msg);
}

Test(arch, block_names_need_a_block_number)
{
    const woolly_arch *a = woolly_arch_find(str("llama"));
    int layer;
    cr_expect(woolly_arch_match(a, "blk.12.ffn_down.weight", &layer) && layer == 12);
    cr_expect(woolly_arch_match(a, "output.weight", &layer) && layer == -1);
    cr_expect_null(woolly_arch_match(a, "blk.x.ffn_down.weight", &layer));
    cr_expect_null(woolly_arch_match(a, "blk.1.output.weight", &layer), "a global name is not a block's");
    cr_expect_null(woolly_arch_match(a, "ffn_down.weight", &layer), "a block's name needs its block");
    cr_expect_null(woolly_arch_match(a, "blk.0.attn_q.bias", &layer));
    cr_expect(woolly_arch_match(a, "blk.99999999999.attn_q.weight", &layer) && layer >= 1000000000,
              "a huge block number is beyond any block_count, not wrapped");
}

/* ---- the model's matrix list --------------------------------------------------------------------- */

/* The repack cache's key and the contexts' plans index the matrices by their place in m->mats: each
 * layer's wq, wk, wv, wo, w_gate, w_up, w_down, then the output. */
Test(arch, the_matrix_list_keeps_its_order)
{
    static const char *const LAYER[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    const char *models[] = {"models/tiny-llama-q4_k_m.gguf", "models/tiny-granite-q4_k_m.gguf"};
    for (size_t mi = 0; mi < 2; mi++) {
        woolly_error err = {{0}};
        setenv("WOOLLY_REPACK_CACHE", "off", 1);
        woolly_model *m = woolly_model_load(tu_data(models[mi]), &err);
        cr_assert(m != NULL, "%s", err.msg);
        cr_assert_eq(m->n_mats, 7 * m->cfg.n_layer + 1);
        for (int32_t l = 0; l < m->cfg.n_layer; l++) {
            const woolly_layer *L = &m->w.layers[l];
            const woolly_matrix *in_order[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                               &L->w_gate, &L->w_up, &L->w_down};
            for (int i = 0; i < 7; i++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, LAYER[i]);
                cr_expect_eq(m->mats[7 * l + i], in_order[i], "%s: matrix %d", models[mi], 7 * l + i);
                cr_expect_str_eq(m->mats[7 * l + i]->name, name);
                cr_expect_eq(m->mats[7 * l + i]->id, 7 * l + i);
            }
        }
        cr_expect_eq(m->mats[m->n_mats - 1], &m->w.output);
        woolly_model_close(m);
    }
}

/* Row r of matrix w as floats, whatever its layout (as the forward pass's embedding lookup reads it). */
static void matrix_row(const woolly_matrix *w, int64_t r, float *out)
{
    void *raw = malloc(woolly_row_bytes(w->type, w->cols));
    cr_assert(raw != NULL);
    if (w->layout)
        w->layout->unpack(w->data, w->row_bytes, w->cols, r, raw);
    else
        memcpy(raw, (const char *)w->data + (size_t)r * w->row_bytes, woolly_row_bytes(w->type, w->cols));
    cr_assert_eq(woolly_dequantize_row(w->type, raw, out, w->cols), 0);
    free(raw);
}

/* phi3's fused attn_qkv and ffn_up are bound as views of their rows (arch.h's parts): in the matrix list
 * in the parts' order, each of its own rows, and (repacked or not) holding the file's rows from the row
 * after the part before it. */
Test(arch, a_fused_matrix_is_bound_as_views_of_its_rows)
{
    const char *path = tu_data("models/tiny-phi3-f16.gguf");
    woolly_error err = {{0}};
    setenv("WOOLLY_REPACK_CACHE", "off", 1);
    woolly_model *m = woolly_model_load(path, &err);
    cr_assert(m != NULL, "%s", err.msg);
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g != NULL, "%s", err.msg);
    const woolly_config *c = &m->cfg;
    cr_assert_eq(m->n_mats, 7 * c->n_layer + 1, "the fused tensors give the same seven matrices a layer");
    const int64_t q = (int64_t)c->n_head * c->head_dim, kv = (int64_t)c->n_head_kv * c->head_dim;
    for (int32_t l = 0; l < c->n_layer; l++) {
        const woolly_layer *L = &m->w.layers[l];
        const struct {
            const woolly_matrix *w;
            const char *tensor;
            int64_t row0, rows;
        } parts[] = {{&L->wq, "attn_qkv", 0, q},
                     {&L->wk, "attn_qkv", q, kv},
                     {&L->wv, "attn_qkv", q + kv, kv},
                     {&L->w_gate, "ffn_up", 0, c->n_ff},
                     {&L->w_up, "ffn_up", c->n_ff, c->n_ff}};
        const int at[] = {0, 1, 2, 4, 5}; /* their places among the layer's seven */
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[i].tensor);
            const gguf_tensor *gt = gguf_find_tensor(g, name);
            cr_assert(gt != NULL, "%s", name);
            const woolly_matrix *w = parts[i].w;
            cr_expect_eq(m->mats[7 * l + at[i]], w, "%s: part %zu's place", name, i);
            cr_expect_str_eq(w->name, name);
            cr_expect_eq(w->rows, parts[i].rows, "%s: part %zu's rows", name, i);
            cr_expect_eq(w->cols, c->n_embd);
            float *got = malloc(sizeof(float) * (size_t)w->cols),
                  *want = malloc(sizeof(float) * (size_t)w->cols);
            cr_assert(got && want);
            const int64_t rows[] = {0, w->rows - 1};
            for (int r = 0; r < 2; r++) {
                matrix_row(w, rows[r], got);
                const size_t rb = woolly_row_bytes(gt->type, (int64_t)gt->ne[0]);
                cr_assert_eq(woolly_dequantize_row(
                                 gt->type, (const char *)gt->data + (size_t)(parts[i].row0 + rows[r]) * rb,
                                 want, w->cols),
                             0);
                cr_expect_arr_eq(got, want, sizeof(float) * (size_t)w->cols, "%s: part %zu, row %lld", name,
                                 i, (long long)rows[r]);
            }
            free(got), free(want);
        }
    }
    gguf_close(g);
    woolly_model_close(m);
}

/* ---- woolly synth's tensor lists ----------------------------------------------------------------- */

/* synth/ may not include the model's headers, so it keeps its own tensor list: each preset's must be
 * the table's (every tensor known and of the table's shape, every required one present). */
Test(arch, synth_presets_write_the_tables_tensors)
{
    const char *presets[] = {"tiny",       "tiny-granite",  "llama-1b",            "granite-8b", "qwen2.5-1.5b",
                             "qwen3-4b",   "gemma3-1b",     "phi3-mini",           "mistral-7b",
                             "granitemoe-3b", "qwen3moe-30b-a3b-12l"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        woolly_synth_config s;
        woolly_error err = {{0}};
        cr_assert_eq(woolly_synth_preset(presets[p], &s, &err), 0, "%s", err.msg);
        const woolly_arch *a = woolly_arch_find(str(s.arch));
        cr_assert(a != NULL, "%s: %s", presets[p], s.arch);
        const woolly_config c = {.arch = a,
                                 .n_vocab = (int32_t)s.n_vocab,
                                 .n_embd = (int32_t)s.n_embd,
                                 .n_layer = (int32_t)s.n_layer,
                                 .n_head = (int32_t)s.n_head,
                                 .n_head_kv = (int32_t)s.n_head_kv,
                                 .head_dim = (int32_t)woolly_synth_head_dim(&s),
                                 .n_ff = (int32_t)s.n_ff,
                                 .n_rot = (int32_t)woolly_synth_head_dim(&s),
                                 .n_expert = (int32_t)s.n_expert,
                                 .n_expert_used = (int32_t)s.n_expert_used,
                                 .n_ff_exp = (int32_t)(s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff)};
        const size_t n = woolly_synth_tensor_table(&s, NULL, 0);
        woolly_synth_tensor *t = calloc(n, sizeof *t);
        cr_assert(t != NULL);
        cr_assert_eq(woolly_synth_tensor_table(&s, t, n), n);
        int found[64][2] = {{0}}; /* per table tensor: as a global, as a block's */
        cr_assert_lt(woolly_arch_n_tensors(a), 64);
        for (size_t i = 0; i < n; i++) {
            int layer;
            const woolly_arch_tensor *d = woolly_arch_match(a, t[i].name, &layer);
            cr_assert(d != NULL, "%s: '%s' is not in the %s table", presets[p], t[i].name, a->name);
            const gguf_tensor g = {
                .name = t[i].name, .n_dims = t[i].n_dims, .ne = {t[i].ne[0], t[i].ne[1], t[i].ne[2], 1}};
            cr_expect_eq(woolly_arch_check_shape(d, &c, &g, presets[p], &err), 0, "%s", err.msg);
            for (int j = 0; j < woolly_arch_n_tensors(a); j++)
                if (woolly_arch_tensor_at(a, j) == d)
                    found[j][d->per_block]++;
        }
        for (int j = 0; j < woolly_arch_n_tensors(a); j++) {
            const woolly_arch_tensor *d = woolly_arch_tensor_at(a, j);
            if (!d->optional && woolly_arch_tensor_applies(d, &c))
                cr_expect_eq(found[j][d->per_block], d->per_block ? c.n_layer : 1, "%s: '%s'", presets[p],
                             d->name);
        }
        for (int j = 0; j < woolly_arch_n_tensors(a); j++)
            if (woolly_arch_tensor_at(a, j)->tied)
                cr_expect_eq(found[j][0], !s.tied_embd, "%s: '%s' unless tied", presets[p],
                             woolly_arch_tensor_at(a, j)->name);
        free(t);
    }
}

/* ---- the tuner ----------------------------------------------------------------------------------- */

/* The tuner reads the hyperparameters as the runtime does and finds the matrices the model multiplies
 * by, each with its table entry's batch classes (the tied embedding with the output's). */
Test(arch, the_tuner_sees_the_models_matrices_and_attention)
{
    const char *models[] = {"models/tiny-llama-q4_k_m.gguf", "models/tiny-granite-q4_k_m.gguf",
                            "models/tiny-qwen3-q4_k_m.gguf", "models/tiny-phi3-f16.gguf"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        woolly_error err = {{0}};
        setenv("WOOLLY_REPACK_CACHE", "off", 1);
        woolly_model *m = woolly_model_load(tu_data(models[mi]), &err);
        cr_assert(m != NULL, "%s", err.msg);
        woolly_tune_model tm;
        cr_assert_eq(woolly_tune_model_from_gguf(tu_data(models[mi]), &tm, &err), 0, "%s", err.msg);
        cr_expect_eq(tm.n_layer, m->cfg.n_layer);
        cr_expect_eq(tm.n_head, m->cfg.n_head);
        cr_expect_eq(tm.n_head_kv, m->cfg.n_head_kv);
        cr_expect_eq(tm.head_dim, m->cfg.head_dim);
        cr_expect_eq(tm.n_ctx, m->cfg.n_ctx_train);
        int n_tensors = 0;
        for (int s = 0; s < tm.n_shapes; s++)
            n_tensors += tm.shapes[s].n_tensors;
        cr_expect_eq(n_tensors, m->n_mats, "%s: every matrix once", models[mi]);
        for (int32_t i = 0; i < m->n_mats; i++) {
            const woolly_matrix *w = m->mats[i];
            int layer;
            const woolly_arch_tensor *t = woolly_arch_match(m->cfg.arch, w->name, &layer);
            cr_assert(t != NULL, "%s", w->name);
            const unsigned want = t->kind == WOOLLY_TENSOR_MATRIX ? t->classes : 0;
            bool found = false;
            for (int s = 0; s < tm.n_shapes; s++) {
                const woolly_tune_shape *sh = &tm.shapes[s];
                if (sh->type != w->type || sh->rows != w->rows || sh->cols != w->cols)
                    continue;
                found = true;
                for (int c = 0; c < WOOLLY_TOKENS_CLASSES; c++)
                    cr_expect(!(want & WOOLLY_CLASS_BIT(c)) || sh->classes[c], "%s: class %d", w->name, c);
            }
            cr_expect(found, "%s: its shape is not tuned", w->name);
        }
        woolly_tune_model_free(&tm);
        woolly_model_close(m);
    }
}

/* The tiny qwen3moe file as an architecture the runtime does not know ("qwen3x"): its keys renamed. */
static const char *unknown_arch_file(void)
{
    const char *path = tu_tmp_path("arch_unknown.gguf");
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(tu_data("models/tiny-qwen3moe-f16.gguf"), &err);
    cr_assert(g != NULL, "%s", err.msg);
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv kv = g->kv[i];
        char key[256];
        if (gguf_str_eq(kv.key, "general.architecture"))
            continue;
        if (kv.key.len > 9 && !memcmp(kv.key.ptr, "qwen3moe.", 9)) {
            snprintf(key, sizeof key, "qwen3x.%.*s", (int)kv.key.len - 9, kv.key.ptr + 9);
            kv.key = str(key);
        }
        gguf_writer_copy_kv(w, &kv);
    }
    gguf_writer_set_str(w, "general.architecture", "qwen3x");
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_geq(gguf_writer_add_tensor(w, g->tensors[i].name, g->tensors[i].type, g->tensors[i].n_dims,
                                             g->tensors[i].ne),
                      0);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(gguf_writer_write_data(w, g->tensors[i].data, g->tensors[i].nbytes, &err), 0, "%s",
                     err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    gguf_close(g);
    return path;
}

/* A file of an architecture the runtime does not run: its matrices by name (in every table), its
 * attention as the plain decoder's keys read under its own name. */
Test(arch, the_tuner_reads_another_architecture_as_a_plain_decoder)
{
    woolly_tune_model tm;
    woolly_error err = {{0}};
    const char *path = unknown_arch_file();
    cr_assert_eq(woolly_tune_model_from_gguf(path, &tm, &err), 0, "%s", err.msg);
    cr_expect_eq(tm.n_layer, 2);
    cr_expect_eq(tm.n_head, 4);
    cr_expect_eq(tm.n_head_kv, 2);
    cr_expect_eq(tm.head_dim, 128);
    int n_tensors = 0;
    for (int s = 0; s < tm.n_shapes; s++)
        n_tensors += tm.shapes[s].n_tensors;
    cr_expect_eq(n_tensors, 2 * (4 + 1 + 3) + 1,
                 "two layers' attention matrices, routers and experts (llama's table names them) and the tied "
                 "embedding as the output");
    woolly_tune_model_free(&tm);
    remove(path);
}

/* An MoE model the runtime runs: each expert is a matrix of the model (one per expert and tensor), and
 * the tuner measures their shape with the table's classes. */
Test(arch, the_tuner_sees_the_experts)
{
    woolly_error err = {{0}};
    setenv("WOOLLY_REPACK_CACHE", "off", 1);
    woolly_model *m = woolly_model_load(tu_data("models/tiny-qwen3moe-q4_k_m.gguf"), &err);
    cr_assert(m != NULL, "%s", err.msg);
    cr_expect_eq(m->n_mats, 2 * (4 + 1 + 3 * 8) + 1, "attention, router, 8 experts x 3, per layer; output");
    woolly_tune_model tm;
    cr_assert_eq(woolly_tune_model_from_gguf(tu_data("models/tiny-qwen3moe-q4_k_m.gguf"), &tm, &err), 0, "%s",
                 err.msg);
    for (int32_t i = 0; i < m->n_mats; i++) {
        const woolly_matrix *w = m->mats[i];
        bool found = false;
        for (int s = 0; s < tm.n_shapes; s++) {
            const woolly_tune_shape *sh = &tm.shapes[s];
            if (sh->type == w->type && sh->rows == w->rows && sh->cols == w->cols)
                found = sh->classes[WOOLLY_TOKENS_1] && sh->classes[WOOLLY_TOKENS_SMALL];
        }
        cr_expect(found, "%s (%lld x %lld): its shape is not tuned for 1 and few tokens", w->name,
                  (long long)w->rows, (long long)w->cols);
    }
    woolly_tune_model_free(&tm);
    woolly_model_close(m);
}
