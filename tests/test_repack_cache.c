/* The repack cache: the first load of a model file writes its repacked weights, later loads map the same
 * bytes; a cache that is damaged, cut short, made for an older version of the file or not writable is
 * never used and never fails a load. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "model.h"
#include "repack_cache.h"
#include "testutil.h"

static const char *const MODEL = "models/tiny-llama-q4_k_m.gguf";

/* A fresh, empty cache folder for this test, set as WOOLLY_REPACK_CACHE. The writes here are a few MiB:
 * they keep no reserve free, so a nearly full disk on the test machine does not turn them away. */
static const char *fresh_cache(const char *name)
{
    static char dir[8192];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path(name));
    cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s", dir);
    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    setenv("WOOLLY_REPACK_KEEP_FREE_MIB", "0", 1);
    return dir;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d, "%s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static woolly_model *load(const char *path)
{
    woolly_error err = {{0}};
    woolly_model *m = woolly_model_load(path, &err);
    cr_assert(m, "%s: %s", path, err.msg);
    return m;
}

static size_t layout_bytes(const woolly_matrix *w)
{
    const int64_t g = w->layout->rows;
    return w->row_bytes * (size_t)((w->rows + g - 1) / g * g);
}

/* Every repacked matrix of `a` holds the bytes of the same matrix of a model repacked without a cache. */
static void check_same_as_a_repack(const woolly_model *a, const char *path)
{
    setenv("WOOLLY_REPACK_CACHE", "off", 1);
    woolly_model *b = load(path);
    cr_assert_eq(b->weights, WOOLLY_WEIGHTS_REPACKED);
    int repacked = 0;
    for (int32_t i = 0; i < a->n_mats; i++) {
        const woolly_matrix *x = a->mats[i], *y = b->mats[i];
        cr_assert_eq(x->layout, y->layout);
        if (!x->layout)
            continue;
        repacked++;
        cr_assert(memcmp(x->data, y->data, layout_bytes(x)) == 0, "matrix %s differs", x->name);
    }
    cr_assert_gt(repacked, 0, "no matrix is repacked at this ISA level");
    /* a tied embedding reads the output matrix's repacked rows, wherever they came from */
    cr_assert_eq(a->w.token_embd.layout, b->w.token_embd.layout);
    if (a->w.token_embd.layout)
        cr_assert(memcmp(a->w.token_embd.data, b->w.token_embd.data, layout_bytes(&a->w.token_embd)) == 0);
    woolly_model_close(b);
}

/* Flips the byte `from_end` bytes before the end of the file. */
static void flip_byte(const char *path, off_t from_end)
{
    const int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "%s", path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, st.st_size - from_end), 1);
    c ^= 0x5a;
    cr_assert_eq(pwrite(fd, &c, 1, st.st_size - from_end), 1);
    close(fd);
}

Test(repack_cache, the_first_load_saves_and_the_next_maps_the_same_bytes)
{
    const char *dir = fresh_cache("rc-first");
    const char *path = tu_data(MODEL);
    woolly_model *first = load(path);
    cr_assert_eq(first->weights, WOOLLY_WEIGHTS_REPACKED_SAVED, "%s", first->weights_text);
    cr_assert_eq(strncmp(first->repack_cache, dir, strlen(dir)), 0);
    cr_assert_eq(access(first->repack_cache, R_OK), 0, "%s", first->repack_cache);
    cr_assert_eq(count_files(dir), 1, "only the cache file: the temporary is renamed");

    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *second = load(path);
    cr_assert_eq(second->weights, WOOLLY_WEIGHTS_MAPPED, "%s", second->weights_text);
    cr_assert_str_eq(second->repack_cache, first->repack_cache);
    cr_assert(strstr(woolly_model_weights_source(second), "mapped from "));
    check_same_as_a_repack(second, path);
    check_same_as_a_repack(first, path);
    woolly_model_close(first);
    woolly_model_close(second);
}

