#!/usr/bin/env bash
# CLI folder mode with a device that fails mid-run, through the test hook GR_TEST_FAIL_ENGINE=K:N
# (docs/errors.md, "A device that fails mid-run"; runtime.h "A device that fails"): the CPU
# reference is a pool of one device, so after its second run no device is left. Every file still
# gets its line in input order (no hang), those before the failure byte-equal to a run without
# it, the failed device's batches naming it and the injected failure, the rest "not run: no
# device left"; the summary names the device and the count; exit 1. A malformed hook value is
# refused (exit 2). Spreading over the devices left is tests/test_failover.c's (pools of several
# CPU engines). $1 = the graphrun binary.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

d=$tmp/images
mkdir "$d"
for i in 000 001 002 003 004 005 006 007 008 009 010 011; do cp "data/shapes-val/$i.png" "$d/$i.png"; done
run() { timeout 60 "$bin" --device cpu --model shapes --input "$d" --batch 2 --threads 2 "$@"; }

run >"$tmp/want.jsonl" 2>"$tmp/want.err"
rc=$?
[ $rc -eq 0 ]; check "without a failure: exit 0 (got $rc)" $?
GR_TEST_FAIL_ENGINE=0:2 run >"$tmp/got.jsonl" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ]; check "a device failed: exit 1 (got $rc)" $?
[ "$(wc -l <"$tmp/got.jsonl")" -eq 12 ]; check "one line per file (12)" $?
cut -d'"' -f4 "$tmp/got.jsonl" | sed 's|.*/||' >"$tmp/order"
ls "$d" >"$tmp/listed"
cmp -s "$tmp/order" "$tmp/listed"; check "in input order" $?
cmp -s <(head -2 "$tmp/got.jsonl") <(head -2 "$tmp/want.jsonl"); check "the first batch as without a failure, byte for byte" $?
injected='device 0 (the CPU) failed: injected failure (test hook GR_TEST_FAIL_ENGINE=0:2)'
# Batch 1 (files 2, 3) failed with batch 2 (4, 5) in flight; batches 3, 4 (6..9), decoded into its
# other slots, have no other device to go to: lost with it.
[ "$(sed -n 3,10p "$tmp/got.jsonl" | grep -c "\"error\": \"$injected\"}$")" -eq 8 ]; check "its batches: the device and the failure" $?
[ "$(sed -n 11,12p "$tmp/got.jsonl" | grep -c "\"error\": \"not run: no device left ($injected)\"}$")" -eq 2 ]; check "the rest: no device left" $?
grep -q "^graphrun: $injected; 1 of 1 devices failed mid-run, 10 images lost with them$" "$tmp/err"; check "the summary names the device and the count" $?
# Formats without an error field say each on stderr.
GR_TEST_FAIL_ENGINE=0:2 run --format csv >"$tmp/got.csv" 2>"$tmp/err.csv"
rc=$?
[ $rc -eq 1 ]; check "csv: exit 1 (got $rc)" $?
[ "$(grep -c "^graphrun: .*$injected" "$tmp/err.csv")" -ge 10 ]; check "csv: each lost file said on stderr" $?

GR_TEST_FAIL_ENGINE=x run >/dev/null 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 2 ]; check "a malformed hook: exit 2 (got $rc)" $?
grep -q "GR_TEST_FAIL_ENGINE=x: K:N expected" "$tmp/bad.err"; check "a malformed hook: said" $?
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
