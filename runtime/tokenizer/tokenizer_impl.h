/* Inside the tokenizer: the loaded vocabulary and the pieces each algorithm needs. Private to
 * runtime/tokenizer/ (and the tokenizer tests). The dispatcher (tokenizer.c) calls the algorithm
 * files (tokenizer_spm.c, tokenizer_bpe.c, tokenizer_decode.c); they call only what is declared here
 * and defined in tokenizer_vocab.c, never back into the dispatcher. */
#ifndef WOOLLY_TOKENIZER_IMPL_H
#define WOOLLY_TOKENIZER_IMPL_H

#include <stdlib.h>

#include "tokenizer.h"
#include "tokenizer_pretok.h"

/* tokenizer.ggml.token_type values. */
enum woolly_token_type {
    WOOLLY_TOKEN_NORMAL = 1,
    WOOLLY_TOKEN_UNKNOWN = 2,
    WOOLLY_TOKEN_CONTROL = 3,
    WOOLLY_TOKEN_USER_DEFINED = 4,
    WOOLLY_TOKEN_UNUSED = 5,
    WOOLLY_TOKEN_BYTE = 6,
};

enum woolly_tok_model {
    WOOLLY_TOK_SPM, /* tokenizer.ggml.model = llama */
    WOOLLY_TOK_BPE, /* tokenizer.ggml.model = gpt2 */
};

/* Open-addressing hash map from a byte string to a token id. A slot holds the upper 32 bits of the
 * string's hash and id + 1 (0 = empty), so that a probe rarely has to look at a token's text. */
typedef struct woolly_str_map {
    uint64_t *slots;
    uint32_t mask;
} woolly_str_map;

/* Open-addressing hash map from an adjacent pair of token ids to the BPE merge that joins them. */
typedef struct woolly_pair_map {
    uint64_t *keys; /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank;
    int32_t *merged;
    uint64_t mask;
} woolly_pair_map;

/* The special tokens matched in the text before pre-tokenization, as a byte trie. */
typedef struct woolly_special_trie {
    struct woolly_trie_node {
        int32_t first_child, next_sibling;
        int32_t token; /* token ending here, or -1 */
        unsigned char byte;
    } * nodes;
    int32_t n_nodes;
    bool first_byte[256]; /* a quick filter: can a special token start with this byte? */
} woolly_special_trie;

struct woolly_tokenizer {
    enum woolly_tok_model model;
    enum woolly_pretok pre;
    int32_t n_vocab;

    /* Token strings as stored (NUL-terminated copies in one block), their types and scores. */
    char *text;
    uint64_t *text_off; /* n_vocab + 1 offsets: token i is text[text_off[i] .. text_off[i+1] - 1) */
    uint8_t *type;
    float *score;       /* SPM only */
    woolly_str_map map; /* text -> id (the first id when a string repeats) */

    /* Decoded bytes of every token (space marker and byte tokens resolved, control tokens empty). */
    char *dec;
    uint64_t *dec_off; /* n_vocab + 1 */
    size_t max_dec_len;

    /* SPM: the <0xXX> token of each byte (-1 if absent). BPE: the token of each byte's mapped
     * character (-1 if absent). */
    int32_t byte_token[256];
    /* SPM: true when no mergeable token holds a space marker after another character, so that the
     * text can be cut before each such marker without changing the result (see tokenizer_spm.c). */
    bool spm_cut_at_space;

    woolly_pair_map merges; /* BPE */

    /* Control (and unknown) tokens are matched only when asked, user-defined ones always. */
    woolly_special_trie special_all;  /* control, unknown, user-defined */
    woolly_special_trie special_user; /* user-defined only */

    int32_t bos, eos, unk, eot, eom;
    bool add_bos, add_eos, add_space_prefix;
    /* Special tokens that swallow the whitespace after them in the text (NULL: none do). llama.cpp
     * gives this to Phi-3's markup tokens, so that "<|user|>\n" is the same as "<|user|>". */
    bool *rstrip;
    /* BPE: a pre-tokenized piece that is itself a token is emitted whole, unmerged (Llama 3, Tekken). */
    bool bpe_whole_piece_first;
};

/* Token id's string as stored (without the terminating NUL). */
static inline const char *woolly_token_text(const woolly_tokenizer *t, int32_t id, size_t *len)
{
    *len = (size_t)(t->text_off[id + 1] - t->text_off[id] - 1);
    return t->text + t->text_off[id];
}

/* The string -> id map (tokenizer_vocab.c): built once at load; a repeated string keeps its first id. */
int woolly_vocab_build_map(woolly_tokenizer *t, woolly_error *err);
/* The id of the exact byte string s[0..n), or -1. */
int32_t woolly_vocab_lookup(const woolly_tokenizer *t, const char *s, size_t n);

/* Growable output of the encoders. */
typedef struct woolly_ids {
    int32_t *v;
    size_t n, cap;
} woolly_ids;

static inline int woolly_ids_push(woolly_ids *o, int32_t id, woolly_error *err)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v)
            return woolly_fail(err, "tokenizer: out of memory for %zu tokens", cap);
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

/* Encoders of one run of plain text (no special tokens in it). They append to out. */
int woolly_spm_encode(const woolly_tokenizer *t, const char *text, size_t len, bool add_space_prefix,
                      woolly_ids *out, woolly_error *err);
int woolly_bpe_encode(const woolly_tokenizer *t, const char *text, size_t len, woolly_ids *out,
                      woolly_error *err);

/* Load-time pieces of the BPE model: the merges table and the byte -> token mapping. */
int woolly_bpe_init(woolly_tokenizer *t, const gguf_file *g, woolly_error *err);
/* GPT-2's byte <-> character mapping: the printable bytes map to themselves, the others to
 * U+0100 + n in byte order. Returns -1 for a character that is not the image of a byte. */
uint32_t woolly_byte_to_char(unsigned char b);
int woolly_char_to_byte(uint32_t cp);

#endif
