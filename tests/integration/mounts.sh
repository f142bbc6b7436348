#!/usr/bin/env bash
# --ro-bind: a host path shows up read-only inside, and nothing can be written through it.
. "$(dirname "$0")/lib.sh"

src=$(mktemp -d /tmp/hutch-bind.XXXXXX)
chmod 755 "$src"
echo shared >"$src/f"
chmod 644 "$src/f"
trap 'rm -rf "$src"; [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"' EXIT

out=$(hrun --ro-bind "$src:/mnt/data" -- cat /mnt/data/f 2>&1)
is "$out" "shared" "a bound directory is readable inside"

out=$(hrun --ro-bind "$src/f:/home/user/f.txt" -- cat /home/user/f.txt 2>&1)
is "$out" "shared" "a bound file is readable inside"

out=$(hrun --root --ro-bind "$src:/mnt/data" -- /bin/sh -c 'echo x > /mnt/data/new; echo x >> /mnt/data/f; rm -f /mnt/data/f; echo done' 2>&1)
like "$out" "Read-only file system" "writes through the bind fail with EROFS, even as sandbox root"
[ ! -e "$src/new" ] && [ "$(cat "$src/f")" = "shared" ] && ok "the host directory is unchanged" ||
    not_ok "the host directory is unchanged"

out=$(hrun --ro-bind "$src:/mnt/data" -- /bin/sh -c 'grep " /mnt/data " /proc/self/mountinfo' 2>&1)
like "$out" "ro,nosuid,nodev" "the bind is mounted ro,nosuid,nodev"

json=$(hjson --ro-bind "/nonexistent-hutch:/mnt/x" -- true)
is "$(jfield "$json" status)" "XX" "a missing bind source is XX"
like "$(jfield "$json" message)" "bind source /nonexistent-hutch" "and the message names it"

json=$(hjson --ro-bind "$src:/usr/share/hutch-x" -- true)
is "$(jfield "$json" status)" "XX" "a target inside a host-owned directory (/usr/share) is refused"

hrun --ro-bind "$src" -- true 2>/dev/null
is "$?" "2" "--ro-bind without a sandbox path is a usage error"

before=$(wc -l </proc/self/mountinfo)
hrun --ro-bind "$src:/mnt/data" -- true
after=$(wc -l </proc/self/mountinfo)
is "$after" "$before" "no mount appears on the host"
# The root overlay's options name its layers by descriptor and by stage-relative paths: the
# sandbox learns nothing of where the host keeps hutch's state.
mi=$(hrun -- cat /proc/self/mountinfo)
like "$(head -1 <<<"$mi")" ' / / .* - overlay overlay .*lowerdir=/proc/self/fd/[0-9]+,upperdir=upper,workdir=work' \
    "the root is an overlay whose options show no host path"
case $mi in *"$HUTCH_STATE_DIR"* | *"$HUTCH_RUN_DIR"*) not_ok "mountinfo inside never shows hutch's state or run directory"; diag "$mi" ;;
*) ok "mountinfo inside never shows hutch's state or run directory" ;; esac
done_testing
