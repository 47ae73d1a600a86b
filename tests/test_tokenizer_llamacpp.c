/* The pre-tokenizers and SentencePiece variants against llama.cpp's own tokenizer. The real
 * vocabularies of these families are not test data here, so each case is a vocabulary of ours, written
 * by this test, and the ids llama.cpp's `llama-tokenize` gave for the texts in tests/data/tokenizer/
 * texts.inp on that same file, recorded in tests/data/tokenizer/NAME.out (by record.py beside them):
 * - a file under ../shared/testdata with its `tokenizer.ggml.pre` or SentencePiece flags changed;
 * - "trained-*": a byte-level BPE vocabulary trained here on the texts themselves, without any
 *   pre-tokenization, so that its merges run across every boundary a pre-tokenizer might draw (spaces,
 *   case changes, digit groups, punctuation, line breaks): with it, the ids show where the pieces
 *   were cut, which GPT-2's own merges mostly do not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_write.h"
#include "testutil.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"
#include "unicode.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"
#define MAX_TEXTS 64

typedef struct variant {
    const char *name; /* tests/data/tokenizer/NAME.out */
    const char *base; /* the vocabulary it is made from, under ../shared/testdata; NULL: trained here */
    const char *pre;  /* tokenizer.ggml.pre to write, or NULL to keep the base's */
    const char *general_name;
    int add_space_prefix; /* -1: as the base has it */
    bool special;         /* parse special tokens in the text */
} variant;

#define GPT2_VOCAB "vocab/ggml-vocab-gpt-2.gguf"
static const variant VARIANTS[] = {
    {"llama-bpe", GPT2_VOCAB, "llama-bpe", NULL, -1, false},
    {"qwen2", GPT2_VOCAB, "qwen2", NULL, -1, false},
    {"deepseek-r1-qwen", GPT2_VOCAB, "deepseek-r1-qwen", NULL, -1, false},
    {"deepseek-v3", GPT2_VOCAB, "deepseek-v3", NULL, -1, false},
    {"tekken", GPT2_VOCAB, "tekken", NULL, -1, false},
    {"gpt-4o", GPT2_VOCAB, "gpt-4o", NULL, -1, false},
    {"smollm", GPT2_VOCAB, "smollm", NULL, -1, false},
    /* Phi-3: SentencePiece with its markup tokens, which llama.cpp makes strip the whitespace after
     * them when the model's name says Phi-3. */
    {"spm-phi3", "models/tiny-phi3-f16.gguf", NULL, "Phi3", -1, true},
    /* Gemma: SentencePiece without the leading space (add_space_prefix false). */
    {"spm-gemma", "models/tiny-gemma3-f16.gguf", NULL, "gemma-3-synthetic", 0, true},
    {"spm-llama", "models/tiny-gemma3-f16.gguf", NULL, NULL, -1, true},
    {"trained-llama-bpe", NULL, "llama-bpe", NULL, -1, false},
    {"trained-qwen2", NULL, "qwen2", NULL, -1, false},
    {"trained-deepseek-v3", NULL, "deepseek-v3", NULL, -1, false},
    {"trained-tekken", NULL, "tekken", NULL, -1, false},
    {"trained-gpt-4o", NULL, "gpt-4o", NULL, -1, false},
    {"trained-smollm", NULL, "smollm", NULL, -1, false},
    {"trained-gpt-2", NULL, "gpt-2", NULL, -1, false},
};
#define N_VARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

typedef struct texts {
    char *buf;
    char *str[MAX_TEXTS];
    size_t len[MAX_TEXTS];
    int n;
} texts;

static void load_texts(texts *t);

/* ---- A byte-level BPE vocabulary trained on the texts ---- */

#define TRAIN_MERGES 4000

typedef struct trained {
    char **tok; /* 256 byte characters, then one token per merge */
    char **merge;
    int n_tok, n_merge;
} trained;

