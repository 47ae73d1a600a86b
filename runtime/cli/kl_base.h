/* The base file of `woolly perplexity --kl-divergence-base`: what one run predicted at every scored
 * position, so that a later run (another quantization of the same model, another kernel level, KV cache
 * type or profile) can be compared with it position by position.
 *
 * Layout, little-endian:
 *   header, KL_BASE_HEADER_SIZE bytes:
 *     0   char[8]  magic "WOOLLYKL"
 *     8   u32      version (KL_BASE_VERSION)
 *     12  u32      header size (KL_BASE_HEADER_SIZE)
 *     16  u32      n_vocab
 *     20  u32      n_ctx: tokens per chunk
 *     24  u32      n_chunks
 *     28  u32      n_scored: positions per chunk, n_ctx - 1 - n_ctx/2
 *     32  u32      flags: bit 0 = the first token of each chunk was replaced by BOS
 *     36  u32      reserved, 0
 *     40  u64      vocabulary hash (kl_base_vocab_hash)
 *     48  u64      text hash: FNV-1a 64 of the text's bytes
 *     56  u64      tokens in the whole text
 *     64  char[64] the model's name (general.name), NUL-padded: for messages only
 *   then n_chunks * n_scored records, chunk by chunk, position by position:
 *     i32          the token the position predicts
 *     f32[n_vocab] the position's logits
 *
 * A position's log-probabilities are stored as its float32 logits z, from which they are recomputed
 * exactly (log p_i = z_i - log sum_j exp z_j, in double): rounding the log-probabilities themselves to
 * float32 or 16 bits would add an error as large as the small divergences this file exists to measure,
 * at the same or nearly the same size. */
#ifndef WOOLLY_CLI_KL_BASE_H
#define WOOLLY_CLI_KL_BASE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "woolly.h"

#define KL_BASE_MAGIC "WOOLLYKL"
#define KL_BASE_VERSION 1u
#define KL_BASE_HEADER_SIZE 128u
#define KL_BASE_NAME_SIZE 64u
#define KL_BASE_FLAG_BOS 1u
/* Bounds a header is checked against before any size is computed from it. */
#define KL_BASE_MAX_VOCAB (1u << 24)
#define KL_BASE_MAX_CTX (1u << 24)

typedef struct kl_base_header {
    uint32_t version;
    uint32_t n_vocab, n_ctx, n_chunks, n_scored;
    uint32_t flags;
    uint64_t vocab_hash, text_hash, n_text_tokens;
    char model_name[KL_BASE_NAME_SIZE]; /* NUL-terminated */
} kl_base_header;

/* FNV-1a 64, continued from h (start with KL_BASE_HASH_SEED). */
#define KL_BASE_HASH_SEED 0xcbf29ce484222325ull
uint64_t kl_base_hash(uint64_t h, const void *data, size_t n);

/* A hash of everything that decides what a token id means: n_vocab, BOS, EOS, whether BOS is added,
 * and the text of every token. Two files of one vocabulary (a model and its quantizations) agree. */
uint64_t kl_base_vocab_hash(const woolly_model *m);

/* The header of a run of model m over a text (its bytes and token count) with the given chunking. */
void kl_base_describe(const woolly_model *m, const char *text, size_t len, int64_t n_text_tokens,
                      uint32_t n_ctx, uint32_t n_chunks, uint32_t n_scored, kl_base_header *h);

/* Bytes of one record and of a whole file with this header. */
uint64_t kl_base_record_size(uint32_t n_vocab);
uint64_t kl_base_file_size(const kl_base_header *h);

/* Writing: the header, then n_chunks * n_scored records. `path` names the file in messages. */
int kl_base_write_header(FILE *f, const char *path, const kl_base_header *h, woolly_error *err);
int kl_base_write_record(FILE *f, const char *path, int32_t target, const float *logits, uint32_t n_vocab,
                         woolly_error *err);

/* Reads and checks the header: magic, version, bounds, and that the file holds exactly the records the
 * header promises (a truncated or overlong file is refused here, before any evaluation). */
int kl_base_read_header(FILE *f, const char *path, kl_base_header *h, woolly_error *err);
/* One record; the target must be a token id of the vocabulary. */
int kl_base_read_record(FILE *f, const char *path, uint32_t n_vocab, int32_t *target, float *logits,
                        woolly_error *err);

/* Whether a base can be compared with a run: the same vocabulary, the same text, the same chunking
 * (chunk size and count). The message says what differs and what to do. */
int kl_base_check(const char *path, const kl_base_header *base, const kl_base_header *run, woolly_error *err);

#endif
