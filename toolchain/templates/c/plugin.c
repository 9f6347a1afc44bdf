/* __NAME__: a Gantry reconcile plugin in C.
 *
 * A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose
 * `message` is "<config.greeting>, <spec.who>!". The logic is in
 * greeting.c; this file adapts it to the two exports of `reconciler.h`,
 * which the build generates from wit/gantry.wit with wit-bindgen's C
 * generator. JSON crosses the boundary as strings (json.c reads and writes
 * it). Memory is never freed: each call runs in a fresh instance. */

#include <stdlib.h>
#include <string.h>

#include "greeting.h"
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
    greeting_t wanted;
    const char *invalid = greet(parent, config, &wanted);
    if (invalid) return fail(err, invalid);

    ret->children.len = 1;
    ret->children.ptr = calloc(1, sizeof *ret->children.ptr);
    reconciler_string_dup(&ret->children.ptr[0], wanted.child);
    ret->status.is_some = true;
    reconciler_string_dup(&ret->status.val, wanted.status);
    ret->conditions.len = 1;
    ret->conditions.ptr = calloc(1, sizeof *ret->conditions.ptr);
    exports_gantry_plugin_reconcile_condition_t *c = &ret->conditions.ptr[0];
    reconciler_string_dup(&c->condition_type, "Greeted");
    c->status = EXPORTS_GANTRY_PLUGIN_RECONCILE_CONDITION_STATUS_TRUE;
    reconciler_string_dup(&c->reason, "ConfigMapWritten");
    reconciler_string_dup(&c->message, wanted.condition_message);
    return true;
}

bool exports_gantry_plugin_config_validate_config(reconciler_string_t *text, reconciler_string_t *err) {
    jvalue *config = json_parse((const char *)text->ptr, text->len, NULL);
    const char *refused = config ? check_config(config) : "config is not valid JSON";
    if (refused) {
        reconciler_string_dup(err, refused);
        return false;
    }
    return true;
}
