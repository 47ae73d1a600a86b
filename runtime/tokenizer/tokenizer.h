/* Tokenizers read from GGUF metadata: SentencePiece-style (`tokenizer.ggml.model = llama`) and
 * byte-level BPE (`gpt2`, pre-tokenizer from `tokenizer.ggml.pre`). */
#ifndef WOOLLY_TOKENIZER_H
#define WOOLLY_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

typedef struct woolly_tokenizer woolly_tokenizer;

/* Builds the tokenizer from g's metadata (g may be closed afterwards: everything is copied).
 * NULL with a message for a missing/unknown model or pre-tokenizer, or inconsistent vocab arrays. */
woolly_tokenizer *woolly_tokenizer_open(const gguf_file *g, woolly_error *err);
void woolly_tokenizer_close(woolly_tokenizer *t);
/* Opens the GGUF file at path (a full model or a vocabulary-only file), builds its tokenizer and
 * closes the file again. NULL with a message naming the path. */
woolly_tokenizer *woolly_tokenizer_open_file(const char *path, woolly_error *err);

int32_t woolly_tokenizer_n_vocab(const woolly_tokenizer *t);
int32_t woolly_tokenizer_bos(const woolly_tokenizer *t); /* -1 if none */
int32_t woolly_tokenizer_eos(const woolly_tokenizer *t); /* -1 if none */
/* Whether the vocabulary asks for BOS/EOS by default (tokenizer.ggml.add_bos_token, ...). */
bool woolly_tokenizer_adds_bos(const woolly_tokenizer *t);
bool woolly_tokenizer_adds_eos(const woolly_tokenizer *t);
/* True for end-of-generation tokens (EOS, EOT, <|im_end|>, ...). */
bool woolly_tokenizer_is_eog(const woolly_tokenizer *t, int32_t id);
/* The token's vocabulary string (as stored), or NULL if id is out of range. */
const char *woolly_tokenizer_piece(const woolly_tokenizer *t, int32_t id);
/* Id of a vocabulary string (exact), or -1. */
int32_t woolly_tokenizer_find(const woolly_tokenizer *t, const char *piece);
/* The most bytes one token decodes to (see woolly_token_bytes). */
size_t woolly_tokenizer_max_token_bytes(const woolly_tokenizer *t);

typedef struct woolly_tokenize_opts {
    bool add_bos; /* prepend BOS (if the vocab has one) */
    bool add_eos;
    bool parse_special; /* match special/control tokens in the text */
} woolly_tokenize_opts;

/* Tokenizes `len` bytes. Writes at most `cap` ids and returns the total count (which may exceed cap:
 * call again with a larger buffer), or -1 with a message. opts NULL means the vocabulary's defaults
 * (BOS/EOS as it asks, no special tokens parsed). Control tokens are matched in the text only with
 * parse_special; user-defined tokens (token_type 4) are always matched, as the original tokenizers
 * do with their added tokens. Any bytes give a defined result, invalid UTF-8 included. */
int64_t woolly_tokenize(const woolly_tokenizer *t, const char *text, size_t len,
                        const woolly_tokenize_opts *opts, int32_t *ids, int64_t cap, woolly_error *err);

/* The bytes of one token as text (space marker and byte tokens decoded, control tokens empty).
 * Writes at most `cap` bytes; returns the full length, or -1 for an out-of-range id. */
int64_t woolly_token_bytes(const woolly_tokenizer *t, int32_t id, char *buf, size_t cap);

/* Decodes ids into text: the bytes of each token, with the leading-space rule of the stream below.
 * Writes at most `cap` bytes and returns the full length, or -1 with a message for an out-of-range
 * id. */
int64_t woolly_detokenize(const woolly_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap,
                          woolly_error *err);

/* Streaming decode that never splits a UTF-8 character across outputs: feed ids one by one; each call
 * returns the bytes that are complete so far. Also applies the SentencePiece rule that drops the
 * leading space of the first token when the vocabulary asks for it. */
typedef struct woolly_detok_stream {
    const woolly_tokenizer *tok;
    bool first;
    size_t n_pending;
    char pending[8];
} woolly_detok_stream;

void woolly_detok_stream_init(woolly_detok_stream *s, const woolly_tokenizer *t);
/* Appends the completed bytes to out (capacity cap, at least 64 + the longest token, see
 * woolly_tokenizer_max_token_bytes); returns their count, or -1 for a bad id or a too small cap. */
int64_t woolly_detok_stream_feed(woolly_detok_stream *s, int32_t id, char *out, size_t cap);
/* Flushes whatever is pending (an incomplete character at the end of the stream). */
int64_t woolly_detok_stream_flush(woolly_detok_stream *s, char *out, size_t cap);

#endif