Test(repack_cache, off_writes_nothing)
{
    const char *dir = fresh_cache("rc-off");
    setenv("WOOLLY_REPACK_CACHE", "off", 1);
    woolly_model *m = load(tu_data(MODEL));
    cr_assert_eq(m->weights, WOOLLY_WEIGHTS_REPACKED);
    cr_assert_str_eq(woolly_model_weights_source(m), "repacked at load");
    cr_assert_eq(count_files(dir), 0);
    woolly_model_close(m);
}

/* A reserve no disk can leave free: nothing is written and the load goes on with the repacked weights. */
Test(repack_cache, a_write_that_would_fill_the_disk_is_not_made)
{
    const char *dir = fresh_cache("rc-full");
    setenv("WOOLLY_REPACK_KEEP_FREE_MIB", "1099511627776", 1); /* 2^40 MiB: an exbibyte */
    woolly_model *m = load(tu_data(MODEL));
    cr_assert_eq(m->weights, WOOLLY_WEIGHTS_REPACKED, "%s", m->weights_text);
    cr_assert_eq(count_files(dir), 0);
    check_same_as_a_repack(m, tu_data(MODEL));
    woolly_model_close(m);
}

/* The reserve is a whole number of MiB; anything else keeps the 1 GiB default. */
Test(repack_cache, the_reserve_is_read_from_the_environment)
{
    const struct {
        const char *env;
        unsigned long long mib;
    } cases[] = {
        {"0", 0},     {"200", 200},  {"1099511627776", 1ull << 40}, {"", 1024},
        {"-5", 1024}, {"12x", 1024}, {"1099511627777", 1024},       {"99999999999999999999999", 1024}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setenv("WOOLLY_REPACK_KEEP_FREE_MIB", cases[i].env, 1);
        cr_assert_eq(woolly_repack_cache_keep_free_mib(), cases[i].mib, "\"%s\"", cases[i].env);
    }
    unsetenv("WOOLLY_REPACK_KEEP_FREE_MIB");
    cr_assert_eq(woolly_repack_cache_keep_free_mib(), 1024);
}

Test(repack_cache, a_model_from_a_buffer_uses_no_cache)
{
    const char *dir = fresh_cache("rc-buffer");
    size_t size;
    char *buf = tu_read_file(tu_data(MODEL), &size);
    woolly_error err = {{0}};
    gguf_file *g = gguf_parse(buf, size, &err);
    cr_assert(g, "%s", err.msg);
    woolly_model *m = woolly_model_from_gguf(g, "buffer", &err);
    cr_assert(m, "%s", err.msg);
    cr_assert_eq(m->weights, WOOLLY_WEIGHTS_REPACKED);
    cr_assert_eq(count_files(dir), 0);
    woolly_model_close(m);
    free(buf);
}

/* A damaged cache (one byte of the first matrix's first row group, which the load checks, or the file
 * cut short by a byte) is repacked past and written again, and the load after that maps it. */
static void check_damage_repaired(const char *name, bool cut)
{
    const char *dir = fresh_cache(name);
    const char *path = tu_data(MODEL);
    woolly_model *first = load(path);
    cr_assert_eq(first->weights, WOOLLY_WEIGHTS_REPACKED_SAVED);
    char file[sizeof first->repack_cache];
    snprintf(file, sizeof file, "%s", first->repack_cache);
    /* The first repacked matrix starts the payload, which is the file's last `total` bytes. */
    size_t total = 0;
    for (int32_t i = 0; i < first->n_mats; i++)
        total += first->mats[i]->layout ? (layout_bytes(first->mats[i]) + 63) / 64 * 64 : 0;
    woolly_model_close(first);
    if (cut) {
        struct stat st;
        cr_assert_eq(stat(file, &st), 0);
        cr_assert_eq(truncate(file, st.st_size - 1), 0);
    } else {
        flip_byte(file, (off_t)total - 100);
    }

    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *second = load(path);
    cr_assert_eq(second->weights, WOOLLY_WEIGHTS_REPACKED_SAVED, "a damaged cache is not mapped");
    cr_assert_str_eq(second->repack_cache, file);
    check_same_as_a_repack(second, path);
    woolly_model_close(second);

    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *third = load(path);
    cr_assert_eq(third->weights, WOOLLY_WEIGHTS_MAPPED, "the rewritten cache is mapped");
    check_same_as_a_repack(third, path);
    woolly_model_close(third);
}

