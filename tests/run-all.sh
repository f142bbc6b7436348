#!/usr/bin/env bash
# Runs every unit test binary and integration script, each producing TAP, and ends with the
# line "N passed, N failed". Exit status is non-zero if anything failed.
# HUTCH_TEST_FILTER=regex runs only the matching tests.
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0
failed_names=()
failed_excerpts=$(mktemp)
log_dir=build/test-logs
rm -rf "$log_dir" && mkdir -p "$log_dir"

run_one() {
    local name=$1; shift
    local log="$log_dir/$name.log"
    mkdir -p "$(dirname "$log")"
    local t0=$(date +%s.%N)
    "$@" >"$log" 2>&1
    local rc=$?
    local t1=$(date +%s.%N)
    account "$name" "$log" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')"
}

# account NAME LOG STATUS SECONDS: counts one test's TAP and prints its line.
account() {
    local name=$1 log=$2 rc=$3 secs=$4
    local p f s t
    p=$(grep -cE '^ok ' "$log" | tr -d ' ')
    s=$(grep -cE '^ok .*# (SKIP|skip)' "$log" | tr -d ' ')
    # a failing TODO check (TAP: a known bug) is counted with the skipped, not as a failure
    t=$(grep -cE '^not ok .*# (TODO|todo)' "$log" | tr -d ' ')
    f=$(($(grep -cE '^not ok ' "$log" | tr -d ' ') - t))
    s=$((s + t))
    p=$((p - s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a crash or a bad exit without a failing check still counts as a failure
        f=1
        echo "not ok - $name exited with status $rc" >>"$log"
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-40s %4d passed %3d failed %3d skipped  %6.1fs\n' "$name" "$p" "$f" "$s" "$secs"
    if [ "$f" -gt 0 ]; then
        failed_names+=("$name")
        grep -E '^not ok|^#' "$log" | head -n 40 | sed 's/^/    /'
        # kept for the end too, where a CI that shows only the tail still shows why
        { echo "$name:"; grep -E -A3 '^not ok' "$log" | head -n 40 | sed 's/^/    /'; } >>"$failed_excerpts"
    fi
}

# The test guest (tests/guest/README.md): Debian's own 6.1 kernel with pure cgroup v2, booted once
# for all of GUEST_TESTS; each test's TAP counts as guest/NAME. Where qemu or the kernel is
# missing, one line says so and the rest of the suite runs as before; HUTCH_GUEST=0 skips it by
# hand. GUEST_LIMIT bounds the whole boot (each test has its own bound in suite.sh).
GUEST_TESTS=(fixture doctor test_cgroup test_cgroup_cpu test_verdict test_agent test_engine limits cleanup
    escape_caller escape_counters escape_fs escape_net escape_proc escape_syscalls
    serve serve_lifecycle serve_restart serve_host_zygote)
run_guest() {
    local names=() n
    for n in "${GUEST_TESTS[@]}"; do [[ guest/$n =~ $filter ]] && names+=("$n"); done
    [ "${#names[@]}" -gt 0 ] || return 0
    if [ "${HUTCH_GUEST:-1}" = 0 ]; then
        echo "guest tests skipped: HUTCH_GUEST=0"
        return 0
    fi
    local why
    if ! why=$(bash tests/guest/guest.sh check); then
        echo "$why"
        return 0
    fi
    mkdir -p "$log_dir/guest"
    local boot_log=$log_dir/guest/boot.log t0=$(date +%s.%N)
    bash tests/guest/guest.sh run -t "${GUEST_LIMIT:-1800}" -- bash tests/guest/suite.sh "${names[@]}" \
        >"$boot_log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    # Split the output on suite.sh's markers; a test without its end marker did not finish.
    local line cur= status secs
    declare -A ended=()
    while IFS= read -r line; do
        case $line in
        "@@guest-test-begin "*) cur=${line#@@guest-test-begin }; : >"$log_dir/guest/$cur.log" ;;
        "@@guest-test-end "*)
            read -r _ n status secs <<<"$line"
            ended[$n]="$status $secs"
            cur=
            ;;
        *) [ -n "$cur" ] && printf '%s\n' "$line" >>"$log_dir/guest/$cur.log" ;;
        esac
    done <"$boot_log"
    for n in "${names[@]}"; do
        local log=$log_dir/guest/$n.log
        if [ -n "${ended[$n]:-}" ]; then
            account "guest/$n" "$log" ${ended[$n]}
        else
            [ -f "$log" ] || : >"$log"
            echo "not ok - guest/$n did not finish (guest.sh exited with $rc; see $boot_log)" >>"$log"
            account "guest/$n" "$log" 1 0
        fi
    done
    printf '%-40s %6.1fs (boot and tests, guest.sh status %d)\n' "guest: total" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$rc"
}

# A private state and run directory for the whole run: templates, uid locks. World-traversable,
# because the sandboxes' unprivileged uids must reach the template layer.
test_tmp=$(mktemp -d /tmp/hutch-test.XXXXXX)
chmod 755 "$test_tmp"
export HUTCH_STATE_DIR=$test_tmp/state HUTCH_RUN_DIR=$test_tmp/run
trap 'rm -rf "$test_tmp" "$failed_excerpts"' EXIT

filter=${HUTCH_TEST_FILTER:-.}
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    name=unit/$(basename "$t")
    [[ $name =~ $filter ]] || continue
    run_one "$name" "$t"
done
for t in tests/integration/*.sh; do
    [ -f "$t" ] || continue
    case $(basename "$t") in lib.sh | *_lib.sh) continue ;; esac # sourced by the tests
    name=integration/$(basename "$t" .sh)
    [[ $name =~ $filter ]] || continue
    run_one "$name" bash "$t"
done
# The end-to-end suite (tests/e2e/README.md): each tests/e2e/*.mjs but the harness drives the npm
# E2B SDK against a daemon of its own. Where node or the SDK (scripts/install-deps.sh) is missing,
# its log is one TAP skip line.
for t in tests/e2e/*.mjs; do
    [ -f "$t" ] || continue
    case $(basename "$t") in harness.mjs) continue ;; esac
    name=e2e/$(basename "$t" .mjs)
    [[ $name =~ $filter ]] || continue
    if ! command -v node >/dev/null 2>&1; then
        run_one "$name" echo "1..0 # SKIP node is not installed"
    elif [ ! -d tests/e2e/node_modules ]; then
        run_one "$name" echo "1..0 # SKIP tests/e2e/node_modules is missing: run scripts/install-deps.sh"
    else
        run_one "$name" node "$t"
    fi
done
run_guest
if [ "${#failed_names[@]}" -gt 0 ]; then
    cat "$failed_excerpts"
    echo "failed: ${failed_names[*]} (logs in $log_dir)"
fi
[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
