/* Woolly's public C API. */
#ifndef WOOLLY_H
#define WOOLLY_H

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" */
const char *woolly_version(void);

#ifdef __cplusplus
}
#endif

#endif
