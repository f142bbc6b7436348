# Shared by the integration tests: TAP output and helpers to run sandboxes.
# Each test script: `. "$(dirname "$0")/lib.sh"`, checks with ok/not_ok/check, ends with done_testing.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HUTCH=${HUTCH_BIN:-$ROOT/build/hutch-san}
PROBES=$ROOT/build/probe
# run-all.sh exports a private state and run dir; a script run alone gets its own.
if [ -z "${HUTCH_STATE_DIR:-}" ]; then
    HUTCH_TEST_TMP=$(mktemp -d /tmp/hutch-test.XXXXXX)
    chmod 755 "$HUTCH_TEST_TMP"
    export HUTCH_STATE_DIR=$HUTCH_TEST_TMP/state HUTCH_RUN_DIR=$HUTCH_TEST_TMP/run
    trap 'rm -rf "$HUTCH_TEST_TMP"' EXIT
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The host's cgroup mode as hutch detects it (v2, hybrid or v1), for checks that read the
# kernel's files: pure v2 (a stock Debian 12 host, tests/guest/) puts a run's one group at
# /sys/fs/cgroup/hutch/run-PID-N, the others under /sys/fs/cgroup/<hierarchy>/hutch/.
case $(stat -f -c %T /sys/fs/cgroup 2>/dev/null) in
cgroup2fs) cgroup_mode=v2 ;;
*) [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] && cgroup_mode=hybrid || cgroup_mode=v1 ;;
esac
# run_cgroup_dirs PID: the cgroup directories of hutch PID's runs (PID may be a glob, "*"), in
# every hierarchy of every mode.
run_cgroup_dirs() {
    local d
    for d in /sys/fs/cgroup/*/hutch/run-$1-* /sys/fs/cgroup/hutch/run-$1-*; do
        [ -d "$d" ] && echo "$d" # a pattern that matched nothing stays as it is, and is no directory
    done
    return 0
}

tap_n=0
tap_failed=0
ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1)); echo "not ok $tap_n - $*"; }
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP ${2:-}"; }
diag() { printf '# %s\n' "$@"; }
# check DESCRIPTION CMD...: ok when CMD succeeds; shows its output otherwise.
check() {
    local desc=$1; shift
    local out
    if out=$("$@" 2>&1); then ok "$desc"; else not_ok "$desc"; diag "$out" | head -n 20; fi
}
# check_fails DESCRIPTION CMD...: ok when CMD fails.
check_fails() {
    local desc=$1; shift
    local out
    if out=$("$@" 2>&1); then not_ok "$desc"; diag "unexpectedly succeeded: $out" | head -n 20; else ok "$desc"; fi
}
# is GOT WANT DESCRIPTION
is() {
    if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3"; diag "got: '$1'" "want: '$2'"; fi
}
# like TEXT REGEX DESCRIPTION
like() {
    if [[ $1 =~ $2 ]]; then ok "$3"; else not_ok "$3"; diag "got: '$1'" "want match: '$2'"; fi
}
done_testing() { echo "1..$tap_n"; [ "$tap_failed" -eq 0 ]; }

# hrun ARGS...: hutch run.
hrun() { "$HUTCH" run "$@"; }
# hjson ARGS...: hutch run --json; the JSON object on stdout.
hjson() { "$HUTCH" run --json "$@"; }
# jfield JSON FIELD: one top-level field (strings raw, others as JSON). jq answers for strings,
# booleans, null and exact integers (a tenth of python's start-up time, which the tests pay
# hundreds of times); python3 for the rest, whose JSON it writes as json.dumps does.
have_jq=
command -v jq >/dev/null 2>&1 && have_jq=yes
jfield() {
    if [ -n "$have_jq" ] && jq -e -r --arg f "$2" '.[$f] | if type == "string" then .
        elif type == "boolean" or type == "null" then tojson
        elif type == "number" and . == floor and fabs < 9007199254740992 then tojson
        else error("python3 formats this") end' <<<"$1" 2>/dev/null; then
        return 0
    fi
    python3 -c 'import json,sys
v=json.loads(sys.argv[1]).get(sys.argv[2])
print(v if isinstance(v,str) else json.dumps(v))' "$1" "$2"
}
# probe NAME: --file arguments that copy build/probe/NAME to /tmp/NAME in the sandbox.
probe() { echo "--file=$PROBES/$1:/tmp/$1"; }
# jpy JSON EXPR: a Python expression over the parsed object o, e.g. 'len(o["stdout"])' (strings
# raw, others as JSON). For what jfield cannot say: lengths, nested fields, sums.
jpy() {
    python3 -c 'import json,sys
o=json.loads(sys.argv[1])
v=eval(sys.argv[2])
print(v if isinstance(v,str) else json.dumps(v))' "$1" "$2"
}
# now_ms: CLOCK_REALTIME in milliseconds, to time a run from outside (bash's own clock: no
# program started, which costs about 0.1 s in the TCG guest).
now_ms() {
    local t=${EPOCHREALTIME//[!0-9]/}
    echo $((10#$t / 1000))
}
# require_probes NAME...: stop the script with a failure unless every probe is built.
require_probes() {
    local p
    for p in "$@"; do
        if [ ! -x "$PROBES/$p" ]; then
            not_ok "probe $p is built (make build/probe/$p)"
            done_testing
            exit 1
        fi
    done
}
# use_scratch NAME: a private directory in $scratch and a list $bg_pids of background processes;
# on exit the processes are killed (by pid) and the directory removed.
use_scratch() {
    scratch=$(mktemp -d "/tmp/hutch-$1.XXXXXX")
    bg_pids=()
    trap lib_cleanup EXIT
}
lib_cleanup() {
    local p
    for p in "${bg_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$scratch"
    [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"
}