Test(repack_cache, a_damaged_cache_is_repacked_and_rewritten)
{
    check_damage_repaired("rc-flip", false);
}

Test(repack_cache, a_cache_cut_short_is_repacked_and_rewritten)
{
    check_damage_repaired("rc-cut", true);
}

Test(repack_cache, a_rewritten_model_file_replaces_its_old_cache)
{
    const char *dir = fresh_cache("rc-rewritten");
    char copy[8192];
    snprintf(copy, sizeof copy, "%s", tu_tmp_path("rc-model.gguf"));
    size_t size;
    char *bytes = tu_read_file(tu_data(MODEL), &size);
    FILE *f = fopen(copy, "wb");
    cr_assert(f && fwrite(bytes, 1, size, f) == size && fclose(f) == 0);
    free(bytes);

    woolly_model *a = load(copy);
    cr_assert_eq(a->weights, WOOLLY_WEIGHTS_REPACKED_SAVED);
    char old[sizeof a->repack_cache];
    snprintf(old, sizeof old, "%s", a->repack_cache);
    woolly_model_close(a);

    /* The same bytes with another modification time: a new version of the file as far as a cache can
     * tell, so the old cache can never be used again. */
    const struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    cr_assert_eq(utimensat(AT_FDCWD, copy, times, 0), 0);
    woolly_model *b = load(copy);
    cr_assert_eq(b->weights, WOOLLY_WEIGHTS_REPACKED_SAVED);
    cr_assert_str_neq(b->repack_cache, old);
    cr_assert_neq(access(old, F_OK), 0, "the old version's cache is removed");
    cr_assert_eq(count_files(dir), 1);
    woolly_model_close(b);
    remove(copy);
}

/* `cache` with its last 16 hex digits (the key's hash) set to `n`: the name a cache of the same version
 * of the model file under another layout (another build, another ISA level) has. */
static void other_layout(const char *cache, int n, char *out, size_t size)
{
    const size_t len = strlen(cache), tail = 16 + strlen(".wrepack");
    cr_assert_gt(len, tail);
    cr_assert_lt(len, size);
    snprintf(out, size, "%.*s%016x.wrepack", (int)(len - tail), cache, n);
}

static void make_file_used_at(const char *path, time_t when)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f && fputs("a cache of another layout", f) >= 0 && fclose(f) == 0, "%s", path);
    const struct timespec times[2] = {{.tv_sec = when}, {.tv_sec = when}};
    cr_assert_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

static time_t used_at(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return st.st_mtim.tv_sec;
}

Test(repack_cache, a_model_file_keeps_the_three_layouts_used_last)
{
    const char *dir = fresh_cache("rc-layouts");
    const char *path = tu_data(MODEL);
    woolly_model *a = load(path);
    cr_assert_eq(a->weights, WOOLLY_WEIGHTS_REPACKED_SAVED, "%s", a->weights_text);
    char own[sizeof a->repack_cache], older[4][sizeof a->repack_cache];
    snprintf(own, sizeof own, "%s", a->repack_cache);
    woolly_model_close(a);

    /* Four other layouts of this file, used at 1e9 + 0, 10, 20 and 30 s (the third the latest). */
    const int order[4] = {0, 1, 3, 2};
    for (int i = 0; i < 4; i++) {
        other_layout(own, i + 1, older[i], sizeof older[i]);
        make_file_used_at(older[i], 1000000000 + 10 * order[i]);
    }
    /* A hit marks the file used: it was made before the others by this clock. */
    const struct timespec long_ago[2] = {{.tv_sec = 999999999}, {.tv_sec = 999999999}};
    cr_assert_eq(utimensat(AT_FDCWD, own, long_ago, 0), 0);
    woolly_model *b = load(path);
    cr_assert_eq(b->weights, WOOLLY_WEIGHTS_MAPPED, "%s", b->weights_text);
    cr_assert_gt(used_at(own), 1000000030, "mapping the cache marks it used");
    woolly_model_close(b);
    cr_assert_eq(count_files(dir), 5, "a hit removes nothing");

    /* Writing a cache (this one again, as if it were new) keeps it and the two other layouts used last. */
    cr_assert_eq(unlink(own), 0);
    woolly_model *c = load(path);
    cr_assert_eq(c->weights, WOOLLY_WEIGHTS_REPACKED_SAVED, "%s", c->weights_text);
    woolly_model_close(c);
    cr_assert_eq(count_files(dir), 3);
    cr_assert_eq(access(own, F_OK), 0);
    cr_assert_eq(access(older[2], F_OK), 0, "used at +30 s: kept");
    cr_assert_eq(access(older[3], F_OK), 0, "used at +20 s: kept");
    cr_assert_neq(access(older[0], F_OK), 0, "used at +0 s: removed");
    cr_assert_neq(access(older[1], F_OK), 0, "used at +10 s: removed");
}

