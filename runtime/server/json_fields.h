/* Reading the fields of a JSON request body (jansson) with their types and ranges checked. Each
 * getter returns 1 when the field is present and was stored, 0 when it is absent or null (the output
 * is left alone: the caller's default stands), -1 with a 400 error naming the field when it has the
 * wrong type or is out of range. */
#ifndef WOOLLY_SRV_JSON_FIELDS_H
#define WOOLLY_SRV_JSON_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "woolly.h"

/* The body as a JSON object; NULL with a 400 saying that the body is empty, where the text stops being
 * JSON (invalid UTF-8 included) or that it is not an object. The parse may allocate at most
 * SRV_JSON_COST_FACTOR times len, plus room bytes, plus SRV_JSON_COST_SLACK: a body of many small values
 * (each a few bytes of text but tens of bytes of tree) past that is refused with a 413 instead of being
 * built. room is for what a valid request may hold in many small values (a prompt of token ids: about
 * 64 bytes per token of the context). */
#define SRV_JSON_COST_FACTOR 4
#define SRV_JSON_COST_SLACK (64 << 10)
json_t *srv_json_parse_object(const char *body, size_t len, size_t room, srv_error *err);

/* The JSON type of v, in words ("a string", "an array", ...), for messages. */
const char *srv_json_type_name(const json_t *v);

int srv_json_number(const json_t *obj, const char *key, double lo, double hi, double *out, srv_error *err);
/* An integer (a number with a fractional part is an error) in [lo, hi]. */
int srv_json_integer(const json_t *obj, const char *key, long long lo, long long hi, long long *out,
                     srv_error *err);
int srv_json_bool(const json_t *obj, const char *key, bool *out, srv_error *err);
/* A string (not copied: valid while obj lives). */
int srv_json_string(const json_t *obj, const char *key, const char **out, size_t *len, srv_error *err);

/* An array of token ids, each in [0, n_vocab); param names it in errors. *ids is heap-allocated (NULL
 * for an empty array). 0 or -1. */
int srv_json_token_ids(const json_t *arr, const char *param, int32_t n_vocab, woolly_token **ids, int32_t *n,
                       srv_error *err);

#endif
