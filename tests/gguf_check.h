/* GGUF helpers shared by the tests that read files back: open-or-fail, typed getters that fail the test
 * when a key is missing, and exact value equality (strings by bytes, numbers by their bits, arrays
 * element by element, nested arrays recursively). */
#ifndef WOOLLY_GGUF_CHECK_H
#define WOOLLY_GGUF_CHECK_H

#include <stdbool.h>

#include "gguf.h"

/* gguf_open, failing the test (with the reader's message) if it cannot. */
gguf_file *tu_gguf_open(const char *path);
/* The same for a file under the shared test data folder ("models/stories260K.gguf"). */
gguf_file *tu_gguf_open_data(const char *rel);

/* The value of `key`, failing the test if it is absent or of another type. */
uint32_t tu_gguf_u32(const gguf_file *g, const char *key);
float tu_gguf_f32(const gguf_file *g, const char *key);

bool tu_gguf_str_equal(gguf_str a, gguf_str b);
bool tu_gguf_value_equal(const gguf_value *a, const gguf_value *b);

#endif
