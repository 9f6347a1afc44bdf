// __NAME__: a Gantry reconcile plugin in JavaScript.
//
// A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose
// `message` is "<config.greeting>, <spec.who>!". The module exports the
// interfaces of the `reconciler` world in wit/gantry.wit: `reconcile` and
// `config`. JSON crosses the boundary as strings; errors are thrown.

/** The `reconcile` interface. */
export const reconcile = {
  /** Compute the desired state of one parent; throws a `plugin-error`. */
  reconcile(request) {
    if (request.finalizing) {
      return response({ finalized: true });
    }
    const parent = JSON.parse(request.parent);
    const config = JSON.parse(request.config) ?? {};
    const who = parent?.spec?.who;
    if (typeof who !== 'string') {
      throw { reason: 'InvalidInput', message: 'spec.who must be a string', retryable: false };
    }
    const name = parent.metadata.name;
    const greeting = config.greeting ?? 'Hello';
    const message = `${greeting}, ${who}!`;
    const childName = `${name}-greeting`;
    const child = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: childName },
      data: { message },
    };
    return response({
      children: [JSON.stringify(child)],
      status: JSON.stringify({ message }),
      conditions: [
        {
          conditionType: 'Greeted',
          status: 'true',
          reason: 'ConfigMapWritten',
          message: `${childName} says ${message}`,
        },
      ],
    });
  },
};

/** The `config` interface: check a binding's config; throw a message. */
export const config = {
  validateConfig(text) {
    const value = JSON.parse(text);
    if (value === null) {
      return;
    }
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw 'invalid config: expected a map';
    }
    for (const key of Object.keys(value)) {
      if (key !== 'greeting') {
        throw `invalid config: unknown field \`${key}\``;
      }
    }
    if (value.greeting !== undefined && (typeof value.greeting !== 'string' || value.greeting.trim() === '')) {
      throw 'config.greeting must not be empty';
    }
  },
};

function response(fields) {
  return {
    children: [],
    status: undefined,
    conditions: [],
    events: [],
    requeueAfterMs: undefined,
    finalized: false,
    ...fields,
  };
}
