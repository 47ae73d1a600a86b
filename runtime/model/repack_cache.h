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

/* Whether the model's load uses a cache, and the folder (in dir, n bytes) when it does. */
bool woolly_repack_cache_wanted(const woolly_model *m, char *dir, size_t n);

/* The cache file in `dir` for the model's layouts, the matrices at `offsets` (indexed as m->mats) of a
 * `total`-byte region: 0 and the path, or -1. */
int woolly_repack_cache_file(const woolly_model *m, const char *dir, const size_t *offsets, size_t total,
                             char *path, size_t n);

/* The region mapped read-only from `path` (into `map`, released with woolly_huge_map_close) when the
 * file holds exactly it; else NULL, with a warning line when a file was there but unusable. Called
 * before the repack: the matrices' data still points into the model file. */
const void *woolly_repack_cache_map(const woolly_model *m, const char *path, const size_t *offsets,
                                    size_t total, woolly_huge_map *map);

/* Writes the repacked region to `path` (whole, synced, renamed into place) and removes the caches made
 * for earlier versions of the model file. 0, or -1 with a warning line. */
int woolly_repack_cache_store(const woolly_model *m, const char *dir, const char *path, const size_t *offsets,
                              const void *data, size_t total);

#endif
