/* The kubebuilder tutorial's Memcached operator as a Gantry plugin, in C:
 * the same logic as the Rust plugin in plugins/memcached, with the same
 * answers and error messages (host/tests/polyglot.rs).
 *
 * A `Memcached` (spec.size, spec.containerPort) becomes a Deployment of
 * memcached with that many replicas. Status reports the ready replicas of
 * the observed Deployment and an `Available` condition.
 *
 * Config (all optional): `image` (default `memcached:1.6.26-alpine`).
 *
 * Built with clang's wasm32 target against wasi-libc; the bindings come
 * from wit-bindgen's C generator (reconciler.h), and wasm-component-ld
 * turns the module into a component. Memory is never freed: every call
 * runs in a fresh instance. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "reconciler.h"

#define DEFAULT_IMAGE "memcached:1.6.26-alpine"

typedef exports_gantry_plugin_reconcile_request_t request_t;
typedef exports_gantry_plugin_reconcile_response_t response_t;
typedef exports_gantry_plugin_reconcile_plugin_error_t plugin_error_t;

/* ---- serde's rules and messages, for the few types the plugin reads ---- */

/* How serde names a JSON value it did not expect. */
static void unexpected(buf *b, const jvalue *v) {
    switch (v->type) {
    case J_NULL: buf_str(b, "null"); break;
    case J_BOOL: buf_fmt(b, "boolean `%s`", v->boolean ? "true" : "false"); break;
    case J_INT: buf_fmt(b, "integer `%lld`", (long long)v->integer); break;
    case J_FLOAT: {
        char text[64];
        snprintf(text, sizeof text, "%.17g", v->number);
        for (int p = 1; p < 17; p++) { /* shortest that round-trips */
            char shorter[64];
            snprintf(shorter, sizeof shorter, "%.*g", p, v->number);
            if (strtod(shorter, NULL) == v->number) { strcpy(text, shorter); break; }
        }
        if (!strpbrk(text, ".eEn")) strcat(text, ".0");
        buf_fmt(b, "floating point `%s`", text);
        break;
    }
    case J_STRING: buf_str(b, "string "); buf_json_string(b, v->string, v->len); break;
    case J_ARRAY: buf_str(b, "sequence"); break;
    case J_OBJECT: buf_str(b, "map"); break;
    }
}

static char *invalid_type(const jvalue *v, const char *expected) {
    buf b = {0};
    buf_str(&b, "invalid type: ");
    unexpected(&b, v);
    buf_fmt(&b, ", expected %s", expected);
    return b.data;
}

/* An i32 into *out; NULL, or serde's message. */
static char *i32(const jvalue *v, int *out) {
    if (v->type == J_INT) {
        if (v->integer < -2147483648LL || v->integer > 2147483647LL) {
            buf b = {0};
            buf_fmt(&b, "invalid value: integer `%lld`, expected i32", (long long)v->integer);
            return b.data;
        }
        *out = (int)v->integer;
        return NULL;
    }
    return invalid_type(v, "i32");
}

/* An optional string into *out (NULL for null). */
static char *optional_string(const jvalue *v, const jvalue **out) {
    if (v->type == J_NULL) { *out = NULL; return NULL; }
    if (v->type == J_STRING) { *out = v; return NULL; }
    return invalid_type(v, "a string");
}

typedef struct { int size, container_port; } spec_t;

/* `MemcachedSpec` (size default 1, containerPort default 11211). */
static char *parse_spec(const jvalue *v, spec_t *spec) {
    spec->size = 1;
    spec->container_port = 11211;
    int *fields[] = {&spec->size, &spec->container_port};
    const char *names[] = {"size", "containerPort"};
    if (v->type == J_ARRAY) {
        if (v->len > 2) {
            buf b = {0};
            buf_fmt(&b, "invalid length %zu, expected fewer elements in array", v->len);
            return b.data;
        }
        for (size_t i = 0; i < v->len; i++) {
            char *e = i32(v->items[i], fields[i]);
            if (e) return e;
        }
        return NULL;
    }
    if (v->type != J_OBJECT) return invalid_type(v, "struct MemcachedSpec");
    for (size_t i = 0; i < v->len; i++)
        for (int f = 0; f < 2; f++)
            if (strcmp(v->keys[i], names[f]) == 0) {
                char *e = i32(v->items[i], fields[f]);
                if (e) return e;
            }
    return NULL;
}

/* The binding's `Config` (unknown fields rejected); *image NULL when unset. */
static char *parse_config(const jvalue *v, const jvalue **image) {
    *image = NULL;
    if (v->type == J_ARRAY) {
        if (v->len == 0) return strdup("invalid length 0, expected struct Config with 1 element");
        if (v->len > 1) {
            buf b = {0};
            buf_fmt(&b, "invalid length %zu, expected fewer elements in array", v->len);
            return b.data;
        }
        return optional_string(v->items[0], image);
    }
    if (v->type != J_OBJECT) return invalid_type(v, "struct Config");
    for (size_t i = 0; i < v->len; i++) {
        if (strcmp(v->keys[i], "image") != 0) {
            buf b = {0};
            buf_fmt(&b, "unknown field `%s`, expected `image`", v->keys[i]);
            return b.data;
        }
        char *e = optional_string(v->items[i], image);
        if (e) return e;
    }
    return NULL;
}

