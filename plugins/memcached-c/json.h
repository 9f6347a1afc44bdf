/* A small JSON reader and writer for the memcached plugin in C. Values
 * live in one arena that is never freed: each call of a plugin runs in a
 * fresh instance, so its memory goes away with it. */
#ifndef GANTRY_JSON_H
#define GANTRY_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { J_NULL, J_BOOL, J_INT, J_FLOAT, J_STRING, J_ARRAY, J_OBJECT } jtype;

typedef struct jvalue jvalue;
struct jvalue {
    jtype type;
    bool boolean;
    int64_t integer;    /* J_INT (fits in i64) */
    double number;      /* J_FLOAT, or J_INT beyond i64 */
    const char *raw;    /* J_INT/J_FLOAT: the number as written */
    size_t raw_len;
    char *string;       /* J_STRING (NUL-terminated, may hold NULs: see len) */
    size_t len;         /* J_STRING length; J_ARRAY/J_OBJECT item count */
    char **keys;        /* J_OBJECT */
    jvalue **items;     /* J_ARRAY/J_OBJECT */
};

/* Parse `len` bytes; NULL when not valid JSON (error in *error). */
jvalue *json_parse(const char *text, size_t len, const char **error);
/* The member `key` of an object; NULL when absent or not an object. */
jvalue *json_get(const jvalue *object, const char *key);
/* Whether `v` is the string `s`. */
bool json_is_string(const jvalue *v, const char *s);

/* A growing text buffer. */
typedef struct {
    char *data;
    size_t len, cap;
} buf;

void buf_str(buf *b, const char *s);
void buf_mem(buf *b, const char *s, size_t n);
void buf_fmt(buf *b, const char *format, ...);
/* Append `s` as a JSON string literal. */
void buf_json_string(buf *b, const char *s, size_t n);
/* Append `v` serialized as JSON. */
void buf_json(buf *b, const jvalue *v);

#endif
