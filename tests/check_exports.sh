#!/usr/bin/env bash
# The shared library's dynamic symbols are exactly the functions include/graphrun/runtime.h
# declares (its static inline ones aside): none missing (a declared function without a definition, or hidden by mistake) and
# nothing else (internal functions, kernels and their C++ stubs stay hidden).
# And the header stays grouped: every declared function sits in one of the groups opened by a
# "/* ==== group N: ..." banner line, and no group declares more functions than its budget below.
#   tests/check_exports.sh path/to/libgraphrun.so include/graphrun/runtime.h
set -euo pipefail
lib=$1 header=$2
command -v nm >/dev/null || { echo "exports: nm not found (binutils)"; exit 77; }

# The budgets: exported functions per group, each today's count plus a small margin. Raising one
# is a decision about the API's size, not a fix for this test: say it, and why the function belongs
# in that group, in the commit message. Nor is a function moved to a group with room left: it
# goes where its purpose puts it.
budget_name=([1]="core" [2]="many images" [3]="saved engines and caches"
             [4]="introspection and measurement" [5]="debug and testing hooks")
budget=([1]=61 [2]=22 [3]=7 [4]=16 [5]=2)

# Function declarations, each with its group: a gr_ name followed by "(" outside comments (the
# first time it appears: a static inline body only calls what was declared above it), the group
# the last banner line above it opened (0: none).
decls=$(awk '
  /^\/\* ==== group [0-9]+:/ { g = $4; sub(/:$/, "", g) }
  {
    line = $0; code = ""
    while (line != "") {
      if (incomment) {
        i = index(line, "*/"); if (i == 0) line = ""; else { line = substr(line, i + 2); incomment = 0 }
      } else {
        i = index(line, "/*")
        if (i == 0) { code = code line; line = "" }
        else { code = code substr(line, 1, i - 1) " "; line = substr(line, i + 2); incomment = 1 }
      }
    }
    inline_line = (code ~ /^static inline /)
    while (match(code, /(^|[^A-Za-z0-9_])gr_[a-z0-9_]+[ \t]*\(/)) {
      name = substr(code, RSTART, RLENGTH); code = substr(code, RSTART + RLENGTH)
      sub(/^[^g]*/, "", name); sub(/[ \t]*\($/, "", name)
      if (name ~ /_fn$/ || name in seen) continue
      seen[name] = 1
      # static inline helpers (the option structs *_default) are compiled into the caller: not exports.
      if (inline_line) { inline_line = 0; continue }
      print name, g + 0
    }
  }' "$header" | sort -u)
declared=$(echo "$decls" | awk '{print $1}' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRVi]$/ {print $3}' |
           grep -vE '^_(init|fini|edata|end|_bss_start)$|^__bss_start$|^_edata$|^_end$' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
n_declared=$(echo "$declared" | wc -l)
n_exported=$(echo "$exported" | grep -c . || true)
status=0
if [ -n "$missing" ]; then
  echo "exports: declared in runtime.h but not exported:" $missing
  status=1
fi
if [ -n "$extra" ]; then
  echo "exports: exported but not declared in runtime.h ($(echo "$extra" | wc -l)):" $(echo "$extra" | head -n 20)
  status=1
fi
echo "exports: $n_declared functions declared, $n_exported symbols exported"

# The groups.
outside=$(echo "$decls" | awk '$2 == 0 {print $1}')
if [ -n "$outside" ]; then
  echo "exports: declared outside every group (before the first \"/* ==== group N:\" banner of $header):" "$(echo "$outside" | paste -sd " ")"
  status=1
fi
banners=$(grep -oE '^/\* ==== group [0-9]+:' "$header" | grep -oE '[0-9]+' || true)
for g in $banners; do
  if [ -z "${budget[$g]:-}" ]; then
    echo "exports: group $g of $header has no budget in $0"
    status=1
  fi
done
for g in "${!budget[@]}"; do
  if ! echo "$banners" | grep -qx "$g"; then
    echo "exports: group $g (${budget_name[$g]}) has no banner in $header"
    status=1
    continue
  fi
  n=$(echo "$decls" | awk -v g="$g" '$2 == g' | grep -c . || true)
  if [ "$n" -gt "${budget[$g]}" ]; then
    echo "exports: group $g (${budget_name[$g]}): $n functions, over its budget of ${budget[$g]}:" \
         "$(echo "$decls" | awk -v g="$g" '$2 == g {print $1}' | paste -sd " ")"
    status=1
  else
    echo "exports: group $g (${budget_name[$g]}): $n functions, budget ${budget[$g]}"
  fi
done
[ $status = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $status
