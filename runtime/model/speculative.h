/* Speculative decoding's internals beyond woolly.h: the parts the server's per-slot speculation shares,
 * and the seams its tests use. */
#ifndef WOOLLY_MODEL_SPECULATIVE_H
#define WOOLLY_MODEL_SPECULATIVE_H

#include "error.h"
#include "spec_cost.h"
#include "woolly.h"

/* Whether model d can draft for model t: the same vocabulary token by token (the longer one may have up
 * to 128 more trailing tokens), the same BOS and EOS. 0, or -1 with a message naming the difference. */
int woolly_spec_check_vocab(const woolly_model *t, const woolly_model *d, woolly_error *err);

/* Prompt lookup: the tokens that followed the latest earlier occurrence of the last n tokens of
 * hist[0 .. h), at most k of them, written to out; their count (0: no earlier occurrence). */
int32_t woolly_spec_lookup(const woolly_token *hist, int32_t h, int32_t n, woolly_token *out, int32_t k);

/* The clock the cost model's times come from (seconds; NULL: the monotonic clock). A clock that stands
 * still measures nothing: the costs stay what woolly_spec_cost's model was given. */
void woolly_spec_set_clock(woolly_spec *s, double (*now)(void *arg), void *arg);

/* The cost model the adaptive draft length is chosen with (spec_cost.h). */
spec_cost *woolly_spec_cost(woolly_spec *s);

#endif
