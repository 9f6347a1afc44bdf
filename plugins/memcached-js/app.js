// The kubebuilder tutorial's Memcached operator as a Gantry plugin, in
// JavaScript: the same logic as the Rust plugin in plugins/memcached, with
// the same answers and error messages.
//
// A `Memcached` (spec.size, spec.containerPort) becomes a Deployment of
// memcached with that many replicas. Status reports the ready replicas of
// the observed Deployment and an `Available` condition.
//
// Config (all optional): `image` (default `memcached:1.6.26-alpine`).

/** Image used when the binding's config names none. */
const DEFAULT_IMAGE = 'memcached:1.6.26-alpine';

/** The `reconcile` interface of the `reconciler` world. */
export const reconcile = {
  /** Compute the desired state for one parent; throws a `plugin-error`. */
  reconcile(request) {
    const parsed = parseRequest(request);
    if (parsed.finalizing) {
      return response({ finalized: true });
    }
    const config = parseConfig(parsed.config === null ? {} : parsed.config);
    if (config.error !== undefined) {
      throw invalidInput(`invalid config: ${config.error}`);
    }
    const specValue = get(parsed.parent, 'spec');
    const spec = parseSpec(specValue === undefined ? {} : specValue);
    if (spec.error !== undefined) {
      throw invalidInput(`invalid spec: ${spec.error}`);
    }
    if (spec.size < 1 || spec.size > 10) {
      throw permanent('InvalidSpec', `spec.size must be between 1 and 10, got ${spec.size}`);
    }
    const name = get(get(parsed.parent, 'metadata'), 'name');
    if (typeof name !== 'string') {
      throw invalidInput('parent has no metadata.name');
    }
    const child = deployment(name, spec, config.image ?? DEFAULT_IMAGE);

    const observed = observedDeployment(parsed.observed, name);
    const ready = observed?.readyReplicas ?? 0;
    const available = ready >= spec.size;
    const events = [];
    const current = observed?.replicas;
    if (current !== undefined && current !== spec.size) {
      events.push({
        eventType: 'normal',
        reason: 'Scaling',
        message: `scaling memcached from ${current} to ${spec.size} replicas`,
      });
    }
    return response({
      children: [JSON.stringify(child)],
      status: JSON.stringify({ readyReplicas: ready }),
      conditions: [
        {
          conditionType: 'Available',
          status: available ? 'true' : 'false',
          reason: available ? 'DeploymentReady' : 'Scaling',
          message: `${ready}/${spec.size} replicas ready`,
        },
      ],
      events,
    });
  },
};

/** The `config` interface: check a binding's config; throws a message. */
export const config = {
  validateConfig(text) {
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw `config is not valid JSON: ${e.message}`;
    }
    if (value === null) {
      return;
    }
    const config = parseConfig(value);
    if (config.error !== undefined) {
      throw `invalid config: ${config.error}`;
    }
    if (config.image !== undefined && isBlank(config.image)) {
      throw 'config.image must not be empty';
    }
  },
};

/** A `response` record with defaults for what `fields` leaves out. */
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

function permanent(reason, message) {
  return { message, reason, retryable: false };
}

function invalidInput(message) {
  return permanent('InvalidInput', message);
}

/** The request with its JSON fields parsed, as the Rust SDK does. */
function parseRequest(request) {
  const parse = (what, text) => {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw invalidInput(`${what} is not valid JSON: ${e.message}`);
    }
  };
  return {
    parent: parse('parent', request.parent),
    observed: request.observed.map((o) => parse('observed object', o)),
    related: request.related.map((o) => parse('related object', o)),
    config: parse('config', request.config),
    finalizing: request.finalizing,
  };
}

/** `object[key]` when `object` is a JSON object, else undefined. */
function get(object, key) {
  if (object === null || typeof object !== 'object' || Array.isArray(object)) {
    return undefined;
  }
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

// Deserialization with serde's rules and messages, for the few types the
// plugin reads.

/** How serde names a JSON value it did not expect. */
function unexpected(value) {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return `boolean \`${value}\``;
    case 'number':
      return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
    case 'string':
      return `string ${JSON.stringify(value)}`;
    default:
      return Array.isArray(value) ? 'sequence' : 'map';
  }
}

function invalidType(value, expected) {
  return `invalid type: ${unexpected(value)}, expected ${expected}`;
}

/** An `i32`, or `{ error }`. */
function i32(value) {
  if (typeof value === 'number' && Number.isInteger(value)) {
    if (value < -2147483648 || value > 2147483647) {
      return { error: `invalid value: integer \`${value}\`, expected i32` };
    }
    return { value };
  }
  return { error: invalidType(value, 'i32') };
}

