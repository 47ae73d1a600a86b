/* Large, zeroed, anonymous memory backed by 2 MiB pages where the kernel allows it, and files mapped
 * the same way.
 *
 * The weights and the KV cache are streamed from DRAM on every token. With 4 KiB pages such a stream
 * pays a TLB miss every 4 KiB and the hardware prefetchers stop at each page boundary; the machines'
 * transparent huge pages are commonly set to "madvise", so the memory asks for them explicitly. */
#ifndef WOOLLY_HUGE_MAP_H
#define WOOLLY_HUGE_MAP_H

#include <stddef.h>

typedef struct {
    void *base;   /* the mapping, as returned by mmap */
    size_t bytes; /* its length */
} woolly_huge_map;

/* At least `bytes` zeroed bytes, 2 MiB aligned; NULL when the memory cannot be mapped. */
void *woolly_huge_map_open(woolly_huge_map *m, size_t bytes);
/* Commits the pages of [start, start + bytes), part of a mapping from woolly_huge_map_open, now rather
 * than at their first write, so that the first use does not wait for them and a shortage of memory
 * shows here instead of as the OOM killer later. 0, or -1 when the memory is not there. */
int woolly_huge_map_populate(void *start, size_t bytes);
/* `bytes` of the open file `fd` from `offset` (a multiple of 2 MiB), mapped read-only at a 2 MiB
 * aligned address with the advice for huge pages, so that the page cache's 2 MiB folios (what readahead
 * makes of a file on a filesystem with large folios) are mapped by single page-table entries; with
 * `populate`, every page is mapped now. NULL (errno set) when the file cannot be mapped. */
const void *woolly_huge_map_file(woolly_huge_map *m, int fd, size_t offset, size_t bytes, int populate);
void woolly_huge_map_close(woolly_huge_map *m);

#endif
