/* Unit tests of the plugin's logic, natively: `make test`. The YAML cases
 * beside this file run the built component instead (`gantry plugin test .`). */
#include <stdio.h>
#include <string.h>

#include "../greeting.h"

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

static jvalue *parse(const char *text) { return json_parse(text, strlen(text), NULL); }

int main(void) {
    greeting_t wanted;
    const char *invalid =
        greet(parse("{\"metadata\":{\"name\":\"world\"},\"spec\":{\"who\":\"World\"}}"),
              parse("{\"greeting\":\"Hi\"}"), &wanted);
    expect(invalid == NULL, "a parent with spec.who is served");
    expect(invalid == NULL && strstr(wanted.child, "\"name\":\"world-greeting\"") != NULL,
           "the child is <name>-greeting");
    expect(invalid == NULL && strcmp(wanted.status, "{\"message\":\"Hi, World!\"}") == 0,
           "the status has the message");

    invalid = greet(parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}"), parse("null"), &wanted);
    expect(invalid != NULL, "a parent without spec.who is invalid input");

    expect(check_config(parse("{\"greeting\":\"\"}")) != NULL, "an empty greeting is refused");
    expect(check_config(parse("{\"greeting\":\"Hi\"}")) == NULL, "a greeting is accepted");
    expect(check_config(parse("null")) == NULL, "no config is accepted");

    if (failures) return 1;
    printf("ok: greeting_test\n");
    return 0;
}
