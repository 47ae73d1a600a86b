/* Log probabilities of generated tokens, as the OpenAI API reports them: the log-softmax of the model's
 * logits (its own distribution, before temperature, penalties and truncation, which only shape how the
 * sampler picks), for the token chosen and for the k most likely tokens of that step (k <= 20). The
 * engine computes them from each step's logits; the connection thread turns them into the chat form
 * (choices[].logprobs.content[]) or the completions' legacy form (tokens, token_logprobs, top_logprobs,
 * text_offset). */
#ifndef WOOLLY_SRV_LOGPROBS_H
#define WOOLLY_SRV_LOGPROBS_H

#include <jansson.h>
#include <stdint.h>

#include "tokenizer.h"
#include "woolly.h"

#define SRV_MAX_TOP_LOGPROBS 20

typedef struct srv_alt {
    woolly_token id;
    float logprob;
} srv_alt;

typedef struct srv_token_lp {
    woolly_token id;
    float logprob;
    int32_t n_top;
    srv_alt top[SRV_MAX_TOP_LOGPROBS]; /* the n_top most likely, most likely first (lower id on ties) */
} srv_token_lp;

/* The log-probability of token `tok` under n_vocab logits, and the k (<= SRV_MAX_TOP_LOGPROBS) most
 * likely tokens, found by one pass that keeps the k best seen (no sort of the vocabulary). */
void srv_logprobs_compute(const float *logits, int32_t n_vocab, woolly_token tok, int k, srv_token_lp *out);

/* Chat form: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}. */
json_t *srv_logprobs_chat_entry(const woolly_tokenizer *t, const srv_token_lp *lp);
/* {"content": [entries of lps[0..n)], "refusal": null} */
json_t *srv_logprobs_chat(const woolly_tokenizer *t, const srv_token_lp *lps, int32_t n);
/* Legacy completions form of lps[0..n): {"tokens", "token_logprobs", "top_logprobs": [{TEXT: logprob}],
 * "text_offset"}; offsets in bytes of the generated text, counted from *offset (advanced past them: a
 * stream continues where its previous chunk ended). */
json_t *srv_logprobs_legacy(const woolly_tokenizer *t, const srv_token_lp *lps, int32_t n, size_t *offset);

#endif
