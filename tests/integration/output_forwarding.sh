#!/usr/bin/env bash
# Without --json, output is forwarded live. A slow or stuck reader of hutch's stdout must slow
# the program down, never the supervisor: timeouts still fire, and the verdict comes back.
. "$(dirname "$0")/lib.sh"

scratch=$(mktemp -d /tmp/hutch-fwd.XXXXXX)
trap 'rm -rf "$scratch"; [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"' EXIT

out=$(hrun -- /bin/sh -c 'seq 1 300000' | (sleep 0.5; md5sum))
want=$(seq 1 300000 | md5sum)
is "$out" "$want" "a slow reader gets every byte, in order"

n=$(hrun -- /bin/sh -c 'head -c 3000000 /dev/zero; echo err >&2' 2>/dev/null | wc -c)
is "$n" "3000000" "3 MB through the pipe, intact"

mkfifo "$scratch/fifo"
(exec 3<"$scratch/fifo"; sleep 15) &
reader=$!
start=$(now_ms)
"$HUTCH" run --timeout 1 -- yes >"$scratch/fifo" 2>"$scratch/err"
rc=$?
elapsed=$(($(now_ms) - start))
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
is "$rc" "1" "a reader that never reads: hutch run still ends with the program's failure"
like "$(cat "$scratch/err")" "TO: wall-clock" "and the verdict is TO"
[ "$elapsed" -lt 4000 ] && ok "within seconds of the timeout (${elapsed} ms), not when the reader goes" ||
    not_ok "within seconds of the timeout (${elapsed} ms), not when the reader goes"
done_testing
