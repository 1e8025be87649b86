# Sourced by the shell test scripts (tests/cli_*.sh, tests/install_consumer.sh): a scratch
# directory $tmp removed on exit, and `check NAME STATUS` counting passes and failures (a failure
# prints "FAIL: NAME"). Each script ends with its "N passed, M failed" line.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0
check() { # check NAME CONDITION-EXIT-STATUS
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
