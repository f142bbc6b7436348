#!/usr/bin/env bash
# --root: sandbox uid 0 without capabilities; its own places (home, /output) still work.
. "$(dirname "$0")/lib.sh"

out=$(hrun --root -- /bin/sh -c 'id -u; echo $HOME; pwd; grep CapEff /proc/self/status')
is "$(echo "$out" | sed -n 1p)" "0" "--root runs as uid 0"
is "$(echo "$out" | sed -n 2p)" "/root" "HOME is /root"
is "$(echo "$out" | sed -n 3p)" "/root" "the working directory is /root"
like "$(echo "$out" | sed -n 4p)" "0000000000000000" "with no effective capability"

art=$(mktemp -d /tmp/hutch-art.XXXXXX)
json=$(hjson --root --artifacts "$art" -- /bin/sh -c 'echo made-by-root > /output/r.txt')
is "$(jfield "$json" status)" "OK" "--root can write /output"
is "$(cat "$art/r.txt" 2>/dev/null)" "made-by-root" "and the artifact reaches the host"
json=$(hjson --artifacts "$art" -- /bin/sh -c 'echo made-by-user > /output/u.txt')
is "$(cat "$art/u.txt" 2>/dev/null)" "made-by-user" "the default user can write /output too"
rm -rf "$art"

out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$HUTCH" run -- true 2>&1)
rc=$?
is "$rc" "2" "hutch run as a non-root user exits 2"
like "$out" "needs root" "and says it needs root"
done_testing
