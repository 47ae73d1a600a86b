/* Where woolly keeps what it makes for this machine and user: tuning profiles and repacked weights. */
#ifndef WOOLLY_USER_CACHE_H
#define WOOLLY_USER_CACHE_H

#include <stddef.h>

#include "error.h"

/* "$XDG_CACHE_HOME/woolly", or "$HOME/.cache/woolly" (the XDG spec ignores a relative XDG_CACHE_HOME):
 * 0 and the path in buf, or -1 when neither variable gives one or it does not fit in n bytes. */
int woolly_user_cache_dir(char *buf, size_t n);

/* mkdir -p of the folder holding `path` (its last component is a file name). */
int woolly_make_parent_dirs(const char *path, woolly_error *err);

#endif
