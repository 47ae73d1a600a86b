/* Token sampling: repetition penalty, top-k, min-p, temperature, top-p, then a draw from a seeded
 * generator. Everything it needs is allocated when it is created; sampling a token allocates nothing.
 *
 * The order, fixed and documented because the filters do not commute:
 *   1. penalties over the last repeat_last_n accepted tokens: the repetition penalty (each distinct id
 *      once: a positive logit is divided by it, a negative one multiplied), then OpenAI's presence and
 *      frequency penalties (logit -= presence_penalty + frequency_penalty * occurrences);
 *   2. temp == 0: the largest logit wins (the lowest id on ties), nothing else applies;
 *   3. top-k: keep the k largest logits (ties broken by the lower id);
 *   4. min-p: keep the tokens whose probability is at least min_p times the most likely one's;
 *   5. softmax at temperature temp;
 *   6. top-p: keep the most likely tokens until their probability mass reaches top_p (at least one);
 *   7. draw one in proportion to its probability. */
#ifndef WOOLLY_SAMPLER_H
#define WOOLLY_SAMPLER_H

#include "error.h"
#include "woolly.h"

/* The public woolly_sampler, usable without a model (n_vocab given). NULL with a message on a bad
 * parameter (named, with its value and range). */
woolly_sampler *woolly_sampler_create(int32_t n_vocab, const woolly_sampler_params *p, woolly_error *err);

/* Checks every parameter; 0 or -1 with a message naming the first bad one. */
int woolly_sampler_params_check(const woolly_sampler_params *p, woolly_error *err);

#endif
