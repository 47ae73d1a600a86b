/* Tokenizer speed: tokenizing 1 MiB of English prose (stories260K.greedy200.txt repeated) with each
 * shared vocabulary, and building each tokenizer from its GGUF metadata. The target is at most 0.5 s
 * per MiB for the llama-spm and starcoder vocabularies.
 *
 *   bench_tokenizer [TESTDATA_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "timing.h"
#include "tokenizer.h"

#define TEXT_BYTES (1u << 20)

typedef struct job {
    const woolly_tokenizer *tok;
    const gguf_file *g;
    const char *text;
    size_t len;
    int32_t *ids;
    int64_t n_ids;
} job;

static void run_tokenize(void *p)
{
    job *j = p;
    woolly_tokenize_opts opts = {false, false, false};
    j->n_ids = woolly_tokenize(j->tok, j->text, j->len, &opts, j->ids, (int64_t)j->len + 1, NULL);
}

static void run_open(void *p)
{
    job *j = p;
    woolly_tokenizer_close(woolly_tokenizer_open(j->g, NULL));
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : WOOLLY_TESTDATA;
    char path[4096];
    snprintf(path, sizeof path, "%s/refs/stories260K.greedy200.txt", data);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenizer: cannot open %s\n", path);
        return 1;
    }
    char piece[8192];
    size_t n_piece = fread(piece, 1, sizeof piece, f);
    fclose(f);
    if (n_piece == 0) {
        fprintf(stderr, "bench_tokenizer: %s is empty\n", path);
        return 1;
    }
    char *text = malloc(TEXT_BYTES);
    int32_t *ids = malloc((TEXT_BYTES + 1) * sizeof *ids);
    if (!text || !ids)
        return 1;
    for (size_t i = 0; i < TEXT_BYTES; i++)
        text[i] = piece[i % n_piece];

    printf("tokenizing %u bytes (%s repeated), median of up to 5 runs\n", TEXT_BYTES, path);
    printf("%-12s %10s %10s %10s %12s\n", "vocab", "open ms", "seconds", "MiB/s", "tokens");
    const char *vocabs[] = {"llama-spm", "starcoder", "gpt-2"};
    int rc = 0;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", data, vocabs[v]);
        woolly_error err = {{0}};
        gguf_file *g = gguf_open(path, &err);
        woolly_tokenizer *tok = g ? woolly_tokenizer_open(g, &err) : NULL;
        if (!tok) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            gguf_close(g);
            rc = 1;
            continue;
        }
        job j = {tok, g, text, TEXT_BYTES, ids, 0};
        woolly_timing topen = woolly_time_fn(run_open, &j, 0.05, 5, 2.0);
        woolly_timing ttok = woolly_time_fn(run_tokenize, &j, 0.2, 5, 6.0);
        printf("%-12s %10.2f %10.3f %10.2f %12lld\n", vocabs[v], topen.median_s * 1e3, ttok.median_s,
               TEXT_BYTES / ttok.median_s / (1 << 20), (long long)j.n_ids);
        woolly_tokenizer_close(tok);
        gguf_close(g);
    }
    free(text);
    free(ids);
    return rc;
}
