/* __NAME__: a Gantry reconcile plugin in C.
 *
 * A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose
 * `message` is "<config.greeting>, <spec.who>!". The build generates
 * `reconciler.h` from wit/gantry.wit with wit-bindgen's C generator; this
 * file implements its two exports. JSON crosses the boundary as strings
 * (json.c reads and writes it). Memory is never freed: each call runs in a
 * fresh instance. */

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "reconciler.h"

static bool fail(exports_gantry_plugin_reconcile_plugin_error_t *err, const char *message) {
    reconciler_string_dup(&err->reason, "InvalidInput");
    reconciler_string_dup(&err->message, message);
    err->retryable = false;
    return false;
}

bool exports_gantry_plugin_reconcile_reconcile(exports_gantry_plugin_reconcile_request_t *request,
                                               exports_gantry_plugin_reconcile_response_t *ret,
                                               exports_gantry_plugin_reconcile_plugin_error_t *err) {
    memset(ret, 0, sizeof *ret);
    if (request->finalizing) {
        ret->finalized = true;
        return true;
    }
    jvalue *parent = json_parse((const char *)request->parent.ptr, request->parent.len, NULL);
    jvalue *config = json_parse((const char *)request->config.ptr, request->config.len, NULL);
    if (!parent || !config) return fail(err, "the request is not valid JSON");
    jvalue *who = json_get(json_get(parent, "spec"), "who");
    if (!who || who->type != J_STRING) return fail(err, "spec.who must be a string");
    jvalue *name = json_get(json_get(parent, "metadata"), "name");
    if (!name || name->type != J_STRING) return fail(err, "parent has no metadata.name");
    jvalue *greeting = json_get(config, "greeting");
    const char *hello = greeting && greeting->type == J_STRING ? greeting->string : "Hello";

    buf message = {0}, child_name = {0}, child = {0}, status = {0}, condition = {0};
    buf_fmt(&message, "%s, %s!", hello, who->string);
    buf_fmt(&child_name, "%s-greeting", name->string);
    buf_str(&child, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    buf_json_string(&child, child_name.data, child_name.len);
    buf_str(&child, "},\"data\":{\"message\":");
    buf_json_string(&child, message.data, message.len);
    buf_str(&child, "}}");
    buf_str(&status, "{\"message\":");
    buf_json_string(&status, message.data, message.len);
    buf_str(&status, "}");
    buf_fmt(&condition, "%s says %s", child_name.data, message.data);

    ret->children.len = 1;
    ret->children.ptr = calloc(1, sizeof *ret->children.ptr);
    reconciler_string_dup(&ret->children.ptr[0], child.data);
    ret->status.is_some = true;
    reconciler_string_dup(&ret->status.val, status.data);
    ret->conditions.len = 1;
    ret->conditions.ptr = calloc(1, sizeof *ret->conditions.ptr);
    exports_gantry_plugin_reconcile_condition_t *c = &ret->conditions.ptr[0];
    reconciler_string_dup(&c->condition_type, "Greeted");
    c->status = EXPORTS_GANTRY_PLUGIN_RECONCILE_CONDITION_STATUS_TRUE;
    reconciler_string_dup(&c->reason, "ConfigMapWritten");
    reconciler_string_dup(&c->message, condition.data);
    return true;
}

bool exports_gantry_plugin_config_validate_config(reconciler_string_t *text, reconciler_string_t *err) {
    jvalue *config = json_parse((const char *)text->ptr, text->len, NULL);
    if (!config) {
        reconciler_string_dup(err, "config is not valid JSON");
        return false;
    }
    if (config->type == J_NULL) return true;
    if (config->type != J_OBJECT) {
        reconciler_string_dup(err, "invalid config: expected a map");
        return false;
    }
    for (size_t i = 0; i < config->len; i++) {
        if (strcmp(config->keys[i], "greeting") != 0) {
            buf b = {0};
            buf_fmt(&b, "invalid config: unknown field `%s`", config->keys[i]);
            reconciler_string_dup(err, b.data);
            return false;
        }
        jvalue *g = config->items[i];
        if (g->type != J_NULL && (g->type != J_STRING || g->len == 0)) {
            reconciler_string_dup(err, "config.greeting must not be empty");
            return false;
        }
    }
    return true;
}
