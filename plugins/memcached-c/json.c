#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end;
    const char *error;
} reader;

static jvalue *value(reader *r, int depth);

static jvalue *new_value(jtype type) {
    jvalue *v = calloc(1, sizeof *v);
    v->type = type;
    return v;
}

static void skip_ws(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static jvalue *fail(reader *r, const char *message) {
    if (!r->error) r->error = message;
    return NULL;
}

static bool literal(reader *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return false;
    r->p += n;
    return true;
}

static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_utf8(buf *b, uint32_t cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) { out[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) { out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
    else { out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
    buf_mem(b, out, n);
}

static bool read_u4(reader *r, uint32_t *out) {
    if (r->end - r->p < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex(r->p[i]);
        if (h < 0) return false;
        v = v * 16 + (uint32_t)h;
    }
    r->p += 4;
    *out = v;
    return true;
}

static bool string_into(reader *r, buf *out) {
    r->p++; /* opening quote */
    while (r->p < r->end) {
        char c = *r->p++;
        if (c == '"') { buf_mem(out, "", 0); return true; }
        if ((unsigned char)c < 0x20) return false;
        if (c != '\\') { buf_mem(out, &c, 1); continue; }
        if (r->p >= r->end) return false;
        char e = *r->p++;
        switch (e) {
        case '"': buf_mem(out, "\"", 1); break;
        case '\\': buf_mem(out, "\\", 1); break;
        case '/': buf_mem(out, "/", 1); break;
        case 'b': buf_mem(out, "\b", 1); break;
        case 'f': buf_mem(out, "\f", 1); break;
        case 'n': buf_mem(out, "\n", 1); break;
        case 'r': buf_mem(out, "\r", 1); break;
        case 't': buf_mem(out, "\t", 1); break;
        case 'u': {
            uint32_t cp;
            if (!read_u4(r, &cp)) return false;
            if (cp >= 0xD800 && cp < 0xDC00) {
                uint32_t lo;
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u') return false;
                r->p += 2;
                if (!read_u4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return false;
            }
            put_utf8(out, cp);
            break;
        }
        default: return false;
        }
    }
    return false;
}

static jvalue *string_value(reader *r) {
    buf b = {0};
    if (!string_into(r, &b)) return fail(r, "invalid string");
    jvalue *v = new_value(J_STRING);
    v->len = b.len;
    v->string = b.data ? b.data : calloc(1, 1);
    return v;
}

static jvalue *number(reader *r) {
    const char *start = r->p;
    bool is_float = false;
    if (r->p < r->end && *r->p == '-') r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return fail(r, "invalid number");
    if (*r->p == '0') r->p++;
    else while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    if (r->p < r->end && *r->p == '.') {
        is_float = true;
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return fail(r, "invalid number");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        is_float = true;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return fail(r, "invalid number");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    size_t n = (size_t)(r->p - start);
    char *copy = malloc(n + 1);
    memcpy(copy, start, n);
    copy[n] = 0;
    jvalue *v = new_value(is_float ? J_FLOAT : J_INT);
    v->raw = copy;
    v->raw_len = n;
    v->number = strtod(copy, NULL);
    if (!is_float) {
        errno = 0;
        long long i = strtoll(copy, NULL, 10);
        if (errno == ERANGE) v->type = J_FLOAT; /* beyond i64: a plain number */
        v->integer = i;
    }
    return v;
}

static void push_item(jvalue *container, size_t *cap, char *key, jvalue *item) {
    if (container->len == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        container->items = realloc(container->items, *cap * sizeof *container->items);
        if (container->type == J_OBJECT) container->keys = realloc(container->keys, *cap * sizeof *container->keys);
    }
    if (container->type == J_OBJECT) container->keys[container->len] = key;
    container->items[container->len++] = item;
}

static jvalue *value(reader *r, int depth) {
    if (depth > 128) return fail(r, "nested too deeply");
    skip_ws(r);
    if (r->p >= r->end) return fail(r, "unexpected end of input");
    char c = *r->p;
    if (c == 'n') return literal(r, "null") ? new_value(J_NULL) : fail(r, "invalid literal");
    if (c == 't' || c == 'f') {
        jvalue *v = new_value(J_BOOL);
        v->boolean = c == 't';
        return literal(r, c == 't' ? "true" : "false") ? v : fail(r, "invalid literal");
    }
    if (c == '"') return string_value(r);
    if (c == '-' || (c >= '0' && c <= '9')) return number(r);
    if (c == '[' || c == '{') {
        bool object = c == '{';
        jvalue *v = new_value(object ? J_OBJECT : J_ARRAY);
        size_t cap = 0;
        r->p++;
        skip_ws(r);
        if (r->p < r->end && *r->p == (object ? '}' : ']')) { r->p++; return v; }
        for (;;) {
            char *key = NULL;
            if (object) {
                skip_ws(r);
                if (r->p >= r->end || *r->p != '"') return fail(r, "expected a key");
                buf k = {0};
                if (!string_into(r, &k)) return fail(r, "invalid key");
                key = k.data ? k.data : calloc(1, 1);
                skip_ws(r);
                if (r->p >= r->end || *r->p != ':') return fail(r, "expected ':'");
                r->p++;
            }
            jvalue *item = value(r, depth + 1);
            if (!item) return NULL;
            if (object) {
                /* A repeated key: the last one wins, as in serde_json maps. */
                size_t i;
                for (i = 0; i < v->len; i++) if (strcmp(v->keys[i], key) == 0) break;
                if (i < v->len) { v->items[i] = item; }
                else push_item(v, &cap, key, item);
            } else {
                push_item(v, &cap, NULL, item);
            }
            skip_ws(r);
            if (r->p < r->end && *r->p == ',') { r->p++; continue; }
            if (r->p < r->end && *r->p == (object ? '}' : ']')) { r->p++; return v; }
            return fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    return fail(r, "expected a value");
}

jvalue *json_parse(const char *text, size_t len, const char **error) {
    reader r = {text, text + len, NULL};
    jvalue *v = value(&r, 0);
    if (v) {
        skip_ws(&r);
        if (r.p != r.end) { v = NULL; r.error = "trailing characters"; }
    }
    if (!v && error) *error = r.error ? r.error : "invalid JSON";
    return v;
}

jvalue *json_get(const jvalue *object, const char *key) {
    if (!object || object->type != J_OBJECT) return NULL;
    for (size_t i = 0; i < object->len; i++)
        if (strcmp(object->keys[i], key) == 0) return object->items[i];
    return NULL;
}

bool json_is_string(const jvalue *v, const char *s) {
    return v && v->type == J_STRING && strlen(s) == v->len && memcmp(v->string, s, v->len) == 0;
}

void buf_mem(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void buf_str(buf *b, const char *s) { buf_mem(b, s, strlen(s)); }

void buf_fmt(buf *b, const char *format, ...) {
    char small[256];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(small, sizeof small, format, args);
    va_end(args);
    if (n < (int)sizeof small) { buf_mem(b, small, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    va_start(args, format);
    vsnprintf(big, (size_t)n + 1, format, args);
    va_end(args);
    buf_mem(b, big, (size_t)n);
}

void buf_json_string(buf *b, const char *s, size_t n) {
    buf_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': buf_str(b, "\\\""); break;
        case '\\': buf_str(b, "\\\\"); break;
        case '\n': buf_str(b, "\\n"); break;
        case '\r': buf_str(b, "\\r"); break;
        case '\t': buf_str(b, "\\t"); break;
        case '\b': buf_str(b, "\\b"); break;
        case '\f': buf_str(b, "\\f"); break;
        default:
            if (c < 0x20) buf_fmt(b, "\\u%04x", c);
            else buf_mem(b, (const char *)&s[i], 1);
        }
    }
    buf_str(b, "\"");
}

void buf_json(buf *b, const jvalue *v) {
    switch (v->type) {
    case J_NULL: buf_str(b, "null"); break;
    case J_BOOL: buf_str(b, v->boolean ? "true" : "false"); break;
    case J_INT:
    case J_FLOAT: buf_mem(b, v->raw, v->raw_len); break;
    case J_STRING: buf_json_string(b, v->string, v->len); break;
    case J_ARRAY:
    case J_OBJECT:
        buf_str(b, v->type == J_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->len; i++) {
            if (i) buf_str(b, ",");
            if (v->type == J_OBJECT) {
                buf_json_string(b, v->keys[i], strlen(v->keys[i]));
                buf_str(b, ":");
            }
            buf_json(b, v->items[i]);
        }
        buf_str(b, v->type == J_ARRAY ? "]" : "}");
        break;
    }
}
