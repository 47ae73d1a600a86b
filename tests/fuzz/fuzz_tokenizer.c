/* libFuzzer target for the tokenizers (runtime/tokenizer) on the text a server's clients send: any bytes,
 * invalid UTF-8 included, through every pre-tokenizer and SentencePiece variant the shared test data
 * gives (GPT-2's vocabulary written again with each `tokenizer.ggml.pre` name the tokenizer knows, the
 * SentencePiece vocabularies of the tiny models and of llama.cpp's test vocabulary). The first byte picks
 * the vocabulary and the options, the rest is the text. What it checks on every input:
 *   - tokenizing succeeds, with every id in the vocabulary, and a call with no room gives the same count;
 *   - the ids decode, and decoding them one by one as a stream (a server's way) gives the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "tokenizer.h"

#define STR(x) #x
#define XSTR(x) STR(x)

/* one name of each pre-tokenizer (NULL: the file's own, GPT-2's) */
static const char *const BPE_PRES[] = {NULL,     "llama-bpe", "qwen2",     "deepseek-v3",
                                       "tekken", "gpt-4o",    "starcoder", "deepseek-llm"};
static const char *const OTHER_VOCABS[] = {
    "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-starcoder.gguf", "models/tiny-llama-f16.gguf",
    "models/tiny-gemma3-f16.gguf",     "models/tiny-phi3-f16.gguf",       "models/stories260K.gguf",
};
enum { N_BPE = sizeof BPE_PRES / sizeof BPE_PRES[0], N_OTHER = sizeof OTHER_VOCABS / sizeof OTHER_VOCABS[0] };

static woolly_tokenizer *toks[N_BPE + N_OTHER];
static int n_toks;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_tokenizer: %s: %s\n", what, msg);
    abort();
}

/* GPT-2's vocabulary with tokenizer.ggml.pre = pre, written to a file of its own, opened. */
static woolly_tokenizer *gpt2_as(const char *pre)
{
    woolly_error err = {{0}};
    gguf_file *g = gguf_open(XSTR(WOOLLY_TESTDATA) "/vocab/ggml-vocab-gpt-2.gguf", &err);
    if (!g)
        die("GPT-2's vocabulary", err.msg);
    char path[] = "/tmp/fuzz-tokenizer-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0)
        die("a temporary file", path);
    close(fd);
    gguf_writer *w = gguf_writer_open(path, &err);
    if (!w)
        die(path, err.msg);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!(pre && gguf_str_eq(g->kv[i].key, "tokenizer.ggml.pre")))
            gguf_writer_copy_kv(w, &g->kv[i]);
    if (pre)
        gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (gguf_writer_write_header(w, &err) || gguf_writer_close(w, &err))
        die(path, err.msg);
    gguf_close(g);
    woolly_tokenizer *t = woolly_tokenizer_open_file(path, &err);
    unlink(path);
    if (!t)
        die(pre ? pre : "gpt-2", err.msg);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int i = 0; i < N_BPE; i++)
        toks[n_toks++] = gpt2_as(BPE_PRES[i]);
    for (int i = 0; i < N_OTHER; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", XSTR(WOOLLY_TESTDATA), OTHER_VOCABS[i]);
        woolly_error err = {{0}};
        if (!(toks[n_toks++] = woolly_tokenizer_open_file(path, &err)))
            die(path, err.msg);
    }
    return 0;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tokenizer: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const woolly_tokenizer *t = toks[data[0] % n_toks];
    const woolly_tokenize_opts opts = {.add_bos = data[0] & 0x40, .parse_special = data[0] & 0x80};
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    woolly_error err = {{0}};
    const int64_t n = woolly_tokenize(t, text, len, &opts, NULL, 0, &err);
    check(n >= 0, "tokenizing failed");
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    check(ids != NULL, "memory");
    check(woolly_tokenize(t, text, len, &opts, ids, n, &err) == n, "the count changed with room for the ids");
    const int32_t n_vocab = woolly_tokenizer_n_vocab(t);
    for (int64_t i = 0; i < n; i++)
        check(ids[i] >= 0 && ids[i] < n_vocab, "an id outside the vocabulary");
    const int64_t bytes = woolly_detokenize(t, ids, (size_t)n, NULL, 0, &err);
    check(bytes >= 0, "the ids do not decode");
    char *whole = malloc((size_t)bytes + 1);
    const size_t piece_cap = 64 + woolly_tokenizer_max_token_bytes(t);
    char *stream = malloc((size_t)bytes + piece_cap + 8), *piece = malloc(piece_cap);
    check(whole && stream && piece, "memory");
    check(woolly_detokenize(t, ids, (size_t)n, whole, (size_t)bytes + 1, &err) == bytes, "decoded length");
    woolly_detok_stream s;
    woolly_detok_stream_init(&s, t);
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = woolly_detok_stream_feed(&s, ids[i], piece, piece_cap);
        check(k >= 0 && at + (size_t)k <= (size_t)bytes, "a stream piece failed or ran past the whole");
        memcpy(stream + at, piece, (size_t)k);
        at += (size_t)k;
    }
    const int64_t k = woolly_detok_stream_flush(&s, piece, piece_cap);
    check(k >= 0 && at + (size_t)k == (size_t)bytes, "the stream's length is not the whole's");
    memcpy(stream + at, piece, (size_t)k);
    check(memcmp(stream, whole, (size_t)bytes) == 0, "the stream's bytes are not the whole's");
    free(ids), free(whole), free(stream), free(piece);
    return 0;
}
