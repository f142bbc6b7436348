#!/usr/bin/env bash
# Runs every unit test binary and integration script, each producing TAP, and ends with the
# line "N passed, N failed". Exit status is non-zero if anything failed.
# HUTCH_TEST_FILTER=regex runs only the matching tests.
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0
failed_names=()
log_dir=build/test-logs
rm -rf "$log_dir" && mkdir -p "$log_dir"

run_one() {
    local name=$1; shift
    local log="$log_dir/$name.log"
    mkdir -p "$(dirname "$log")"
    local t0=$(date +%s.%N)
    "$@" >"$log" 2>&1
    local rc=$?
    local p f s
    p=$(grep -cE '^ok ' "$log" | tr -d ' ')
    s=$(grep -cE '^ok .*# (SKIP|skip)' "$log" | tr -d ' ')
    f=$(grep -cE '^not ok ' "$log" | tr -d ' ')
    p=$((p - s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or a bad exit without a failing check still counts as a failure
        f=1
        echo "not ok - $name exited with status $rc" >>"$log"
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    local t1=$(date +%s.%N)
    printf '%-40s %4d passed %3d failed %3d skipped  %6.1fs\n' "$name" "$p" "$f" "$s" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')"
    if [ "$f" -gt 0 ]; then
        failed_names+=("$name")
        grep -E '^not ok|^#' "$log" | head -n 40 | sed 's/^/    /'
    fi
}

# A private state and run directory for the whole run: templates, uid locks. World-traversable,
# because the sandboxes' unprivileged uids must reach the template layer.
test_tmp=$(mktemp -d /tmp/hutch-test.XXXXXX)
chmod 755 "$test_tmp"
export HUTCH_STATE_DIR=$test_tmp/state HUTCH_RUN_DIR=$test_tmp/run
trap 'rm -rf "$test_tmp"' EXIT

filter=${HUTCH_TEST_FILTER:-.}
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    name=unit/$(basename "$t")
    [[ $name =~ $filter ]] || continue
    run_one "$name" "$t"
done
for t in tests/integration/*.sh; do
    [ -f "$t" ] || continue
    case $(basename "$t") in lib.sh) continue ;; esac
    name=integration/$(basename "$t" .sh)
    [[ $name =~ $filter ]] || continue
    run_one "$name" bash "$t"
done
[ "${#failed_names[@]}" -gt 0 ] && echo "failed: ${failed_names[*]} (logs in $log_dir)"
[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
