#!/usr/bin/env bash
# The shared library's dynamic symbols are exactly the functions include/graphrun/runtime.h
# declares (its static inline ones aside): none missing (a declared function without a definition, or hidden by mistake) and
# nothing else (internal functions, kernels and their C++ stubs stay hidden).
#   tests/check_exports.sh path/to/libgraphrun.so include/graphrun/runtime.h
set -euo pipefail
lib=$1 header=$2
command -v nm >/dev/null || { echo "exports: nm not found (binutils)"; exit 77; }
# Function declarations: a gr_ name followed by "(" outside comments, after a return type.
declared=$(sed -e 's#/\*.*\*/##g' -e '/\/\*/,/\*\//d' "$header" |
           grep -oE '\bgr_[a-z0-9_]+[[:space:]]*\(' | grep -oE 'gr_[a-z0-9_]+' |
           grep -v '_fn$' | sort -u)
# static inline helpers (the option structs' *_default) are compiled into the caller: not exports.
inline=$(grep -oE '^static inline [^(]*\bgr_[a-z0-9_]+\(' "$header" | grep -oE 'gr_[a-z0-9_]+' |
         sort -u)
declared=$(comm -23 <(echo "$declared") <(echo "$inline"))
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
[ $status = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $status
