#!/usr/bin/env bash
# tests/check_exports.sh's group checks can fail: it is run on copies of runtime.h broken the two
# ways it must refuse, and must fail each with the line that says why.
#   - a function declared above the first group banner: "declared outside every group", naming it;
#   - group 4's banner relabelled group 3, so that group 3 takes group 4's functions: over its
#     budget.
# The untouched header passes (so each failure is the mutation's).
#   tests/check_exports_groups.sh path/to/libgraphrun.so include/graphrun/runtime.h
set -euo pipefail
lib=$1 header=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v nm >/dev/null || { echo "exports_groups: nm not found (binutils)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 passed=0
# expect NAME WANT_STATUS PATTERN HEADER: check_exports.sh's status and a line of its output.
expect() {
  local name=$1 want=$2 pattern=$3 h=$4 out st=0
  out=$(bash "$here/check_exports.sh" "$lib" "$h" 2>&1) || st=$?
  if [ "$st" = "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
    passed=$((passed + 1))
  else
    echo "exports_groups: $name: status $st (want $want), no line matching '$pattern' in:"
    echo "$out"
    failed=$((failed + 1))
  fi
}
expect "the header as it is" 0 '^exports: group 1 \(core\): [0-9]+ functions, budget' "$header"

# gr_version's declaration moved above group 1's banner.
grep -qx 'const char \*gr_version(void);' "$header" || { echo "exports_groups: gr_version's declaration not found"; exit 1; }
awk '$0 == "const char *gr_version(void);" { next }
     /^\/\* ==== group 1:/ { print "const char *gr_version(void);" } { print }' "$header" > "$tmp/outside.h"
expect "a function outside every group" 1 '^exports: declared outside every group .*: gr_version$' "$tmp/outside.h"

# Group 4's banner relabelled group 3.
sed -E 's#^/\* ==== group 4:#/* ==== group 3:#' "$header" > "$tmp/over.h"
cmp -s "$header" "$tmp/over.h" && { echo "exports_groups: no group 4 banner to relabel"; exit 1; }
expect "a group over its budget" 1 '^exports: group 3 \(saved engines and caches\): [0-9]+ functions, over its budget of' "$tmp/over.h"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
