# shellcheck shell=bash disable=SC2034 # status: the sourcing script's
# Sourced by the device scripts (device_run.sh, ab_device.sh): run one step of a measurement under a
# time limit, so that one slow step cannot eat the others.
#   step NAME SECONDS COMMAND...
# runs COMMAND (not a shell function: timeout runs it) with its output in $STEP_LOGS/NAME.log,
# prints "[NAME] rc RC in N s", sets status=1 when it fails, and returns its exit status. With
# STEP_DEADLINE (epoch seconds) set, SECONDS is cut to what is left before it (less 10 s), and a
# step with no time left is skipped as failed.
step() {
    local name=$1 secs=$2 t0 rc
    shift 2
    if [ -n "${STEP_DEADLINE:-}" ]; then
        local left=$((STEP_DEADLINE - $(date +%s) - 10))
        [ "$secs" -gt "$left" ] && secs=$left
        if [ "$secs" -le 5 ]; then
            echo "[$name] skipped: the time limit is reached"
            status=1
            return 1
        fi
    fi
    t0=$(date +%s)
    timeout "$secs" "$@" >"$STEP_LOGS/$name.log" 2>&1
    rc=$?
    echo "[$name] rc $rc in $(($(date +%s) - t0)) s"
    [ $rc = 0 ] || status=1
    return $rc
}
