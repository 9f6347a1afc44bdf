#!/bin/sh
# The plugin's test: build it, call it once on the sample input with
# `gantry plugin run`, and compare the answer with expected.yaml.
# GANTRY names the gantry binary (default: gantry on PATH).
set -eu
cd "$(dirname "$0")"
__LANG_TEST__actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
"${GANTRY:-gantry}" plugin run --plugin . \
  --parent examples/parent.yaml --config examples/config.yaml >"$actual"
diff -u expected.yaml "$actual"
echo "ok: the plugin's answer matches expected.yaml"
