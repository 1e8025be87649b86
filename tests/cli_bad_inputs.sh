#!/usr/bin/env bash
# CTest wrapper: the bad-input table (tests/bad_inputs.sh) must hold for the built CLI. $1 = graphrun.
exec bash "$(dirname "$0")/bad_inputs.sh" "$1" >/dev/null