static char *cat3(const char *a, const char *b, const char *c)
{
    char *s = malloc(strlen(a) + strlen(b) + strlen(c) + 1);
    cr_assert(s != NULL);
    strcpy(s, a);
    strcat(s, b);
    strcat(s, c);
    return s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Plain BPE training over the texts' bytes (each text one sequence, no pre-tokenization): the most
 * frequent adjacent pair (the smallest on ties) is merged, TRAIN_MERGES times or until every text is
 * one token; pairs seen once merge too, so that the merges span whatever boundary a text has.
 * Deterministic, so the file is the same at every run. */
static void train(trained *tr)
{
    texts tx;
    load_texts(&tx);
    size_t total = 0;
    for (int i = 0; i < tx.n; i++)
        total += tx.len[i] + 1;
    int32_t *seq = malloc(total * sizeof *seq);
    uint64_t *pairs = malloc(total * sizeof *pairs);
    tr->tok = calloc(256 + TRAIN_MERGES, sizeof *tr->tok);
    tr->merge = calloc(TRAIN_MERGES, sizeof *tr->merge);
    cr_assert(seq && pairs && tr->tok && tr->merge);
    size_t n = 0;
    for (int i = 0; i < tx.n; i++) {
        for (size_t k = 0; k < tx.len[i]; k++)
            seq[n++] = (unsigned char)tx.str[i][k];
        seq[n++] = -1; /* texts do not merge into each other */
    }
    for (int b = 0; b < 256; b++) {
        char c[5] = {0};
        woolly_utf8_encode(woolly_byte_to_char((unsigned char)b), c);
        tr->tok[b] = cat3(c, "", "");
    }
    tr->n_tok = 256;
    tr->n_merge = 0;
    while (tr->n_merge < TRAIN_MERGES) {
        size_t np = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (seq[i] >= 0 && seq[i + 1] >= 0)
                pairs[np++] = (uint64_t)seq[i] << 32 | (uint32_t)seq[i + 1];
        qsort(pairs, np, sizeof *pairs, cmp_u64);
        uint64_t best = 0;
        size_t best_n = 0;
        for (size_t i = 0; i < np;) {
            size_t j = i;
            while (j < np && pairs[j] == pairs[i])
                j++;
            if (j - i > best_n) {
                best_n = j - i;
                best = pairs[i];
            }
            i = j;
        }
        if (best_n == 0)
            break;
        const int32_t a = (int32_t)(best >> 32), b = (int32_t)(uint32_t)best;
        char *joined = cat3(tr->tok[a], tr->tok[b], "");
        int32_t id = -1;
        for (int k = 0; k < tr->n_tok && id < 0; k++)
            if (!strcmp(tr->tok[k], joined))
                id = k;
        if (id < 0) {
            id = tr->n_tok;
            tr->tok[tr->n_tok++] = joined;
        } else {
            free(joined);
        }
        tr->merge[tr->n_merge++] = cat3(tr->tok[a], " ", tr->tok[b]);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && seq[i] == a && seq[i + 1] == b) {
                seq[o++] = id;
                i++;
            } else {
                seq[o++] = seq[i];
            }
        }
        n = o;
    }
    free(seq);
    free(pairs);
    free(tx.buf);
}

static void free_trained(trained *tr)
{
    for (int i = 0; i < tr->n_tok; i++)
        free(tr->tok[i]);
    for (int i = 0; i < tr->n_merge; i++)
        free(tr->merge[i]);
    free(tr->tok);
    free(tr->merge);
}

/* Writes the vocabulary of v: every metadata key of the base file (for a trained one: GPT-2's file,
 * whose tokenizer keys it replaces), with v's changes, and no tensors. */
static const char *write_variant(const variant *v)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(tu_data(v->base ? v->base : GPT2_VOCAB), &err);
    cr_assert(g != NULL, "%s", err.msg);
    static char path[4096];
    char name[256];
    snprintf(name, sizeof name, "tokvec-%s.gguf", v->name);
    snprintf(path, sizeof path, "%s", tu_tmp_path(name));
    gguf_writer *w = gguf_writer_open(path, &err);
    cr_assert(w != NULL, "%s", err.msg);
    trained tr = {0};
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!v->base && kv->key.len > 10 && !memcmp(kv->key.ptr, "tokenizer.", 10))
            continue;
        if ((v->pre && gguf_str_eq(kv->key, "tokenizer.ggml.pre")) ||
            (v->general_name && gguf_str_eq(kv->key, "general.name")) ||
            (v->add_space_prefix >= 0 && gguf_str_eq(kv->key, "tokenizer.ggml.add_space_prefix")))
            continue;
        gguf_writer_copy_kv(w, kv);
    }
    if (!v->base) {
        train(&tr);
        gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tr.tok, (uint64_t)tr.n_tok);
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)tr.merge,
                                (uint64_t)tr.n_merge);
        gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    }
    if (v->pre)
        gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre);
    if (v->general_name)
        gguf_writer_set_str(w, "general.name", v->general_name);
    if (v->add_space_prefix >= 0)
        gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix != 0);
    cr_assert_eq(gguf_writer_write_header(w, &err), 0, "%s", err.msg);
    cr_assert_eq(gguf_writer_close(w, &err), 0, "%s", err.msg);
    free_trained(&tr);
    gguf_close(g);
    return path;
}

static void load_texts(texts *t)
{
    size_t n;
    memset(t, 0, sizeof *t);
    t->buf = tu_read_file(WOOLLY_SOURCE_DIR "/tests/data/tokenizer/texts.inp", &n);
    for (char *p = t->buf, *end = t->buf + n; p < end;) {
        char *sep = strstr(p, SEPARATOR);
        cr_assert(sep != NULL, "texts.inp: text after the last separator");
        cr_assert(t->n < MAX_TEXTS);
        *sep = 0;
        t->str[t->n] = p;
        t->len[t->n++] = (size_t)(sep - p);
        p = sep + strlen(SEPARATOR);
    }
    cr_assert(t->n >= 40, "texts.inp has only %d texts", t->n);
}

