/* The repack cache: a model's repacked matrices kept on disk, so that a later load maps them from the
 * page cache instead of repacking.
 *
 * Repacking is cheap next to what it costs to give it fresh memory: the kernel zeroes every page of the
 * anonymous mapping at its first touch, and on a virtual machine the host faults the memory in behind
 * that. granite-8b (4.6 GB) on a 2-core VM: 1.5 to 4.3 s a load with a warm page cache, 14 to 17 s for
 * the first load after other work; mapping the same bytes from a cached file takes 0.04 to 0.2 s. The
 * mapped pages are the page cache's, shared by every process that runs the model and dropped (not
 * swapped) under memory pressure.
 *
 * A cache file is a header, the key text and, from a 2 MiB boundary, the repacked bytes exactly as
 * woolly_model_repack lays them out. The key names everything the bytes depend on: the cache format,
 * the Woolly version, the kernel registry (whose layout names the repack functions go by), the ISA
 * level, the model file (its path, device, inode, size and modification time), and each matrix's
 * layout, shape and place. A file whose key differs is not used. Because a repack function can change
 * under an unchanged name while Woolly is developed, a hit is also checked: three row groups of every
 * matrix (the first, one in the middle, the last) are repacked from the model file and compared with
 * the mapped bytes, which costs a few milliseconds. A file is written whole to a temporary name, synced
 * and renamed, so a reader never sees half of one. */
#include "repack_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "user_cache.h"
#include "woolly.h"

enum {
    FORMAT = 1,
    PAYLOAD_ALIGN = 2 << 20, /* the bytes start on a huge-page boundary of the file */
    KEY_MAX = 1 << 20,
};
static const char MAGIC[8] = {'W', 'O', 'O', 'L', 'R', 'E', 'P', 'K'};
static const size_t HEADER_BYTES = 32; /* magic, format u32, key bytes u32, payload offset u64, bytes u64 */
/* Free space a write leaves at least, beyond the file itself, unless WOOLLY_REPACK_KEEP_FREE_MIB says
 * otherwise: the cache never fills a disk. */
static const unsigned long long KEEP_FREE_MIB = 1024;

static unsigned long long fnv1a(const void *p, size_t n, unsigned long long h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}
static const unsigned long long FNV_START = 1469598103934665603ull;

/* The cache's folder for the model (in dir, n bytes), or false when its load uses no cache. */
static bool folder(const woolly_model *m, char *dir, size_t n)
{
    if (!m->path || m->file->fd < 0)
        return false;
    const char *env = getenv("WOOLLY_REPACK_CACHE");
    if (env && !strcmp(env, "off"))
        return false;
    if (env && *env)
        return (size_t)snprintf(dir, n, "%s", env) < n;
    char base[900];
    return !woolly_user_cache_dir(base, sizeof base) && (size_t)snprintf(dir, n, "%s/repack", base) < n;
}

