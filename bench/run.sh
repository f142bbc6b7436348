#!/usr/bin/env bash
# `make bench`: start-up cost of one throwaway sandbox, hutch against bubblewrap and against no
# sandbox at all, measured in one interleaved run; then the engine benchmarks (bench/engine.sh:
# exec in a running sandbox, create, density, freeze). See bench/README.md.
#   BENCH_N=200          runs per case (and rounds of the engine's timed benchmarks)
#   BENCH_WARMUP=5       warm-up rounds (not recorded)
#   BENCH_PREV_HUTCH=... a previous hutch binary: adds hutch-prev-* cases and hutch/prev ratios
#   BENCH_WRITABLE_ROOT=1 adds hutch-wrroot-true (hutch run --writable-root) and runs
#                        bench/writable_root.c, the writable root's cost phase by phase
#   BENCH_ENGINE=none    skips the engine benchmarks (or names some: "exec freeze")
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${BENCH_N:-200}
warmup=${BENCH_WARMUP:-5}
out=build/bench
hutch=$root/build/hutch
bwrap=$(command -v bwrap || true)
python=/usr/bin/python3

[ -x "$hutch" ] || { echo "bench: $hutch is missing: run make first" >&2; exit 1; }
[ -n "$bwrap" ] || { echo "bench: bubblewrap (bwrap) is not installed" >&2; exit 1; }
[ -x "$python" ] || { echo "bench: $python is missing" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench: hutch run needs root" >&2; exit 1; }
mkdir -p "$out"

cflags="-std=gnu17 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror"
cc $cflags -o "$out/driver" bench/driver.c
cc $cflags -Isrc -o "$out/seccomp-export" bench/seccomp_export.c build/gen/seccomp_builtin.c
"$out/seccomp-export" >"$out/seccomp.bpf"

# hutch's state (the template) and locks in a private, world-traversable place; the template is
# built during the warm-up.
tmp=$(mktemp -d /tmp/hutch-bench.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
export HUTCH_STATE_DIR=$tmp/state HUTCH_RUN_DIR=$tmp/run

# bubblewrap as close to a hutch sandbox as it gets: every namespace, sandbox uid/gid 1000, no
# capabilities, its own session, hutch's own seccomp program (fd 9, opened fresh per run), the
# host /usr read-only, fresh /proc, /dev and /tmp. What it does not do: cgroup limits, an
# unprivileged host uid range (as root its uid 1000 maps to host root), a writable overlay root.
bwrap_args=(--unshare-all --unshare-user --uid 1000 --gid 1000 --cap-drop ALL --new-session
    --die-with-parent --ro-bind /usr /usr --symlink usr/lib64 /lib64 --symlink usr/lib /lib
    --symlink usr/bin /bin --proc /proc --dev /dev --tmpfs /tmp --seccomp 9 --)
code='print(1)'

tab=$'\t'
join() { local IFS=$tab; echo "$*"; }
{
    join bare-true /bin/true
    join bwrap-true "fd=9:$root/$out/seccomp.bpf" "$bwrap" "${bwrap_args[@]}" /bin/true
    join hutch-true "$hutch" run -- /bin/true
    join bare-python "$python" -c "$code"
    join bwrap-python "fd=9:$root/$out/seccomp.bpf" "$bwrap" "${bwrap_args[@]}" "$python" -c "$code"
    join hutch-python "$hutch" run --lang python --code "$code"
    if [ -n "${BENCH_PREV_HUTCH:-}" ]; then
        join hutch-prev-true "$BENCH_PREV_HUTCH" run -- /bin/true
        join hutch-prev-python "$BENCH_PREV_HUTCH" run --lang python --code "$code"
    fi
    if [ "${BENCH_WRITABLE_ROOT:-0}" = 1 ]; then
        join hutch-wrroot-true "$hutch" run --writable-root bench -- /bin/true
    fi
} >"$out/cases.tsv"

"$out/driver" -n "$runs" -w "$warmup" -o "$out/raw.json" "$out/cases.tsv"
python3 bench/report.py "$out/raw.json" "$out/results.json" \
    "BENCH_N=$runs BENCH_WARMUP=$warmup make bench"
echo "raw numbers: $out/results.json"
if [ "${BENCH_WRITABLE_ROOT:-0}" = 1 ]; then
    cc $cflags -Isrc -o "$out/writable_root" bench/writable_root.c \
        src/jail/idmap.c src/jail/disk_layer.c src/jail/control.c src/util/fds.c src/util/err.c src/util/strfmt.c
    "$out/writable_root" -n "$((runs < 1000 ? runs : 1000))" -d "$tmp"
fi

# The engine benchmarks, in the same private state and run directories (the template is built).
[ "${BENCH_ENGINE:-}" = none ] || bash bench/engine.sh
