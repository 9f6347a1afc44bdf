#!/bin/sh
# The converter's test: build it, convert the sample objects to v1 with
# `gantry convert run` (each also back to its own version, which must give
# it back unchanged), and compare the answer with expected.yaml.
# GANTRY names the gantry binary (default: gantry on PATH).
set -eu
cd "$(dirname "$0")"
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
"${GANTRY:-gantry}" convert run --plugin . --objects examples/objects.yaml \
  --to example.com/v1 --round-trip >"$actual"
diff -u expected.yaml "$actual"
echo "ok: the converter's answer matches expected.yaml, and round trips are lossless"
