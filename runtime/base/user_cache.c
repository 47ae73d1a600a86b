#include "user_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int woolly_user_cache_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    if (xdg && xdg[0] == '/')
        len = snprintf(buf, n, "%s/woolly", xdg);
    else if (home && *home)
        len = snprintf(buf, n, "%s/.cache/woolly", home);
    else
        return -1;
    return len > 0 && (size_t)len < n ? 0 : -1;
}

int woolly_make_parent_dirs(const char *path, woolly_error *err)
{
    char dir[1024];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
        return woolly_fail(err, "path too long: %.200s...", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *p = dir + 1;; p++) {
        const char c = *p;
        if (c == '/' || c == 0) {
            *p = 0;
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                return woolly_fail(err, "cannot create the folder %s: %s", dir, strerror(errno));
            *p = c;
        }
        if (!c)
            return 0;
    }
}