/* Whether `s` is empty or only Unicode white space, as Rust's trim sees it. */
static bool blank(const jvalue *s) {
    static const uint32_t spaces[] = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    const unsigned char *p = (const unsigned char *)s->string, *end = p + s->len;
    while (p < end) {
        uint32_t cp;
        int n;
        if (*p < 0x80) { cp = *p; n = 1; }
        else if ((*p & 0xE0) == 0xC0) { cp = *p & 0x1F; n = 2; }
        else if ((*p & 0xF0) == 0xE0) { cp = *p & 0x0F; n = 3; }
        else { cp = *p & 0x07; n = 4; }
        for (int i = 1; i < n && p + i < end; i++) cp = (cp << 6) | (p[i] & 0x3F);
        p += n;
        bool space = (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || (cp >= 0x2000 && cp <= 0x200A);
        for (size_t i = 0; !space && i < sizeof spaces / sizeof *spaces; i++) space = cp == spaces[i];
        if (!space) return false;
    }
    return true;
}

/* ---- the WIT glue ---- */

static void set_string(reconciler_string_t *out, const char *s) {
    reconciler_string_dup(out, s);
}

static bool error(plugin_error_t *err, const char *reason, const char *message) {
    set_string(&err->message, message);
    set_string(&err->reason, reason);
    err->retryable = false;
    return false;
}

static bool invalid_input(plugin_error_t *err, const char *prefix, char *detail) {
    buf b = {0};
    buf_str(&b, prefix);
    buf_str(&b, detail);
    return error(err, "InvalidInput", b.data);
}

static jvalue *parse(const reconciler_string_t *text, const char *what, char **problem) {
    const char *e = NULL;
    jvalue *v = json_parse((const char *)text->ptr, text->len, &e);
    if (!v) {
        buf b = {0};
        buf_fmt(&b, "%s is not valid JSON: %s", what, e);
        *problem = b.data;
    }
    return v;
}

/* `{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "memcached"}` */
static void labels(buf *b, const char *name) {
    buf_str(b, "{\"app.kubernetes.io/instance\":");
    buf_json_string(b, name, strlen(name));
    buf_str(b, ",\"app.kubernetes.io/name\":\"memcached\"}");
}

/* The Deployment a Memcached wants. */
static char *deployment(const char *name, const spec_t *spec, const char *image, size_t image_len) {
    buf b = {0};
    buf_str(&b, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"labels\":");
    labels(&b, name);
    buf_str(&b, ",\"name\":");
    buf_json_string(&b, name, strlen(name));
    buf_fmt(&b, "},\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":", spec->size);
    labels(&b, name);
    buf_str(&b, "},\"template\":{\"metadata\":{\"labels\":");
    labels(&b, name);
    buf_str(&b, "},\"spec\":{\"containers\":[{\"command\":[\"memcached\",\"--memory-limit=64\",\"-o\",\"modern\",\"-v\"],\"image\":");
    buf_json_string(&b, image, image_len);
    buf_fmt(&b,
            ",\"imagePullPolicy\":\"IfNotPresent\",\"name\":\"memcached\",\"ports\":[{\"containerPort\":%d,"
            "\"name\":\"memcached\",\"protocol\":\"TCP\"}],\"securityContext\":{\"allowPrivilegeEscalation\":false,"
            "\"capabilities\":{\"drop\":[\"ALL\"]},\"runAsNonRoot\":true,\"runAsUser\":1001}}],"
            "\"securityContext\":{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}}}}}}",
            spec->container_port);
    return b.data;
}

bool exports_gantry_plugin_reconcile_reconcile(request_t *request, response_t *ret, plugin_error_t *err) {
    memset(ret, 0, sizeof *ret);
    char *problem = NULL;
    /* Parse every JSON field first, in the Rust SDK's order. */
    jvalue *parent = parse(&request->parent, "parent", &problem);
    if (!parent) return error(err, "InvalidInput", problem);
    jvalue **observed = calloc(request->observed.len + 1, sizeof *observed);
    for (size_t i = 0; i < request->observed.len; i++) {
        observed[i] = parse(&request->observed.ptr[i], "observed object", &problem);
        if (!observed[i]) return error(err, "InvalidInput", problem);
    }
    for (size_t i = 0; i < request->related.len; i++)
        if (!parse(&request->related.ptr[i], "related object", &problem)) return error(err, "InvalidInput", problem);
    jvalue *config = parse(&request->config, "config", &problem);
    if (!config) return error(err, "InvalidInput", problem);

    if (request->finalizing) {
        ret->finalized = true;
        return true;
    }
    const jvalue *image = NULL;
    if (config->type != J_NULL && (problem = parse_config(config, &image)))
        return invalid_input(err, "invalid config: ", problem);
    jvalue *spec_value = json_get(parent, "spec");
    jvalue empty = {.type = J_OBJECT};
    spec_t spec;
    if ((problem = parse_spec(spec_value ? spec_value : &empty, &spec)))
        return invalid_input(err, "invalid spec: ", problem);
    if (spec.size < 1 || spec.size > 10) {
        buf b = {0};
        buf_fmt(&b, "spec.size must be between 1 and 10, got %d", spec.size);
        return error(err, "InvalidSpec", b.data);
    }
    jvalue *name_value = json_get(json_get(parent, "metadata"), "name");
    if (!name_value || name_value->type != J_STRING) return error(err, "InvalidInput", "parent has no metadata.name");
    const char *name = name_value->string;
    char *child = image ? deployment(name, &spec, image->string, image->len)
                        : deployment(name, &spec, DEFAULT_IMAGE, strlen(DEFAULT_IMAGE));

    /* The observed Deployment named like the parent, if any. */
    bool has_replicas = false;
    int replicas = 0, ready = 0;
    for (size_t i = 0; i < request->observed.len; i++) {
        jvalue *o = observed[i];
        if (!json_is_string(json_get(o, "apiVersion"), "apps/v1") || !json_is_string(json_get(o, "kind"), "Deployment") ||
            !json_is_string(json_get(json_get(o, "metadata"), "name"), name))
            continue;
        const char *bad = NULL;
        jvalue *s = json_get(o, "spec");
        if (s && s->type != J_NULL) {
            if (s->type != J_OBJECT) bad = invalid_type(s, "DeploymentSpec");
            jvalue *r = bad ? NULL : json_get(s, "replicas");
            if (r && r->type != J_NULL) {
                bad = i32(r, &replicas);
                has_replicas = !bad;
            }
            if (!bad && !json_get(s, "selector")) bad = "missing field `selector`";
            if (!bad && !json_get(s, "template")) bad = "missing field `template`";
        }
        jvalue *st = bad ? NULL : json_get(o, "status");
        if (st && st->type != J_NULL) {
            if (st->type != J_OBJECT) bad = invalid_type(st, "DeploymentStatus");
            jvalue *r = bad ? NULL : json_get(st, "readyReplicas");
            if (r && r->type != J_NULL) bad = i32(r, &ready);
        }
        if (bad) {
            buf b = {0};
            buf_fmt(&b, "observed Deployment %s does not deserialize: %s", name, bad);
            return error(err, "InvalidInput", b.data);
        }
        break;
    }

    ret->children.len = 1;
    ret->children.ptr = calloc(1, sizeof *ret->children.ptr);
    set_string(&ret->children.ptr[0], child);
    buf status = {0};
    buf_fmt(&status, "{\"readyReplicas\":%d}", ready);
    ret->status.is_some = true;
    set_string(&ret->status.val, status.data);

    bool available = ready >= spec.size;
    ret->conditions.len = 1;
    ret->conditions.ptr = calloc(1, sizeof *ret->conditions.ptr);
    exports_gantry_plugin_reconcile_condition_t *c = &ret->conditions.ptr[0];
    set_string(&c->condition_type, "Available");
    c->status = available ? EXPORTS_GANTRY_PLUGIN_RECONCILE_CONDITION_STATUS_TRUE
                          : EXPORTS_GANTRY_PLUGIN_RECONCILE_CONDITION_STATUS_FALSE;
    set_string(&c->reason, available ? "DeploymentReady" : "Scaling");
    buf message = {0};
    buf_fmt(&message, "%d/%d replicas ready", ready, spec.size);
    set_string(&c->message, message.data);

    if (has_replicas && replicas != spec.size) {
        ret->events.len = 1;
        ret->events.ptr = calloc(1, sizeof *ret->events.ptr);
        exports_gantry_plugin_reconcile_event_t *e = &ret->events.ptr[0];
        e->event_type = EXPORTS_GANTRY_PLUGIN_RECONCILE_EVENT_TYPE_NORMAL;
        set_string(&e->reason, "Scaling");
        buf m = {0};
        buf_fmt(&m, "scaling memcached from %d to %d replicas", replicas, spec.size);
        set_string(&e->message, m.data);
    }
    return true;
}

bool exports_gantry_plugin_config_validate_config(reconciler_string_t *text, reconciler_string_t *err) {
    const char *e = NULL;
    jvalue *value = json_parse((const char *)text->ptr, text->len, &e);
    if (!value) {
        buf b = {0};
        buf_fmt(&b, "config is not valid JSON: %s", e);
        set_string(err, b.data);
        return false;
    }
    if (value->type == J_NULL) return true;
    const jvalue *image = NULL;
    char *problem = parse_config(value, &image);
    if (problem) {
        buf b = {0};
        buf_fmt(&b, "invalid config: %s", problem);
        set_string(err, b.data);
        return false;
    }
    if (image && blank(image)) {
        set_string(err, "config.image must not be empty");
        return false;
    }
    return true;
}
