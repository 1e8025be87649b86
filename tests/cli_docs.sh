#!/usr/bin/env bash
# The man page and bash completion generated from the CLI's help (tools/gen_docs.py, built beside
# graphrun): they exist, the completion is valid bash and completes subcommands, flags and value
# choices, the man page parses (man -l / groff when installed, else a structural check) and
# documents every flag of `graphrun --help`.
#   tests/cli_docs.sh path/to/graphrun     (from the source root)
set -u
bin=$1
dir=$(dirname "$bin")
source "$(dirname "$0")/lib/check.sh"
command -v python3 >/dev/null || { echo "cli_docs: no python3 (the files are not generated)"; exit 77; }

[ -s "$dir/graphrun.1" ]; check "graphrun.1 generated" $?
[ -s "$dir/graphrun.bash" ]; check "graphrun.bash generated" $?
bash -n "$dir/graphrun.bash"; check "the completion is valid bash" $?

# complete WORD...: what _graphrun offers for the command line "graphrun WORD..." (last = cursor).
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=(graphrun "$@"); COMP_CWORD=$#; _graphrun
           printf "%s\n" "${COMPREPLY[@]}"' _ "$dir/graphrun.bash" "$@"
}
offers() { # offers NAME EXPECTED WORD...
  local name=$1 expected=$2; shift 2
  if complete_words "$@" | grep -qx -- "$expected"; then check "$name" 0; else
    check "$name" 1; echo "  'graphrun $*' offers: $(complete_words "$@" | tr '\n' ' ')"; fi
}
offers "graphrun --pr offers --prec" --prec --pr
offers "graphrun --prec offers int8" int8 --prec ""
offers "graphrun pl offers plan" plan pl
offers "graphrun eval --ima offers --images" --images eval --ima
offers "graphrun --device offers gpu" gpu --device ""
offers "graphrun --model offers shapes (--list-models)" shapes --model sh
offers "graphrun compare --calib offers entropy" entropy compare --calib ""
! complete_words eval --ima | grep -qx -- --input-list; check "eval does not offer detect's flags" $?

# The man page: every flag of `graphrun --help` in it (roff writes - as \-).
man_text=$(sed 's/\\-/-/g' "$dir/graphrun.1")
missing=""
for flag in $("$bin" --help | grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u); do
  grep -qF -- "$flag" <<<"$man_text" || missing="$missing $flag"
done
[ -z "$missing" ]; check "the man page documents every flag of --help" $? 
[ -z "$missing" ] || echo "  missing:$missing"
for section in "GRAPHRUN PLAN" "GRAPHRUN COMPARE" "GRAPHRUN EVAL" "GRAPHRUN BENCH"; do
  grep -q "^\.SH $section" "$dir/graphrun.1"; check "man section $section" $?
done
head -n 1 "$dir/graphrun.1" | grep -q '^\.TH GRAPHRUN 1 '; check "man page title line" $?
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$dir/graphrun.1" 2>&1)
  [ -z "$warnings" ]; check "groff parses the man page without warnings" $?
  [ -z "$warnings" ] || echo "$warnings" | head -n 5
  man -l "$dir/graphrun.1" 2>/dev/null | grep -q -- '--calib-images'
  check "man -l renders it" $?
else
  echo "cli_docs: no groff: the structural checks only"
fi

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
