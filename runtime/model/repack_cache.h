/* The repack cache (repack_cache.c): a model's repacked matrices kept in a file, mapped by later loads
 * in place of the repack. Only a model opened from a file path uses it. Where it lives:
 * WOOLLY_REPACK_CACHE names the folder ("off": no cache), else $XDG_CACHE_HOME/woolly/repack (or
 * ~/.cache/woolly/repack). Nothing here fails a load: a cache that cannot be read or written is
 * reported on stderr and the weights are repacked as without one. */
#ifndef WOOLLY_REPACK_CACHE_H
#define WOOLLY_REPACK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* One load's cache: its folder and file and the key the file must hold, made once. */
typedef struct woolly_repack_cache {
    const woolly_model *m;
    const size_t *offsets; /* each matrix's place in the region (indexed as m->mats) */
    size_t total;          /* the region's bytes */
    char *key;             /* the key text (repack_cache.c) */
    size_t key_len;
    char dir[1024];
    char path_prefix[96]; /* "<label>-<path hash>-": every cache file made from the model's path */
    char ident_hash[16];  /* "<hash of the file's identity>-": the version of the file they are for */
    char path[1400];
} woolly_repack_cache;

/* The MiB of free space a cache write leaves on its disk beyond the file: WOOLLY_REPACK_KEEP_FREE_MIB (a
 * whole number up to 2^40; anything else is reported on stderr and the default kept), else 1024. */
unsigned long long woolly_repack_cache_keep_free_mib(void);

/* Whether the model's load uses a cache (c filled, released with woolly_repack_cache_close) for the
 * matrices at `offsets` of a `total`-byte region; false when it uses none (off, a model from a buffer,
 * no folder, out of memory). The model's matrices must still point into its file. */
bool woolly_repack_cache_open(const woolly_model *m, const size_t *offsets, size_t total,
                              woolly_repack_cache *c);
void woolly_repack_cache_close(woolly_repack_cache *c);

/* The region mapped read-only from the cache file (into `map`, released with woolly_huge_map_close)
 * when the file holds exactly it; else NULL, with a warning line when a file was there but unusable.
 * Called before the repack: the matrices' data still points into the model file. */
const void *woolly_repack_cache_map(const woolly_repack_cache *c, woolly_huge_map *map);

/* Writes the repacked region at `data` to the cache file (whole, synced, renamed into place) and
 * removes the caches made for earlier versions of the model file and, of this version's caches under
 * other layouts, all but the two used last (a hit in woolly_repack_cache_map marks a file used); they go
 * first, even when this write is then not made, so that their space counts toward it. 0, or -1 with a
 * warning line. */
int woolly_repack_cache_store(const woolly_repack_cache *c, const void *data);

#endif
