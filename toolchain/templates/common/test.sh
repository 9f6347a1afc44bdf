#!/bin/sh
# The plugin's tests: the logic's own unit tests, natively, then the cases
# in tests/*.yaml, run by `gantry plugin test` on the built component in
# the sandbox, as the operator calls it. After an intended change,
# `./test.sh --update` writes the plugin's new answers into the cases:
# read the diff before you commit it.
# GANTRY names the gantry binary (default: gantry on PATH).
set -eu
cd "$(dirname "$0")"
__LANG_TEST__"${GANTRY:-gantry}" plugin test . "$@"
