/* The KL-divergence base file (runtime/cli/kl_base.h): what is written reads back exactly, the header
 * sits at the documented offsets, and a base from another vocabulary, text or chunking is refused with
 * a message naming what differs. The refusals of whole malformed files through the command are in
 * test_perplexity_kl.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kl_base.h"
#include "testutil.h"

static kl_base_header sample(void)
{
    kl_base_header h = {0};
    h.version = KL_BASE_VERSION;
    h.n_vocab = 5;
    h.n_ctx = 8;
    h.n_chunks = 2;
    h.n_scored = 3;
    h.flags = KL_BASE_FLAG_BOS;
    h.vocab_hash = 0x0123456789abcdefull;
    h.text_hash = 0xfedcba9876543210ull;
    h.n_text_tokens = 17;
    snprintf(h.model_name, sizeof h.model_name, "a model");
    return h;
}

Test(kl_base, round_trip_at_the_documented_offsets)
{
    const kl_base_header h = sample();
    const char *path = tu_tmp_path("round-trip.kl");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    woolly_error e = {{0}};
    cr_assert_eq(kl_base_write_header(f, path, &h, &e), 0, "%s", e.msg);
    float row[5];
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < 5; i++)
            row[i] = (float)(r * 10 + i) - 0.25f;
        cr_assert_eq(kl_base_write_record(f, path, r % 5, row, 5, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(fclose(f), 0);

    size_t size;
    unsigned char *b = (unsigned char *)tu_read_file(path, &size);
    cr_expect_eq(size, kl_base_file_size(&h));
    cr_expect_eq(size, 128u + 6u * (4u + 5u * 4u));
    cr_expect(memcmp(b, "WOOLLYKL", 8) == 0);
    cr_expect_eq(b[8], KL_BASE_VERSION);
    cr_expect_eq(b[12], 128);
    cr_expect_eq(b[16], 5);    /* n_vocab */
    cr_expect_eq(b[20], 8);    /* n_ctx */
    cr_expect_eq(b[24], 2);    /* n_chunks */
    cr_expect_eq(b[28], 3);    /* n_scored */
    cr_expect_eq(b[32], 1);    /* flags */
    cr_expect_eq(b[40], 0xef); /* vocabulary hash, little-endian */
    cr_expect_eq(b[47], 0x01);
    cr_expect_eq(b[48], 0x10);
    cr_expect_eq(b[56], 17);
    cr_expect_str_eq((const char *)b + 64, "a model");
    free(b);

    f = fopen(path, "rb");
    cr_assert(f);
    kl_base_header back;
    cr_assert_eq(kl_base_read_header(f, path, &back, &e), 0, "%s", e.msg);
    cr_expect_eq(back.n_vocab, 5);
    cr_expect_eq(back.n_ctx, 8);
    cr_expect_eq(back.n_chunks, 2);
    cr_expect_eq(back.n_scored, 3);
    cr_expect_eq(back.flags, KL_BASE_FLAG_BOS);
    cr_expect_eq(back.vocab_hash, h.vocab_hash);
    cr_expect_eq(back.text_hash, h.text_hash);
    cr_expect_eq(back.n_text_tokens, 17);
    cr_expect_str_eq(back.model_name, "a model");
    cr_expect_eq(kl_base_check(path, &back, &h, &e), 0, "%s", e.msg);
    for (int r = 0; r < 6; r++) {
        int32_t target;
        cr_assert_eq(kl_base_read_record(f, path, 5, &target, row, &e), 0, "%s", e.msg);
        cr_expect_eq(target, r % 5);
        for (int i = 0; i < 5; i++)
            cr_expect_eq(row[i], (float)(r * 10 + i) - 0.25f);
    }
    int32_t target;
    cr_expect_eq(kl_base_read_record(f, path, 5, &target, row, &e), -1, "a record past the end");
    fclose(f);
    remove(path);
}

Test(kl_base, another_vocabulary_text_or_chunking_is_refused)
{
    const kl_base_header base = sample();
    woolly_error e = {{0}};
    kl_base_header run = base;
    run.vocab_hash ^= 1;
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), -1);
    cr_expect(strstr(e.msg, "b.kl was made with another vocabulary"), "%s", e.msg);

    run = base;
    run.n_vocab = 6;
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), -1);
    cr_expect(strstr(e.msg, "another vocabulary") && strstr(e.msg, "this model has 6 tokens"), "%s", e.msg);

    run = base;
    run.text_hash ^= 1;
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), -1);
    cr_expect(strstr(e.msg, "another text"), "%s", e.msg);

    run = base;
    run.n_ctx = 16;
    run.n_scored = 7;
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), -1);
    cr_expect(strstr(e.msg, "chunks of 8 tokens (-c 8); this run uses -c 16"), "%s", e.msg);

    run = base;
    run.n_chunks = 1;
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), -1);
    cr_expect(strstr(e.msg, "holds 2 chunks; this run scores 1"), "%s", e.msg);

    /* The model's name is for messages only: a quantization may be named differently. */
    run = base;
    snprintf(run.model_name, sizeof run.model_name, "the same model, quantized");
    cr_expect_eq(kl_base_check("b.kl", &base, &run, &e), 0, "%s", e.msg);
}

Test(kl_base, the_vocabulary_hash_tells_vocabularies_apart)
{
    woolly_model *a = woolly_model_open(tu_data("models/tiny-llama-f16.gguf"));
    woolly_model *b = woolly_model_open(tu_data("models/tiny-llama-q8_0.gguf"));
    woolly_model *c = woolly_model_open(tu_data("models/stories260K.gguf"));
    woolly_model *d = woolly_model_open(tu_data("models/tiny-granite-q4_k_m.gguf"));
    cr_assert(a && b && c && d, "%s", woolly_last_error());
    const uint64_t ha = kl_base_vocab_hash(a);
    cr_expect_eq(ha, kl_base_vocab_hash(b), "one vocabulary, two quantizations");
    cr_expect_neq(ha, kl_base_vocab_hash(c));
    cr_expect_neq(ha, kl_base_vocab_hash(d));
    cr_expect_neq(kl_base_vocab_hash(c), kl_base_vocab_hash(d));
    woolly_model_close(a), woolly_model_close(b), woolly_model_close(c), woolly_model_close(d);
}
