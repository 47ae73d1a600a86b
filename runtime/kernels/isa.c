#include "isa.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    enum woolly_isa nests_in;
} LEVELS[WOOLLY_ISA_COUNT] = {
#define WOOLLY_ISA_LEVEL(name, isa, nests_in) [isa] = {#name, nests_in},
#include "isa.inc"
};

/* The CPU predicates: the woolly_cpu fields each level requires, as offsets of bools. */
#define WOOLLY_ISA_REQUIRES(isa, field)                                                                      \
    _Static_assert(_Generic(((woolly_cpu *)0)->field, bool: 1, default: 0),                                 \
                   "[isa.*] requires names woolly_cpu." #field ", which is not a bool");
#include "isa.inc"

/* A list that starts with an entry of no level, so that a spec without any requirement still makes a
 * valid array. */
static const struct {
    enum woolly_isa isa;
    size_t field;
} REQUIRES[] = {
    {WOOLLY_ISA_COUNT, 0},
#define WOOLLY_ISA_REQUIRES(isa, field) {isa, offsetof(woolly_cpu, field)},
#include "isa.inc"
};

static bool valid(enum woolly_isa isa)
{
    return (unsigned)isa < WOOLLY_ISA_COUNT;
}

const char *woolly_isa_name(enum woolly_isa isa)
{
    return valid(isa) ? LEVELS[isa].name : "?";
}

int woolly_isa_from_name(const char *name)
{
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++)
        if (!strcmp(name, LEVELS[i].name))
            return i;
    return -1;
}

size_t woolly_isa_names(char *buf, size_t n)
{
    size_t len = 0;
    for (int i = 0; i < WOOLLY_ISA_COUNT; i++) {
        const char *sep = i == 0 ? "" : i == WOOLLY_ISA_COUNT - 1 ? " or " : ", ";
        const int w = snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "%s%s", sep, LEVELS[i].name);
        len += w > 0 ? (size_t)w : 0;
    }
    if (n && len >= n)
        len = n - 1;
    return len;
}

enum woolly_isa woolly_isa_nests_in(enum woolly_isa isa)
{
    return valid(isa) ? LEVELS[isa].nests_in : WOOLLY_ISA_REFERENCE;
}

bool woolly_isa_runs_at(enum woolly_isa isa, enum woolly_isa level)
{
    if (!valid(isa) || !valid(level))
        return false;
    for (;; level = LEVELS[level].nests_in) {
        if (level == isa)
            return true;
        if (level == LEVELS[level].nests_in)
            return false;
    }
}

static bool field_of(const woolly_cpu *c, size_t offset)
{
    bool v;
    memcpy(&v, (const char *)c + offset, sizeof v);
    return v;
}

bool woolly_isa_cpu_has(const woolly_cpu *c, enum woolly_isa isa)
{
    if (!valid(isa))
        return false;
    for (size_t i = 0; i < sizeof REQUIRES / sizeof REQUIRES[0]; i++)
        if (REQUIRES[i].isa == isa && !field_of(c, REQUIRES[i].field))
            return false;
    return isa == LEVELS[isa].nests_in || woolly_isa_cpu_has(c, LEVELS[isa].nests_in);
}

void woolly_isa_cpu_grant(woolly_cpu *c, enum woolly_isa isa)
{
    const bool yes = true;
    for (size_t i = 0; i < sizeof REQUIRES / sizeof REQUIRES[0]; i++)
        if (REQUIRES[i].isa == isa)
            memcpy((char *)c + REQUIRES[i].field, &yes, sizeof yes);
}
