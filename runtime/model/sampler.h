/* Token sampling: logit biases, repetition penalty, top-k, min-p, temperature, top-p, then a draw from a
 * seeded generator. Everything it needs is allocated when it is created (or its biases set); sampling a
 * token allocates nothing.
 *
 * The order, fixed and documented because the filters do not commute:
 *   0. the logit biases (woolly_sampler_set_logit_bias) are added to their tokens' logits;
 *   1. penalties over the last repeat_last_n accepted tokens: the repetition penalty (each distinct id
 *      once: a positive logit is divided by it, a negative one multiplied), then OpenAI's presence and
 *      frequency penalties (logit -= presence_penalty + frequency_penalty * occurrences);
 *   2. temp == 0: the largest logit wins (the lowest id on ties), nothing else applies;
 *   3. top-k: keep the k largest logits (ties broken by the lower id);
 *   4. min-p: keep the tokens whose probability is at least min_p times the most likely one's;
 *   5. softmax at temperature temp;
 *   6. top-p: keep the most likely tokens until their probability mass reaches top_p (at least one);
 *   7. draw one in proportion to its probability.
 * With a grammar, a step between 0 and 1 keeps only the tokens the grammar allows (an end-of-generation
 * token only where the output may end), and the picked token advances the grammar. */
#ifndef WOOLLY_SAMPLER_H
#define WOOLLY_SAMPLER_H

#include "error.h"
#include "grammar.h"
#include "tokenizer.h"
#include "woolly.h"

/* The public woolly_sampler, usable without a model (n_vocab given). NULL with a message on a bad
 * parameter (named, with its value and range). */
woolly_sampler *woolly_sampler_create(int32_t n_vocab, const woolly_sampler_params *p, woolly_error *err);

/* Checks every parameter; 0 or -1 with a message naming the first bad one. */
int woolly_sampler_params_check(const woolly_sampler_params *p, woolly_error *err);

/* Constrains s with g over tokenizer t's vocabulary (trie built from it). NULL g: no constraint. */
int woolly_sampler_set_grammar_vocab(woolly_sampler *s, const woolly_tokenizer *t, const woolly_vocab_trie *trie,
                                     const woolly_grammar *g, woolly_error *err);

/* The trie of a tokenizer's token texts (the caller frees it), and the model's own, built once. */
woolly_vocab_trie *woolly_tokenizer_trie(const woolly_tokenizer *t, woolly_error *err);
const woolly_vocab_trie *woolly_model_vocab_trie(const woolly_model *m, woolly_error *err);

/* Speculative decoding's view of a sampler (speculative.c). */

/* The distribution woolly_sampler_sample would draw from for these logits, with the window of accepted
 * tokens as it is now: n_vocab probabilities summing to 1 after the penalties, top-k, min-p, temperature
 * and top-p (0 outside the kept set); temp 0 puts 1 on the greedy token. Neither draws nor records
 * anything. -1 with a message under a grammar, whose allowed set moves with every token it samples. */
int woolly_sampler_probs(woolly_sampler *s, const float *logits, float *probs, woolly_error *err);
/* A token drawn with the sampler's generator in proportion to n weights (>= 0, not normalized); -1 when
 * all are 0. */
woolly_token woolly_sampler_draw(woolly_sampler *s, const float *w, int32_t n);
/* Uniform in [0, 1) from the sampler's generator. */
double woolly_sampler_uniform(woolly_sampler *s);
const woolly_sampler_params *woolly_sampler_get_params(const woolly_sampler *s);
/* Why the last logits could not be sampled (a NaN or +infinity), or NULL: woolly_sampler_error without
 * the grammar's failures, which end an output as its language would. */
const char *woolly_sampler_broken(const woolly_sampler *s);
bool woolly_sampler_has_grammar(const woolly_sampler *s);

#endif
