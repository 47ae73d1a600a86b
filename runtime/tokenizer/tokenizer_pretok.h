/* Pre-tokenizers of the byte-level BPE vocabularies (`tokenizer.ggml.pre`): they cut a text into the
 * pieces that BPE then encodes one by one. Each is a hand-written matcher over code points that does
 * what the published regexes do, in time linear in the text. Private to the tokenizer (and its tests).
 *
 *   gpt-2, default  GPT-2's regex:
 *                   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   starcoder       every \p{N} character on its own, then GPT-2's regex on what lies between
 *   deepseek-llm    DeepSeek LLM's tokenizer.json: a sequence of isolating splits, each applied to
 *                   every piece the previous ones made:
 *                     [\r\n]
 *                     \s?[<cased letters: A-Za-z, Latin, Greek, Cyrillic, ...>]+
 *                     \s?[!-/:-~！-／：-～‘-‟　-。]+
 *                     \s+$
 *                     [一-龥ࠀ-一가-퟿]+
 *                     every \p{N} character on its own (Digits, individual_digits = true)
 *
 *   llama-bpe, qwen2, tekken, gpt-4o, deepseek-v3: the regexes llama.cpp runs for these names, with
 *                   its deviations from the published ones (tokenizer_pretok_stage.h lists them);
 *                   smollm and refact are starcoder's, deepseek-r1-qwen is qwen2's.
 *
 * Text that is not valid UTF-8 is read byte by byte: each stray byte is a character of its own that
 * is neither a letter, a number nor a space. */
#ifndef WOOLLY_TOKENIZER_PRETOK_H
#define WOOLLY_TOKENIZER_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum woolly_pretok {
    WOOLLY_PRETOK_GPT2,
    WOOLLY_PRETOK_STARCODER,
    WOOLLY_PRETOK_DEEPSEEK_LLM,
    WOOLLY_PRETOK_LLAMA3, /* llama-bpe (Llama 3.x) */
    WOOLLY_PRETOK_QWEN2,  /* qwen2, deepseek-r1-qwen */
    WOOLLY_PRETOK_TEKKEN, /* Mistral Nemo/Small */
    WOOLLY_PRETOK_GPT4O,  /* Phi-4-mini */
    WOOLLY_PRETOK_DEEPSEEK_V3,
};

/* The pre-tokenizer of a `tokenizer.ggml.pre` name: 0, or -1 for a name none of them has. */
int woolly_pretok_lookup(const char *name, size_t len, enum woolly_pretok *out);
const char *woolly_pretok_name(enum woolly_pretok p);
/* Every name woolly_pretok_lookup knows, comma-separated (for error messages). */
const char *woolly_pretok_supported(void);

/* Cuts text[0..len) into pieces that tile it: on success returns the number of pieces n and stores in
 * *bounds a heap array (free() it) of n + 1 byte offsets, piece i being text[bounds[i] .. bounds[i+1]).
 * -1 with a message if memory runs out or len does not fit 32 bits. */
int64_t woolly_pretok_split(enum woolly_pretok p, const char *text, size_t len, uint32_t **bounds,
                            woolly_error *err);

#endif
