# Runs inside the test guest (tests/guest/guest.sh run -- bash tests/guest/suite.sh NAME...):
# each named test in turn, its TAP between two marker lines that tests/run-all.sh splits on:
#   @@guest-test-begin NAME
#   @@guest-test-end NAME STATUS SECONDS
# NAME is "fixture" (what the guest claims to be: checked here), a unit test binary's name
# (build/tests/test_*) or an integration script's name (tests/integration/NAME.sh). Each test gets at most
# GUEST_TEST_LIMIT seconds (default 900).
set -u
cd "$(dirname "$0")/../.."
limit=${GUEST_TEST_LIMIT:-900}
# The integration tests drive build/hutch here, not the sanitizer build: under TCG ASan makes
# `hutch run -- true` 3x slower (424 ms against 138 ms), and the sanitizers already run over the
# same code on the host. What the guest tests is the kernel and cgroup v2 beneath it.
export HUTCH_BIN=${GUEST_HUTCH_BIN:-$PWD/build/hutch}
# Under TCG the guest is 3-5x slower than the host on average and far less even: tests that bound
# a phase or a call's time (test_engine) stretch those bounds by this factor; they still fail on a
# hang. 4 was too tight: in a fresh-clone CI run one jail_start_begin of 203 took 418 ms of CPU in
# the guest (its p99 51 ms; no sleep), past 4 x 100 ms.
export HUTCH_TEST_TIME_SCALE=${HUTCH_TEST_TIME_SCALE:-10}
# Tests that expect something else of the guest (its /usr over 9p) or leave a slow case to the
# host ask this, not a proxy for it.
export HUTCH_TEST_GUEST=1

# The guest is what the tests below are meant to run on: else their passes would mean nothing.
fixture() {
    . tests/integration/lib.sh
    like "$(uname -r)" '^6\.1\.' "kernel 6.1 ($(uname -r))"
    is "$(stat -f -c %T /sys/fs/cgroup)" cgroup2fs "/sys/fs/cgroup is cgroup2, nothing else"
    is "$(grep -c ' cgroup ' /proc/self/mounts)" 0 "no cgroup v1 hierarchy mounted"
    local sub
    sub=$(</sys/fs/cgroup/cgroup.subtree_control)
    like "$sub" '(^| )cpu( |$)' "the root delegates cpu ($sub)"
    like "$sub" '(^| )memory( |$)' "the root delegates memory"
    like "$sub" '(^| )pids( |$)' "the root delegates pids"
    like "$sub" '(^| )io( |$)' "the root delegates io"
    local p user=()
    for p in $(</sys/fs/cgroup/cgroup.procs); do
        readlink "/proc/$p/exe" >/dev/null 2>&1 && user+=("$p") # kernel threads have no exe
    done
    is "${user[*]}" "" "no user process in the root cgroup"
    is "$(</proc/self/cgroup)" "0::/system.slice/hutch-test.service" \
        "the tests run in a leaf under system.slice"
    is "$(stat -f -c %T "$(dirname "$HUTCH_STATE_DIR")")" ext2/ext3 \
        "the state directory is on the ext4 scratch disk"
    check "the repository is read-only" bash -c '! touch build/.guest-write-test 2>/dev/null'
    done_testing
}

for name in "$@"; do
    echo "@@guest-test-begin $name"
    t0=$(date +%s.%N)
    case $name in
    fixture) (fixture) ;;
    test_*) timeout -k 10 "$limit" "build/tests/$name" ;;
    *) timeout -k 10 "$limit" bash "tests/integration/$name.sh" ;;
    esac
    status=$?
    echo "@@guest-test-end $name $status $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')"
done
