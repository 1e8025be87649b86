#!/usr/bin/env bash
# Every subcommand parses its flags with the one parser (tools/cli_args.c): --help on stdout exit 0,
# --version on stdout exit 0, an unknown option and a missing value as one usage line on stderr
# with exit 2 (docs/errors.md), nothing on stdout; `bench` without a GPU exits 4 with its reason
# on stderr. $1 = the graphrun binary.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

# run NAME EXPECTED_EXIT ARGS...: stdout in $tmp/out, stderr in $tmp/err; checks the exit status.
run() {
  local name=$1 want=$2
  shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq "$want" ]; check "$name: exit $want (got $rc)" $?
}

for sub in "" detect plan eval bench compare; do
  label=${sub:-default}
  prefix="graphrun${sub:+ $sub}"
  [ "$sub" = detect ] && prefix=graphrun # detect is the default command: one name in messages
  run "$label --help" 0 $sub --help
  grep -q '^usage: graphrun' "$tmp/out" && [ ! -s "$tmp/err" ]; check "$label --help: usage on stdout" $?
  run "$label -h" 0 $sub -h
  grep -q '^usage: graphrun' "$tmp/out"; check "$label -h: usage on stdout" $?
  run "$label --version" 0 $sub --version
  grep -qx 'graphrun [0-9][0-9.]*' "$tmp/out" && [ ! -s "$tmp/err" ]; check "$label --version: one line on stdout" $?
  run "$label --bogus" 2 $sub --bogus
  grep -qx "$prefix: unknown option '--bogus' (see $prefix --help)" "$tmp/err" && [ ! -s "$tmp/out" ]
  check "$label --bogus: one usage line on stderr" $?
  run "$label --model (no value)" 2 $sub --model
  grep -qx "$prefix: missing value for '--model'" "$tmp/err"; check "$label: missing value line" $?
  run "$label --model= works as --model VALUE" 2 $sub --model=x --bogus
  grep -q "unknown option '--bogus'" "$tmp/err"; check "$label: --opt=VALUE parsed" $?
done

# A flag without a value given one, a positional argument.
run "--json=1" 2 --json=1
grep -qx "graphrun: option '--json' takes no value" "$tmp/err"; check "--json=1: takes no value" $?
run "plan positional" 2 plan yolo
grep -qx "graphrun plan: unexpected argument 'yolo' (options start with --)" "$tmp/err"
check "plan: positional argument refused" $?

# `graphrun bench` without a GPU: exit 4 (docs/errors.md), the reason on stderr, stdout empty.
"$bin" bench --prec fp32 --batch 1 --iters 2 --warmup 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 4 ]; then
  grep -q "no CUDA device visible" "$tmp/err" && [ ! -s "$tmp/out" ]
  check "bench without a GPU: its reason on stderr, nothing on stdout" $?
else
  [ $rc -eq 0 ]; check "bench on a GPU: exit 0 (got $rc)" $?
fi
# --runs 2: the median and p99 of two runs, p99 >= median (it was the faster run before).
printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n' >"$tmp/tiny.cfg"
for runs in 2 3; do
  run "--runs $runs" 0 --device cpu --cfg "$tmp/tiny.cfg" --no-output --input data/dog.jpg --runs $runs
  python3 - "$tmp/err" <<'PY'
import re, sys
m = re.search(r"median of \d+ runs ([0-9.]+) us, p99 ([0-9.]+) us", open(sys.argv[1]).read())
assert m and float(m.group(2)) >= float(m.group(1)), m and m.groups()
PY
  check "--runs $runs: p99 >= median" $?
done
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
