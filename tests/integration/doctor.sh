# hutch doctor: passes on this host, reports what it found, fails for the right reasons, and
# leaves no cgroup, temporary directory or state directory behind.
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d /tmp/hutch-doctor-test.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"; [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"' EXIT
# The overlay probe makes its layers under TMPDIR: a private one shows whether it cleans up.
mkdir -m 755 "$tmp/tmpdir"

# doctor_bg OUT ARGS...: runs hutch doctor with its output in OUT; sets rc and pid (the doctor's
# pid names its cgroups doctor-PID-N).
doctor_bg() {
    local out=$1; shift
    TMPDIR=$tmp/tmpdir "$HUTCH" doctor "$@" >"$out" 2>"$out.err" &
    pid=$!
    wait "$pid"
    rc=$?
}

# cgroups_left PID: the run-PID-*/doctor-PID-* groups still present in any hierarchy.
cgroups_left() {
    local d
    for d in /sys/fs/cgroup/*/hutch /sys/fs/cgroup/hutch; do
        [ -d "$d" ] || continue
        ls -d "$d"/run-"$1"-* "$d"/doctor-"$1"-* 2>/dev/null
    done
}

mode=$(python3 -c 'import os
print("v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else
      "hybrid" if os.path.exists("/sys/fs/cgroup/unified/cgroup.controllers") else "v1")')

# --- everything works here ---
doctor_bg "$tmp/text"
is "$rc" 0 "hutch doctor exits 0 on this host"
[ "$rc" -eq 0 ] || diag "$(grep -E '^(FAIL|warn)' "$tmp/text")" "$(cat "$tmp/text.err")"
like "$(cat "$tmp/text")" "(^|
)ok   cgroup-mode: $mode" "it reports the cgroup mode ($mode)"
like "$(tail -n 1 "$tmp/text")" '^[0-9]+ ok, [0-9]+ warn, 0 FAIL: ' "it ends with a summary"
bad_lines=$(grep -vE '^(ok   |warn |FAIL )[a-z0-9-]+: .+|^$|^[0-9]+ ok, ' "$tmp/text")
is "$bad_lines" "" "every line is a check (ok/warn/FAIL NAME: detail) or the summary"
is "$(cgroups_left "$pid")" "" "no doctor-$pid-*/run-$pid-* cgroup is left behind"
is "$(ls -A "$tmp/tmpdir")" "" "no temporary directory is left behind"
is "$(cat "$tmp/text.err")" "" "nothing on stderr"

# --- Landlock: the kernel's ABI against the one hutch uses, and what is missing below it ---
# The kernel's ABI, asked here without hutch: landlock_create_ruleset(NULL, 0, VERSION).
abi=$(python3 -c 'import ctypes, os
r = ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)
print(r if r > 0 else 0)')
ll=$(grep '^[a-zA-Z ]* landlock: ' "$tmp/text")
if [ "$abi" -ge 6 ]; then
    like "$ll" "^ok   landlock: kernel ABI $abi, hutch uses up to ABI 6 \(all of it here\); .*kill\(parent, 0\) -> EPERM" \
        "landlock: ok, kernel ABI $abi against hutch's 6, signal scoping tried"
elif [ "$abi" -gt 0 ]; then
    like "$ll" "^warn landlock: kernel ABI $abi, hutch uses up to ABI 6; landlock_restrict\(\) in a child: mkdir outside the writable places -> EACCES; missing here: " \
        "landlock: warn, kernel ABI $abi against hutch's 6; the write rule still tried"
    missing=""
    for a in 2 3 5 6; do
        [ "$a" -gt "$abi" ] && missing="$missing $a"
    done
    for a in $missing; do
        like "$ll" "ABI $a \(" "landlock: ABI $a is named as missing, with what stands in for it"
    done
    [[ " $missing " == *" 6 "* ]] && like "$ll" "signal and abstract-socket scoping.*init stays out of the payload's reach" \
        "landlock: without ABI 6 it says what still protects init (escape_proc tests that)"
    is "$(grep -o 'ABI [0-9] (' <<<"$ll" | grep -c "ABI [1-$abi] (")" 0 "landlock: nothing the kernel has is named as missing"
else
    like "$ll" "^warn landlock: no Landlock \(hutch uses up to ABI 6\)" "landlock: no Landlock, warn"
fi

# --- nftables: tried in a network namespace of the probe's own, never the host's ---
if command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ]; then
    like "$(cat "$tmp/text")" "(^|
)ok   nftables: [^ ]*nft creates a table in a fresh network namespace" \
        "with nft installed, the nftables check creates a table in a namespace of its own"
    nft_bin=$(command -v nft || echo /usr/sbin/nft)
    is "$("$nft_bin" list tables 2>&1 | grep -c hutch_doctor)" 0 "and the host has no hutch_doctor table"