/* Compares every text; returns how many are exact (each mismatch is reported). */
static int check_variant(const variant *v)
{
    texts tx;
    load_texts(&tx);
    char rel[512];
    snprintf(rel, sizeof rel, WOOLLY_SOURCE_DIR "/tests/data/tokenizer/%s.out", v->name);
    char *out = tu_read_file(rel, NULL);
    woolly_error err = {{0}};
    woolly_tokenizer *tok = woolly_tokenizer_open_file(write_variant(v), &err);
    cr_assert(tok != NULL, "%s: %s", v->name, err.msg);
    int ok = 0, line_no = 0;
    char *line = out;
    for (int i = 0; i < tx.n; i++, line_no++) {
        cr_assert(line && *line, "%s.out: no line for text %d", v->name, i);
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        int32_t *want;
        int n_want = tu_parse_ids(line, &want);
        woolly_tokenize_opts opts = {false, false, v->special};
        int32_t got[1024];
        int64_t n_got = woolly_tokenize(tok, tx.str[i], tx.len[i], &opts, got, 1024, &err);
        cr_assert(n_got >= 0 && n_got <= 1024, "%s text %d: %s", v->name, i, err.msg);
        bool same = n_got == n_want && memcmp(got, want, (size_t)n_want * sizeof *got) == 0;
        char gbuf[4096] = "";
        for (int64_t k = 0, o = 0; k < n_got && o < 4000; k++)
            o += snprintf(gbuf + o, sizeof gbuf - (size_t)o, " %d", got[k]);
        cr_expect(same, "%s text %d '%.60s':\n  llama.cpp %s\n  woolly   %s", v->name, i, tx.str[i], line,
                  gbuf);
        ok += same;
        free(want);
        line = nl ? nl + 1 : NULL;
    }
    woolly_tokenizer_close(tok);
    free(out);
    free(tx.buf);
    cr_log_info("%s: %d of %d texts as llama.cpp tokenizes them", v->name, ok, tx.n);
    cr_assert_eq(ok, tx.n, "%s: %d of %d texts exact", v->name, ok, tx.n);
    return ok;
}

Test(llamacpp_vectors, llama_bpe)
{
    check_variant(&VARIANTS[0]);
}
Test(llamacpp_vectors, qwen2)
{
    check_variant(&VARIANTS[1]);
}
Test(llamacpp_vectors, deepseek_r1_qwen)
{
    check_variant(&VARIANTS[2]);
}
Test(llamacpp_vectors, deepseek_v3)
{
    check_variant(&VARIANTS[3]);
}
Test(llamacpp_vectors, tekken)
{
    check_variant(&VARIANTS[4]);
}
Test(llamacpp_vectors, gpt_4o)
{
    check_variant(&VARIANTS[5]);
}
Test(llamacpp_vectors, smollm)
{
    check_variant(&VARIANTS[6]);
}
Test(llamacpp_vectors, spm_phi3)
{
    check_variant(&VARIANTS[7]);
}
Test(llamacpp_vectors, spm_gemma)
{
    check_variant(&VARIANTS[8]);
}
Test(llamacpp_vectors, spm_llama)
{
    check_variant(&VARIANTS[9]);
}
Test(llamacpp_vectors, trained_llama_bpe)
{
    check_variant(&VARIANTS[10]);
}
Test(llamacpp_vectors, trained_qwen2)
{
    check_variant(&VARIANTS[11]);
}
Test(llamacpp_vectors, trained_deepseek_v3)
{
    check_variant(&VARIANTS[12]);
}
Test(llamacpp_vectors, trained_tekken)
{
    check_variant(&VARIANTS[13]);
}
Test(llamacpp_vectors, trained_gpt_4o)
{
    check_variant(&VARIANTS[14]);
}
Test(llamacpp_vectors, trained_smollm)
{
    check_variant(&VARIANTS[15]);
}
Test(llamacpp_vectors, trained_gpt_2)
{
    check_variant(&VARIANTS[16]);
}

/* The defaults llama.cpp gives these names: Llama 3 and Tekken vocabularies add BOS when the file does
 * not say (here the GPT-2 file's BOS, <|endoftext|>), Qwen2's do not. */
Test(llamacpp_vectors, bos_defaults)
{
    const bool want[] = {true, false, false, false, true, false, false};
    for (size_t i = 0; i < 7; i++) {
        woolly_error err = {{0}};
        woolly_tokenizer *tok = woolly_tokenizer_open_file(write_variant(&VARIANTS[i]), &err);
        cr_assert(tok != NULL, "%s", err.msg);
        cr_assert_eq(woolly_tokenizer_adds_bos(tok), want[i], "%s", VARIANTS[i].name);
        woolly_tokenizer_close(tok);
    }
}
