# Sourced by the GPU-machine scripts (bench/h100_*.sh): `step NAME SECONDS COMMAND...` runs one
# step with its own time limit, its output in $OUT/NAME.log, and prints its status and duration,
# so one slow step cannot eat the others.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
step() {
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
  echo "[$name] rc $? in $(( $(date +%s) - t0 )) s"
}