/* The model file's identity: what changes when the file is replaced or rewritten. */
static int file_identity(const woolly_model *m, char *buf, size_t n)
{
    struct stat st;
    if (fstat(m->file->fd, &st))
        return -1;
    snprintf(buf, n, "%llu %llu %llu %lld.%09ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec);
    return 0;
}

/* The key text (see the top of the file); NULL when out of memory or past KEY_MAX. */
static char *make_key(const woolly_model *m, const char *ident, const size_t *offsets, size_t total,
                      size_t *len)
{
    size_t cap = 1024 + strlen(m->path) + (size_t)m->n_mats * 256, used = 0;
    char *k = malloc(cap);
    if (!k)
        return NULL;
    used += (size_t)snprintf(
        k + used, cap - used,
        "woolly repack cache %d\nwoolly %s\nregistry %016llx\nisa %s\nmodel %s\nfile %s\n", FORMAT,
        woolly_version(), woolly_registry_hash(), woolly_isa_name(woolly_isa_active()), m->path, ident);
    for (int32_t i = 0; i < m->n_mats && used < cap; i++) {
        const woolly_matrix *w = m->mats[i];
        if (w->layout)
            used += (size_t)snprintf(k + used, cap - used, "%d %s %lld %lld %s %zu %zu\n", i, w->name,
                                     (long long)w->rows, (long long)w->cols, w->layout->name, w->row_bytes,
                                     offsets[i]);
    }
    if (used < cap)
        used += (size_t)snprintf(k + used, cap - used, "total %zu\n", total);
    if (used >= cap || used > KEY_MAX) { /* no cache rather than a cut key */
        free(k);
        return NULL;
    }
    *len = used;
    return k;
}

/* Keeps [A-Za-z0-9._-] of a file name, at most 64 of them. */
static void sanitize(const char *label, char *out, size_t n)
{
    size_t j = 0;
    for (const char *p = label; *p && j + 1 < n && j < 64; p++)
        out[j++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                           *p == '.' || *p == '_' || *p == '-'
                       ? *p
                       : '_';
    out[j] = 0;
}

bool woolly_repack_cache_open(const woolly_model *m, const size_t *offsets, size_t total,
                              woolly_repack_cache *c)
{
    memset(c, 0, sizeof *c);
    char ident[160];
    if (!folder(m, c->dir, sizeof c->dir) || file_identity(m, ident, sizeof ident))
        return false;
    c->m = m;
    c->offsets = offsets;
    c->total = total;
    if (!(c->key = make_key(m, ident, offsets, total, &c->key_len)))
        return false;
    /* <dir>/<label>-<path hash>-<identity hash>-<key hash>.wrepack: the caches made from one path share
     * the prefix up to the identity hash, those of one version of the file the prefix past it. */
    char name[80];
    sanitize(m->label, name, sizeof name);
    snprintf(c->path_prefix, sizeof c->path_prefix, "%s-%08llx-", name,
             fnv1a(m->path, strlen(m->path), FNV_START) & 0xffffffffull);
    snprintf(c->ident_hash, sizeof c->ident_hash, "%08llx-",
             fnv1a(ident, strlen(ident), FNV_START) & 0xffffffffull);
    const size_t n = (size_t)snprintf(c->path, sizeof c->path, "%s/%s%s%016llx.wrepack", c->dir,
                                      c->path_prefix, c->ident_hash, fnv1a(c->key, c->key_len, FNV_START));
    if (n >= sizeof c->path) {
        woolly_repack_cache_close(c);
        return false;
    }
    return true;
}

void woolly_repack_cache_close(woolly_repack_cache *c)
{
    free(c->key);
    c->key = NULL;
}

/* One warning line on stderr, written at once. */
__attribute__((format(printf, 2, 3))) static void warn(const char *path, const char *fmt, ...)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "woolly: repack cache %s: ", path);
    if (n < 0 || (size_t)n >= sizeof line - 2)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> 8 * i);
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> 8 * i);
}
static uint64_t get_u64(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static size_t payload_offset(size_t key_len)
{
    return (HEADER_BYTES + key_len + PAYLOAD_ALIGN - 1) / PAYLOAD_ALIGN * PAYLOAD_ALIGN;
}

/* Whether the three sampled row groups of every matrix repack from the model file to the bytes at
 * base + offsets[i]. */
static bool samples_match(const woolly_model *m, const unsigned char *base, const size_t *offsets)
{
    bool ok = true;
    for (int32_t i = 0; i < m->n_mats && ok; i++) {
        const woolly_matrix *w = m->mats[i];
        if (!w->layout)
            continue;
        const int64_t g = w->layout->rows, groups = (w->rows + g - 1) / g;
        const size_t src_row = woolly_row_bytes(w->type, w->cols), dst_bytes = w->row_bytes * (size_t)g;
        unsigned char *src = malloc(src_row * (size_t)g), *dst = malloc(dst_bytes);
        const int64_t picks[3] = {0, groups / 2, groups - 1};
        for (int s = 0; s < 3 && ok && src && dst; s++) {
            const int64_t r0 = picks[s] * g, n = w->rows - r0 < g ? w->rows - r0 : g;
            memset(dst, 0, dst_bytes);
            /* w->data is still the matrix in the file's mapping: the repack has not run */
            if (gguf_read(m->file, (const unsigned char *)w->data + (size_t)r0 * src_row, (size_t)n * src_row,
                          src, NULL)) {
                ok = false;
                break;
            }
            w->layout->repack(&(woolly_repack_args){.src = src,
                                                    .src_row_bytes = src_row,
                                                    .dst = dst,
                                                    .dst_row_bytes = w->row_bytes,
                                                    .k = w->cols,
                                                    .r0 = 0,
                                                    .r1 = n});
            ok = !memcmp(dst, base + offsets[i] + (size_t)r0 * w->row_bytes, dst_bytes);
        }
        if (!src || !dst)
            ok = false;
        free(src);
        free(dst);
    }
    return ok;
}

const void *woolly_repack_cache_map(const woolly_repack_cache *c, woolly_huge_map *map)
{
    map->base = NULL;
    map->bytes = 0;
    const int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL; /* not made yet: no word */
    const size_t klen = c->key_len, total = c->total;
    unsigned char head[HEADER_BYTES];
    char *found = NULL;
    struct stat st;
    const void *data = NULL;
    const char *why = NULL;
    if (fstat(fd, &st) || pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head ||
        memcmp(head, MAGIC, sizeof MAGIC))
        why = "is not a repack cache file";
    else if (get_u64(head + 8, 4) != FORMAT || get_u64(head + 12, 4) != klen ||
             get_u64(head + 16, 8) != payload_offset(klen) || get_u64(head + 24, 8) != total)
        why = "was made for another build, model or layout";
    else if ((uint64_t)st.st_size != payload_offset(klen) + total)
        why = "has the wrong size (cut short?)";
    else if (!(found = malloc(klen)) || pread(fd, found, klen, HEADER_BYTES) != (ssize_t)klen ||
             memcmp(found, c->key, klen))
        why = "was made for another build, model or layout";
    if (!why) {
        const void *p = woolly_huge_map_file(map, fd, payload_offset(klen), total, 1);
        if (!p) {
            why = "cannot be mapped";
        } else {
            if (samples_match(c->m, p, c->offsets)) {
                data = p;
                /* used now: the layouts kept when another is written are those used last. A folder
                 * we may only read keeps its old time; nothing is written there anyway. */
                (void)futimens(fd, NULL);
            } else {
                why = "holds bytes the repack does not make (stale or damaged)";
                woolly_huge_map_close(map);
            }
        }
    }
    if (why)
        warn(c->path, "%s; repacking", why);
    free(found);
    close(fd);
    return data;
}

/* The layouts of one version of a model file whose caches are kept: the one being written and the two
 * used most recently before it (a hit marks its file used). Each build whose kernel registry differs,
 * and each ISA level, lays the weights out under another key, so without a bound every upgrade of
 * Woolly would leave another file as large as the model behind. */
enum { KEEP_LAYOUTS = 3 };

typedef struct cache_entry {
    char name[256];
    struct timespec used; /* the file's modification time: written, or last mapped */
} cache_entry;

static bool used_later(struct timespec a, struct timespec b)
{
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

/* Removes the cache files made from the model's path for another version of the file (rewritten,
 * replaced): they can never be used again. Of those for this version under other layouts, keeps the
 * KEEP_LAYOUTS - 1 used last (the one being written makes KEEP_LAYOUTS) and removes the rest. */
static void remove_stale(const woolly_repack_cache *c)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return;
    const size_t pl = strlen(c->path_prefix), il = strlen(c->ident_hash);
    const char *own = strrchr(c->path, '/') + 1;
    cache_entry kept[KEEP_LAYOUTS - 1]; /* the other layouts kept so far, the latest used first */
    int n_kept = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t nl = strlen(e->d_name);
        if (strncmp(e->d_name, c->path_prefix, pl) || nl < 8 || strcmp(e->d_name + nl - 8, ".wrepack") ||
            !strcmp(e->d_name, own))
            continue;
        char victim[sizeof c->dir + 300];
        if ((size_t)snprintf(victim, sizeof victim, "%s/%s", c->dir, e->d_name) >= sizeof victim)
            continue;
        if (strncmp(e->d_name + pl, c->ident_hash, il)) {
            unlink(victim); /* made for another version of the file */
            continue;
        }
        struct stat st;
        if (nl >= sizeof kept[0].name || stat(victim, &st))
            continue;
        cache_entry x = {.used = st.st_mtim};
        memcpy(x.name, e->d_name, nl + 1);
        /* insert x into kept by recency; what falls off the end is removed */
        for (int i = 0; i < n_kept; i++)
            if (used_later(x.used, kept[i].used)) {
                const cache_entry t = kept[i];
                kept[i] = x;
                x = t;
            }
        if (n_kept < KEEP_LAYOUTS - 1) {
            kept[n_kept++] = x;
        } else if ((size_t)snprintf(victim, sizeof victim, "%s/%s", c->dir, x.name) < sizeof victim) {
            unlink(victim);
        }
    }
    closedir(d);
}

