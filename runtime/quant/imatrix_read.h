/* Reading an importance matrix for the quantizer: llama.cpp's imatrix GGUF (what `woolly imatrix` and
 * llama.cpp's llama-imatrix write), per matrix "<tensor>.in_sum2", F32 [cols, n_mat] (each column's sum of
 * squared inputs, matrix by matrix: one row per expert of a mixture) and "<tensor>.counts", F32
 * [1, n_mat] (the rows summed). A column's importance is in_sum2 / count, its mean square input, as
 * llama-quantize reads it (1 everywhere for an expert that saw no rows). */
#ifndef WOOLLY_IMATRIX_READ_H
#define WOOLLY_IMATRIX_READ_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct woolly_imatrix_file woolly_imatrix_file;

/* Reads `path`; NULL with a message naming it if it is missing, not a GGUF, not an importance matrix
 * (general.type other than "imatrix", or no "<tensor>.in_sum2"), or malformed (a sum without counts, not
 * F32, negative or not finite). */
woolly_imatrix_file *woolly_imatrix_file_read(const char *path, woolly_error *err);
void woolly_imatrix_file_free(woolly_imatrix_file *im);

/* Matrices in the file. */
size_t woolly_imatrix_file_count(const woolly_imatrix_file *im);

/* The importance of tensor `name` (ne0 columns, n_mat matrices): *out points at n_mat * ne0 floats, matrix
 * by matrix, or is NULL when the file has no entry for the tensor. Returns 0, or -1 with a message naming
 * the tensor when the entry's shape does not match. */
int woolly_imatrix_file_find(const woolly_imatrix_file *im, const char *name, uint64_t ne0, uint64_t n_mat,
                             const float **out, woolly_error *err);

#endif