/** An `Option<String>`: `{ value }` (undefined for null) or `{ error }`. */
function optionalString(value) {
  if (value === null) return { value: undefined };
  if (typeof value === 'string') return { value };
  return { error: invalidType(value, 'a string') };
}

/** `MemcachedSpec` (size default 1, containerPort default 11211). */
function parseSpec(value) {
  const spec = { size: 1, containerPort: 11211 };
  const fields = ['size', 'containerPort'];
  if (Array.isArray(value)) {
    if (value.length > fields.length) {
      return { error: `invalid length ${value.length}, expected fewer elements in array` };
    }
    for (const [i, item] of value.entries()) {
      const n = i32(item);
      if (n.error !== undefined) return n;
      spec[fields[i]] = n.value;
    }
    return spec;
  }
  if (value === null || typeof value !== 'object') {
    return { error: invalidType(value, 'struct MemcachedSpec') };
  }
  for (const [key, item] of Object.entries(value)) {
    if (fields.includes(key)) {
      const n = i32(item);
      if (n.error !== undefined) return n;
      spec[key] = n.value;
    }
  }
  return spec;
}

/** The binding's `Config` (unknown fields rejected). */
function parseConfig(value) {
  if (Array.isArray(value)) {
    if (value.length === 0) {
      return { error: 'invalid length 0, expected struct Config with 1 element' };
    }
    if (value.length > 1) {
      return { error: `invalid length ${value.length}, expected fewer elements in array` };
    }
    const image = optionalString(value[0]);
    return image.error !== undefined ? image : { image: image.value };
  }
  if (value === null || typeof value !== 'object') {
    return { error: invalidType(value, 'struct Config') };
  }
  const config = {};
  for (const [key, item] of Object.entries(value)) {
    if (key !== 'image') {
      return { error: `unknown field \`${key}\`, expected \`image\`` };
    }
    const image = optionalString(item);
    if (image.error !== undefined) return image;
    config.image = image.value;
  }
  return config;
}

/** Whether `text` is empty after trimming Unicode white space, like Rust's `str::trim`. */
function isBlank(text) {
  return /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/.test(text);
}

/**
 * The observed Deployment named `name`: `{ replicas, readyReplicas }`
 * (undefined when unset), or undefined when there is none. Throws when it
 * does not deserialize as a Deployment.
 */
function observedDeployment(observed, name) {
  const found = observed.find(
    (o) =>
      get(o, 'apiVersion') === 'apps/v1' &&
      get(o, 'kind') === 'Deployment' &&
      get(get(o, 'metadata'), 'name') === name,
  );
  if (found === undefined) {
    return undefined;
  }
  const fail = (error) => {
    throw invalidInput(`observed Deployment ${name} does not deserialize: ${error}`);
  };
  const optionalI32 = (value) => {
    if (value === undefined || value === null) return undefined;
    const n = i32(value);
    return n.error !== undefined ? fail(n.error) : n.value;
  };
  const result = {};
  const spec = get(found, 'spec');
  if (spec !== undefined && spec !== null) {
    if (typeof spec !== 'object' || Array.isArray(spec)) fail(invalidType(spec, 'DeploymentSpec'));
    result.replicas = optionalI32(spec.replicas);
    for (const required of ['selector', 'template']) {
      if (!Object.hasOwn(spec, required)) fail(`missing field \`${required}\``);
    }
  }
  const status = get(found, 'status');
  if (status !== undefined && status !== null) {
    if (typeof status !== 'object' || Array.isArray(status)) fail(invalidType(status, 'DeploymentStatus'));
    result.readyReplicas = optionalI32(status.readyReplicas);
  }
  return result;
}

/** The Deployment a Memcached wants. */
function deployment(name, spec, image) {
  const labels = () => ({
    'app.kubernetes.io/instance': name,
    'app.kubernetes.io/name': 'memcached',
  });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { labels: labels(), name },
    spec: {
      replicas: spec.size,
      selector: { matchLabels: labels() },
      template: {
        metadata: { labels: labels() },
        spec: {
          containers: [
            {
              command: ['memcached', '--memory-limit=64', '-o', 'modern', '-v'],
              image,
              imagePullPolicy: 'IfNotPresent',
              name: 'memcached',
              ports: [{ containerPort: spec.containerPort, name: 'memcached', protocol: 'TCP' }],
              securityContext: {
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
                runAsNonRoot: true,
                runAsUser: 1001,
              },
            },
          ],
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
        },
      },
    },
  };
}
