/* The ISA levels: the spec's [isa.*] entries (codegen/kernels.toml), generated once into
 * generated/isa.inc and read only here. A level has a name (the ISA token of its kernels' names, the
 * value WOOLLY_ISA takes, the one profiles record), a CPU predicate (woolly_cpu fields the CPU must
 * have), the level it nests in (whose kernels also run where it does: avx512 -> avx2 -> scalar, neon ->
 * scalar) and optionally a per-thread setup (kernels.h). Which level is active is the registry's choice
 * (registry.h: woolly_isa_init). */
#ifndef WOOLLY_ISA_H
#define WOOLLY_ISA_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu.h"
#include "kernels.h"

/* In the spec's order, each level after the one it nests in: a level's value is greater than that of
 * every level it nests in (the registry takes the greatest runnable level as the best). */
enum woolly_isa {
#define WOOLLY_ISA_LEVEL(name, isa, nests_in) isa,
#include "isa.inc"
    WOOLLY_ISA_COUNT
};

/* The reference level, which nests in none: scalar. */
#define WOOLLY_ISA_REFERENCE ((enum woolly_isa)0)

const char *woolly_isa_name(enum woolly_isa isa); /* "?" for no level */
/* The level named `name`, or -1. */
int woolly_isa_from_name(const char *name);
/* Every level's name for a message, e.g. "scalar, avx2, avx512 or neon". Returns the length (truncated
 * to n - 1 bytes if longer). */
size_t woolly_isa_names(char *buf, size_t n);

/* The level `isa` nests in (itself for the reference level). */
enum woolly_isa woolly_isa_nests_in(enum woolly_isa isa);
/* Whether kernels of level `isa` run where `level` is active: isa is level or a level it nests in. */
bool woolly_isa_runs_at(enum woolly_isa isa, enum woolly_isa level);

/* Whether a CPU with these fields supports the level: it has every field the level requires, and
 * supports the level it nests in. */
bool woolly_isa_cpu_has(const woolly_cpu *c, enum woolly_isa isa);
/* Sets the fields the level requires (an emulated level: cpu.c). */
void woolly_isa_cpu_grant(woolly_cpu *c, enum woolly_isa isa);

/* Runs the per-thread setup of the active level and of every level it nests in (the reference
 * level's first) on the calling thread, once per thread: later calls on the same thread return at
 * once. The thread pool calls it on each of its threads; code that runs kernels on a thread of its own
 * calls it before the first. */
void woolly_isa_thread_init(void);

/* Replaces a level's per-thread setup (NULL: none) and returns the one it had. For tests: no level of
 * the spec has one yet. Threads that have already run their setup do not run the new one. */
woolly_thread_init_fn woolly_isa_set_thread_init(enum woolly_isa isa, woolly_thread_init_fn fn);

#endif
