// Unit tests of the plugin's logic, natively: `node --test` (or `npm test`).
// The cases in tests/*.yaml run the built component instead
// (`gantry plugin test .`).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { config, reconcile } from './app.js';

const parent = (spec) =>
  JSON.stringify({
    apiVersion: 'example.com/v1',
    kind: 'Greeting',
    metadata: { name: 'world', namespace: 'default' },
    spec,
  });

const request = (spec, cfg = null) => ({
  parent: parent(spec),
  observed: [],
  related: [],
  config: JSON.stringify(cfg),
  finalizing: false,
  trigger: { tag: 'parent-changed' },
});

test('greets who the spec names', () => {
  const response = reconcile.reconcile(request({ who: 'World' }, { greeting: 'Hi' }));
  const child = JSON.parse(response.children[0]);
  assert.equal(child.metadata.name, 'world-greeting');
  assert.equal(child.data.message, 'Hi, World!');
  assert.deepEqual(JSON.parse(response.status), { message: 'Hi, World!' });
  assert.equal(response.conditions[0].status, 'true');
});

test('a parent without spec.who is invalid input', () => {
  assert.throws(() => reconcile.reconcile(request({})), { reason: 'InvalidInput', retryable: false });
});

test('an empty greeting is refused', () => {
  assert.throws(() => config.validateConfig('{"greeting":""}'));
  assert.doesNotThrow(() => config.validateConfig('{"greeting":"Hi"}'));
});
