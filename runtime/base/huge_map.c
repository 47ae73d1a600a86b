#include "huge_map.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 * 1024 * 1024 };

void *woolly_huge_map_open(woolly_huge_map *m, size_t bytes)
{
    m->base = NULL;
    m->bytes = 0;
    if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE)
        return NULL;
    /* One huge page more than asked, so that the start can be rounded up to a huge-page boundary. */
    const size_t len = bytes + HUGE_PAGE;
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    m->base = map;
    m->bytes = len;
    char *start = (char *)(((uintptr_t)map + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    madvise(start, bytes, MADV_HUGEPAGE); /* advice: without it (or without THP) the pages are small */
    return start;
}

int woolly_huge_map_populate(void *start, size_t bytes)
{
    if (madvise(start, bytes, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1; /* ENOMEM and the like: the memory is not there */
    /* A kernel before 5.14: a write to each small page faults it in (a huge page on its first). */
    volatile char *p = start;
    for (size_t i = 0; i < bytes; i += 4096)
        p[i] = 0;
    return 0;
}

void woolly_huge_map_close(woolly_huge_map *m)
{
    if (m->base)
        munmap(m->base, m->bytes);
    m->base = NULL;
    m->bytes = 0;
}
