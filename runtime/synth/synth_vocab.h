/* The built-in tokenizer of `woolly synth`: a GPT-2-style byte-level BPE vocabulary (tokenizer model
 * "gpt2", pre-tokenizer "default") learned from a built-in English text, so that a synthesized model
 * needs no file from outside the repository; and the chat templates it can carry.
 *
 * Token ids: the special tokens first (<|endoftext|> at 0, then those of the chat template), then the
 * 256 byte tokens, then one token per learned merge, then filler tokens up to the vocabulary size.
 * Token text is in GPT-2's byte-to-unicode form (every byte is one printable code point, e.g. the space
 * is U+0120 'Ġ'); merges are "LEFT RIGHT" in that form, each part and their concatenation a token. The
 * fillers ("<|filler_N|>", type UNUSED) are reached by no merge, so a tokenizer never produces them. */
#ifndef WOOLLY_SYNTH_VOCAB_H
#define WOOLLY_SYNTH_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* GGUF token types (tokenizer.ggml.token_type). */
enum { WOOLLY_TOKEN_NORMAL = 1, WOOLLY_TOKEN_CONTROL = 3, WOOLLY_TOKEN_UNUSED = 5 };

/* A chat template family: its Jinja template and the special tokens it needs. */
typedef struct woolly_chat_family {
    const char *name;            /* "granite", "llama2", "llama3", "chatml", "phi3" */
    const char *jinja;           /* tokenizer.chat_template */
    const char *const *specials; /* special tokens the template uses, NULL-terminated */
    const char *bos, *eos;       /* among the specials, or "<|endoftext|>" */
    bool add_bos;
} woolly_chat_family;

/* NULL if `name` is not a known family. */
const woolly_chat_family *woolly_chat_family_get(const char *name);
/* "granite, llama2, llama3, chatml, phi3" (for messages). */
const char *woolly_chat_family_names(void);

typedef struct woolly_synth_vocab {
    char **tokens; /* n, UTF-8, NUL-terminated */
    int32_t *types;
    uint64_t n;
    char **merges;
    uint64_t n_merges;
    uint32_t bos, eos;
    bool add_bos;
    uint64_t n_learned; /* tokens made by merges (the rest past the bytes are fillers) */
} woolly_synth_vocab;

/* The vocabulary of exactly n_vocab tokens, with the special tokens of `family` (may be NULL).
 * Deterministic. Fails if n_vocab cannot hold the special and byte tokens. */
int woolly_synth_vocab_build(int64_t n_vocab, const woolly_chat_family *family, woolly_synth_vocab *v,
                             woolly_error *err);
void woolly_synth_vocab_free(woolly_synth_vocab *v);

/* Smallest n_vocab the built-in tokenizer accepts for `family`. */
int64_t woolly_synth_vocab_min(const woolly_chat_family *family);

/* GPT-2's byte-to-unicode map: the code point that stands for byte b in token text. */
uint32_t woolly_byte_to_codepoint(uint8_t b);

/* The text the merges are learned from. */
extern const char woolly_synth_text[];

#endif