/* The old layouts go before the free space is judged: a disk they filled takes the new cache. Here the
 * reserve still turns the write away, and the two other layouts used last are what is left. */
Test(repack_cache, old_layouts_go_even_when_the_write_is_not_made)
{
    const char *dir = fresh_cache("rc-layouts-full");
    const char *path = tu_data(MODEL);
    woolly_model *a = load(path);
    cr_assert_eq(a->weights, WOOLLY_WEIGHTS_REPACKED_SAVED, "%s", a->weights_text);
    char own[sizeof a->repack_cache], older[3][sizeof a->repack_cache];
    snprintf(own, sizeof own, "%s", a->repack_cache);
    woolly_model_close(a);
    cr_assert_eq(unlink(own), 0);
    for (int i = 0; i < 3; i++) {
        other_layout(own, i + 1, older[i], sizeof older[i]);
        make_file_used_at(older[i], 1000000000 + 10 * i);
    }
    setenv("WOOLLY_REPACK_KEEP_FREE_MIB", "1099511627776", 1); /* 2^40 MiB: no disk leaves it free */
    woolly_model *b = load(path);
    cr_assert_eq(b->weights, WOOLLY_WEIGHTS_REPACKED, "%s", b->weights_text);
    woolly_model_close(b);
    cr_assert_eq(count_files(dir), 2);
    cr_assert_neq(access(older[0], F_OK), 0, "used first: removed");
    cr_assert_eq(access(older[1], F_OK), 0);
    cr_assert_eq(access(older[2], F_OK), 0);
}

Test(repack_cache, a_folder_that_cannot_be_made_still_loads)
{
    /* A regular file where the folder should be: mkdir fails under it. */
    char dir[8192];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("rc-not-a-folder"));
    FILE *f = fopen(dir, "w");
    cr_assert(f && fclose(f) == 0);
    char below[8300];
    snprintf(below, sizeof below, "%s/repack", dir);
    setenv("WOOLLY_REPACK_CACHE", below, 1);
    woolly_model *m = load(tu_data(MODEL));
    cr_assert_eq(m->weights, WOOLLY_WEIGHTS_REPACKED, "%s", m->weights_text);
    woolly_model_close(m);
    remove(dir);
}

Test(repack_cache, another_models_cache_under_this_ones_name_is_not_used)
{
    const char *dir = fresh_cache("rc-other");
    woolly_model *a = load(tu_data(MODEL));
    char mine[sizeof a->repack_cache];
    snprintf(mine, sizeof mine, "%s", a->repack_cache);
    woolly_model_close(a);
    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *b = load(tu_data("models/tiny-llama-q6_k.gguf"));
    cr_assert_eq(b->weights, WOOLLY_WEIGHTS_REPACKED_SAVED);
    cr_assert_eq(rename(b->repack_cache, mine), 0);
    woolly_model_close(b);

    /* The key in the header names the other model: repacked, and this model's cache written again. */
    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *c = load(tu_data(MODEL));
    cr_assert_eq(c->weights, WOOLLY_WEIGHTS_REPACKED_SAVED);
    check_same_as_a_repack(c, tu_data(MODEL));
    woolly_model_close(c);
    setenv("WOOLLY_REPACK_CACHE", dir, 1);
    woolly_model *d = load(tu_data(MODEL));
    cr_assert_eq(d->weights, WOOLLY_WEIGHTS_MAPPED);
    woolly_model_close(d);
}
