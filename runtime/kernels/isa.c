#include "isa.h"

#include <stdio.h>
#include <string.h>

#include "registry.h"

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

/* Lists that start with an entry of no level, so that a spec without any entry of theirs still
 * makes a valid array. */
static const struct {
    enum woolly_isa isa;
    size_t field;
} REQUIRES[] = {
    {WOOLLY_ISA_COUNT, 0},
#define WOOLLY_ISA_REQUIRES(isa, field) {isa, offsetof(woolly_cpu, field)},
#include "isa.inc"
};

#define WOOLLY_ISA_THREAD_INIT(isa, function) void function(void);
#include "isa.inc"

static const struct {
    enum woolly_isa isa;
    woolly_thread_init_fn fn;
} THREAD_INIT[] = {
    {WOOLLY_ISA_COUNT, NULL},
#define WOOLLY_ISA_THREAD_INIT(isa, function) {isa, function},
#include "isa.inc"
};

/* A test's replacements (woolly_isa_set_thread_init), written before the threads that read them start. */
static struct {
    bool set;
    woolly_thread_init_fn fn;
} g_replaced[WOOLLY_ISA_COUNT];

static woolly_thread_init_fn thread_init_of(enum woolly_isa isa)
{
    if (g_replaced[isa].set)
        return g_replaced[isa].fn;
    for (size_t i = 0; i < sizeof THREAD_INIT / sizeof THREAD_INIT[0]; i++)
        if (THREAD_INIT[i].isa == isa)
            return THREAD_INIT[i].fn;
    return NULL;
}

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

static _Thread_local bool t_thread_ready;

void woolly_isa_thread_init(void)
{
    if (t_thread_ready)
        return;
    t_thread_ready = true;
    enum woolly_isa chain[WOOLLY_ISA_COUNT];
    int n = 0;
    for (enum woolly_isa l = woolly_isa_active(); n < WOOLLY_ISA_COUNT; l = LEVELS[l].nests_in) {
        chain[n++] = l;
        if (l == LEVELS[l].nests_in)
            break;
    }
    while (n-- > 0) {
        const woolly_thread_init_fn fn = thread_init_of(chain[n]);
        if (fn)
            fn();
    }
}

woolly_thread_init_fn woolly_isa_set_thread_init(enum woolly_isa isa, woolly_thread_init_fn fn)
{
    if (!valid(isa))
        return NULL;
    const woolly_thread_init_fn old = thread_init_of(isa);
    g_replaced[isa].set = true;
    g_replaced[isa].fn = fn;
    return old;
}
