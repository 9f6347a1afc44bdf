/* The plugin's logic: see greeting.h. Memory is never freed: each call of
 * the component runs in a fresh instance. */
#include "greeting.h"

#include <string.h>

const char *greet(const jvalue *parent, const jvalue *config, greeting_t *out) {
    jvalue *who = json_get(json_get(parent, "spec"), "who");
    if (!who || who->type != J_STRING || who->len == 0) return "spec.who must be a non-empty string";
    jvalue *name = json_get(json_get(parent, "metadata"), "name");
    if (!name || name->type != J_STRING) return "parent has no metadata.name";
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
    out->child = child.data;
    out->status = status.data;
    out->condition_message = condition.data;
    return NULL;
}

const char *check_config(const jvalue *config) {
    if (config->type == J_NULL) return NULL;
    if (config->type != J_OBJECT) return "invalid config: expected a map";
    for (size_t i = 0; i < config->len; i++) {
        if (strcmp(config->keys[i], "greeting") != 0) {
            buf b = {0};
            buf_fmt(&b, "invalid config: unknown field `%s`", config->keys[i]);
            return b.data;
        }
        jvalue *g = config->items[i];
        if (g->type != J_NULL && (g->type != J_STRING || g->len == 0)) {
            return "config.greeting must not be empty";
        }
    }
    return NULL;
}
