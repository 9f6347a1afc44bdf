/* The plugin's logic in plain C: what a Greeting parent should have.
 * plugin.c adapts it to the contract (wit/gantry.wit); kept apart from the
 * generated bindings, it is tested natively by `make test`. */
#ifndef GREETING_H
#define GREETING_H

#include "json.h"

typedef struct {
    char *child;             /* the ConfigMap, as JSON */
    char *status;            /* the parent's status, as JSON */
    char *condition_message; /* the message of the Greeted condition */
} greeting_t;

/* Fill *out for `parent` and `config`; NULL, or why the parent is invalid
 * input (a permanent error). */
const char *greet(const jvalue *parent, const jvalue *config, greeting_t *out);

/* Why the binding's `config` is refused, or NULL when it is fine. */
const char *check_config(const jvalue *config);

#endif
