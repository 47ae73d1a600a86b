/* Speculative decoding's internals beyond woolly.h: the seams its tests use. */
#ifndef WOOLLY_MODEL_SPECULATIVE_H
#define WOOLLY_MODEL_SPECULATIVE_H

#include "spec_cost.h"
#include "woolly.h"

/* The clock the cost model's times come from (seconds; NULL: the monotonic clock). A clock that stands
 * still measures nothing: the costs stay what woolly_spec_cost's model was given. */
void woolly_spec_set_clock(woolly_spec *s, double (*now)(void *arg), void *arg);

/* The cost model the adaptive draft length is chosen with (spec_cost.h). */
spec_cost *woolly_spec_cost(woolly_spec *s);

#endif
