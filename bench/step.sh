# Sourced by the GPU-machine scripts (bench/h100_*.sh): `step NAME SECONDS COMMAND...` runs one
# step with its own time limit, its output in $LOGS/NAME.log, and prints its status and duration,
# so one slow step cannot eat the others. A device call brings back at most 8 files from $OUT:
# `pack_logs` (call it last) puts every log into $OUT/logs.tgz; other results the script writes to
# $OUT itself (JSON for bench/results/).
OUT=${OUT:-/tmp/out}
LOGS=${LOGS:-/tmp/gr-logs}
mkdir -p "$OUT" "$LOGS"
step() {
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" >"$LOGS/$name.log" 2>&1
  echo "[$name] rc $? in $(( $(date +%s) - t0 )) s"
}
pack_logs() {
  tar -C "$LOGS" -czf "$OUT/logs.tgz" . && echo "logs: $OUT/logs.tgz ($(ls "$LOGS" | wc -l) files)"
}
