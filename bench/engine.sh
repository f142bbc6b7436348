#!/usr/bin/env bash
# The engine benchmarks (build/bench/engine, bench/engine.h): a command in a running sandbox, an
# agent sandbox's create and first output, N idle sandboxes held at once, freeze and thaw; each
# against a baseline measured in the same run. See bench/README.md. Run by bench/run.sh (`make
# bench`), or alone by `make bench-engine`.
#   BENCH_ENGINE="exec create density freeze"   which of them (all by default; none: skip)
#   BENCH_N, BENCH_WARMUP                       rounds and warm-up rounds of the timed ones
#   BENCH_EXEC_N=200 BENCH_CREATE_N=100 BENCH_FREEZE_N=200   rounds of each (BENCH_N if unset)
#   BENCH_DENSITY_N=1000                        sandboxes held at once
#   BENCH_DENSITY_SETTLE_MS=2000                wait before each memory reading
#   BENCH_FREEZE_POLL_US=100                    jail_frozen asked again at least this often
#   HUTCH_CGROUP_MODE=v1|v2|hybrid              force the cgroup mode (hutch run's too)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${BENCH_ENGINE:-}" = none ] && exit 0
root=$PWD
out=build/bench
engine=$root/build/bench/engine

[ "$(id -u)" -eq 0 ] || { echo "bench: the engine benchmarks need root" >&2; exit 1; }
# Up to date with the tree (bench/run.sh may be run without make).
make -s build/hutch build/bench/engine
mkdir -p "$out"

# A private, world-traversable state and run directory (template, uid-range lock, sockets),
# shared by the engine's sandboxes and its hutch run baseline, unless the caller names them.
tmp=
if [ -z "${HUTCH_STATE_DIR:-}" ] || [ -z "${HUTCH_RUN_DIR:-}" ]; then
    tmp=$(mktemp -d /tmp/hutch-bench-engine.XXXXXX)
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    export HUTCH_STATE_DIR=$tmp/state HUTCH_RUN_DIR=$tmp/run
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit=$commit-dirty
vars=
for v in BENCH_N BENCH_WARMUP BENCH_EXEC_N BENCH_CREATE_N BENCH_DENSITY_N BENCH_DENSITY_SETTLE_MS \
    BENCH_FREEZE_N BENCH_FREEZE_POLL_US BENCH_ENGINE HUTCH_CGROUP_MODE; do
    [ -n "${!v:-}" ] && vars="$vars$v=${!v} "
done
# shellcheck disable=SC2086 # BENCH_ENGINE is a list of words
"$engine" -o "$out/engine.json" -c "$commit" -C "${vars}make bench-engine" ${BENCH_ENGINE:-}
echo "raw numbers: $out/engine.json"