else
    like "$(cat "$tmp/text")" "(^|
)warn nftables: no nft command" "without nft, the nftables check warns and names the fix"
fi

# --- JSON ---
doctor_bg "$tmp/json" --json
is "$rc" 0 "hutch doctor --json exits 0"
check "--json is an array of {name, status: ok|warn|fail, detail}, one per text line" \
    python3 - "$tmp/json" "$tmp/text" <<'EOF'
import json, sys
entries = json.load(open(sys.argv[1]))
assert isinstance(entries, list) and entries, "not a non-empty array"
for e in entries:
    assert set(e) == {"name", "status", "detail"}, e
    assert all(isinstance(e[k], str) and e[k] for k in e), e
    assert e["status"] in ("ok", "warn", "fail"), e
names = [e["name"] for e in entries]
assert len(set(names)) == len(names), "duplicate names"
lines = [l for l in open(sys.argv[2]) if l[:5] in ("ok   ", "warn ", "FAIL ")]
text_names = [l[5:].split(":", 1)[0] for l in lines]
assert names == text_names, (names, text_names)
assert not any(e["status"] == "fail" for e in entries), "a check failed"
EOF

# --- a state directory sandboxes cannot reach ---
mkdir -m 700 "$tmp/private"
HUTCH_STATE_DIR=$tmp/private/state doctor_bg "$tmp/state"
is "$rc" 1 "a state dir under a 0700 directory: exit 1"
like "$(grep '^FAIL state-dir:' "$tmp/state")" "FAIL state-dir: $tmp/private has mode 0700.*chmod o\+x" \
    "the state-dir check fails, naming the directory and the fix"
is "$(grep -c '^FAIL' "$tmp/state")" 1 "and nothing else fails"
is "$(ls -A "$tmp/private")" "" "the state dir it created to look is removed again"

# --- a missing state directory is created and removed again ---
HUTCH_STATE_DIR=$tmp/fresh/state doctor_bg "$tmp/fresh.out"
like "$(grep '^ok   state-dir:' "$tmp/fresh.out")" "can be created" "a missing state dir: ok, can be created"
check "and it is gone afterwards" test ! -e "$tmp/fresh"

# --- cgroup v2 forced on a host whose cgroup2 has no controllers ---
if [ "$mode" != v2 ] && ! grep -qw memory /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null; then
    HUTCH_CGROUP_MODE=v2 doctor_bg "$tmp/v2"
    is "$rc" 1 "HUTCH_CGROUP_MODE=v2: exit 1"
    like "$(grep '^FAIL cgroup-controllers:' "$tmp/v2")" "controller 'memory' is not available" \
        "the cgroup-controllers check fails, naming the memory controller"
    like "$(grep '^ok   cgroup-mode:' "$tmp/v2")" "v2 \(forced by HUTCH_CGROUP_MODE\)" \
        "the mode line says it was forced"
    is "$(cgroups_left "$pid")" "" "no cgroup is left behind after the failures"
else
    skip "HUTCH_CGROUP_MODE=v2 failure" "cgroup2 here has the memory controller"
fi

# --- the writable root's lower layers: idmapped where their filesystem allows it ---
idmap=$(grep '^[a-zA-Z ]* writable-root-idmap: ' "$tmp/text")
# the test guest's /usr is the host's over 9p (magic 0x01021997), which cannot be idmapped
if [ "${HUTCH_TEST_GUEST:-0}" = 1 ] || [ "$(stat -f -c %t /usr)" = 1021997 ]; then
    like "$idmap" "^warn writable-root-idmap: cannot be idmapped .*: /usr[,;].*cannot change them" \
        "writable-root-idmap: /usr over 9p cannot be idmapped: a warning that says what it costs"
else
    like "$idmap" "^ok   writable-root-idmap: idmapped .*: /usr" "writable-root-idmap: /usr can be idmapped"
fi
# a state directory on ramfs, which refuses idmapped mounts (made here, and unmounted again)
mkdir -m 755 "$tmp/ramfs"
if mount -t ramfs ramfs "$tmp/ramfs" 2>/dev/null; then
    chmod 755 "$tmp/ramfs"
    HUTCH_STATE_DIR=$tmp/ramfs/state doctor_bg "$tmp/ramfs.out"
    umount "$tmp/ramfs"
    is "$rc" 0 "a state directory on ramfs: exit 0 (sandboxes still start)"
    like "$(grep '^warn writable-root-idmap:' "$tmp/ramfs.out")" "cannot be idmapped .*[:,] $tmp/ramfs/state[;,]" \
        "... and a warning naming it"
else
    skip "a state directory on ramfs" "no ramfs here"
    skip "... and a warning naming it" "no ramfs here"
fi

# --- usage ---
"$HUTCH" doctor --bogus >/dev/null 2>&1
is "$?" 2 "an unknown argument is a usage error (exit 2)"

done_testing
