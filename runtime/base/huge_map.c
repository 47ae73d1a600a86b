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

const void *woolly_huge_map_file(woolly_huge_map *m, int fd, size_t offset, size_t bytes, int populate)
{
    m->base = NULL;
    m->bytes = 0;
    if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE || offset % HUGE_PAGE) {
        errno = EINVAL;
        return NULL;
    }
    /* An address range a huge page longer than the file's part, inaccessible, then the file over its
     * aligned start: the mapping is closed as one piece. A file's 2 MiB folio is mapped whole only where
     * its address and its offset agree modulo 2 MiB; mmap places a file's mapping on 4 KiB only. */
    const size_t len = bytes + HUGE_PAGE;
    void *span = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (span == MAP_FAILED)
        return NULL;
    char *start = (char *)(((uintptr_t)span + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (mmap(start, bytes, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, (off_t)offset) == MAP_FAILED) {
        const int e = errno;
        munmap(span, len);
        errno = e;
        return NULL;
    }
    m->base = span;
    m->bytes = len;
    /* Advice first, so that the faults below map whole folios (and readahead reads in them). */
    madvise(start, bytes, MADV_HUGEPAGE);
    if (populate && madvise(start, bytes, MADV_POPULATE_READ) != 0 && errno == EINVAL) {
        /* A kernel before 5.14: a read of each small page maps it. (Other errors, as MAP_POPULATE's,
         * are left to the first use.) */
        const volatile char *p = start;
        for (size_t i = 0; i < bytes; i += 4096)
            (void)p[i];
    }
    return start;
}

void woolly_huge_map_close(woolly_huge_map *m)
{
    if (m->base)
        munmap(m->base, m->bytes);
    m->base = NULL;
    m->bytes = 0;
}