unsigned long long woolly_repack_cache_keep_free_mib(void)
{
    const char *env = getenv("WOOLLY_REPACK_KEEP_FREE_MIB");
    if (!env || !*env)
        return KEEP_FREE_MIB;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(env, &end, 10);
    if (*end || errno || *env == '-' || v > (1ull << 40)) {
        fprintf(stderr,
                "woolly: WOOLLY_REPACK_KEEP_FREE_MIB=%s is not a whole number of MiB up to 2^40; "
                "keeping %llu\n",
                env, KEEP_FREE_MIB);
        return KEEP_FREE_MIB;
    }
    return v;
}

static int write_all(int fd, const void *p, size_t n, off_t at)
{
    for (size_t done = 0; done < n;) {
        const size_t step = n - done < ((size_t)64 << 20) ? n - done : ((size_t)64 << 20);
        const ssize_t w = pwrite(fd, (const char *)p + done, step, at + (off_t)done);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}

int woolly_repack_cache_store(const woolly_repack_cache *c, const void *data)
{
    const char *path = c->path;
    const size_t klen = c->key_len, total = c->total;
    woolly_error err = {{0}};
    if (woolly_make_parent_dirs(path, &err)) {
        warn(path, "not written: %s", err.msg);
        return -1;
    }
    /* First, so that the space the caches it removes held counts toward this one: the files left are
     * the same as after the write. */
    remove_stale(c);
    const size_t at = payload_offset(klen);
    const unsigned long long keep_mib = woolly_repack_cache_keep_free_mib();
    struct statvfs vfs;
    if (!statvfs(c->dir, &vfs) && (unsigned long long)vfs.f_bavail * vfs.f_frsize <
                                      (unsigned long long)(at + total) + (keep_mib << 20)) {
        warn(path, "not written: it needs %.2f GiB and would leave less than %llu MiB free",
             (double)(at + total) / (1 << 30), keep_mib);
        return -1;
    }
    char tmp[sizeof c->path + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        warn(tmp, "not written: %s", strerror(errno));
        return -1;
    }
    unsigned char head[HEADER_BYTES];
    memcpy(head, MAGIC, sizeof MAGIC);
    put_u32(head + 8, FORMAT);
    put_u32(head + 12, (uint32_t)klen);
    put_u64(head + 16, at);
    put_u64(head + 24, total);
    /* The bytes between the key and the payload are a hole: they take no disk. */
    int rc = write_all(fd, head, sizeof head, 0) || write_all(fd, c->key, klen, HEADER_BYTES) ||
                     write_all(fd, data, total, (off_t)at) || fsync(fd)
                 ? -1
                 : 0;
    int e = rc ? errno : 0;
    if (close(fd) && !rc)
        rc = -1, e = errno;
    if (!rc && rename(tmp, path))
        rc = -1, e = errno;
    if (rc) {
        warn(tmp, "not written: %s", strerror(e ? e : EIO));
        unlink(tmp);
    } else {
        const int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { /* the rename itself, on disk */
            fsync(dfd);
            close(dfd);
        }
    }
    return rc;
}
