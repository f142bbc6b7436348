# hutch run leaves nothing behind, whichever way it ends: normal exit, timeout, its own failure,
# SIGINT and SIGTERM, and SIGKILL of hutch itself (its keeper and PDEATHSIG clean up), also with
# daemons inside; and 200 runs in a row change nothing on the host.
#
# Other sessions may run sandboxes on this host at the same time, so what is shared (cgroups,
# processes) is checked by attribution: a run's cgroup is hutch/run-PID-N for hutch's PID, its
# processes are in that cgroup, its keeper holds our private uid-slot lock file.
. "$(dirname "$0")/lib.sh"

use_scratch cleanup
mkdir -p "$HUTCH_RUN_DIR"
lockfile=$HUTCH_RUN_DIR/uid-slots.lock

# The checks below run between every two steps, and each program they start costs about 0.1 s
# in the TCG guest (tests/guest/): they read /proc and the cgroup files with bash's own read and
# globs, and start a program only where bash has no equivalent (find, pgrep).

# run_dirs PID: the cgroup directories of hutch PID's runs, in every hierarchy; n_dirs PID: how many.
run_dirs() { run_cgroup_dirs "$1"; }
n_dirs() {
    local d=($(run_dirs "$1"))
    echo "${#d[@]}"
}
# alive PIDS...: those that are not zombies (an orphaned init waits a while for the host's pid 1
# to reap it: a zombie holds nothing).
alive() {
    local p st out=()
    for p in "$@"; do
        st=
        read -r st </proc/"$p"/stat 2>/dev/null || continue # gone
        st=${st##*) } # after the command name, which may hold spaces and parentheses
        [ "${st%% *}" = Z ] || out+=("$p")
    done
    echo ${out[@]+"${out[@]}"}
}
# run_procs PID: live processes in those cgroups (or below them), read from the groups
# themselves: a process is listed in the cgroup.procs of its group in every hierarchy, so this
# sees what a scan of every /proc/*/cgroup would, at the cost of the run's own directories.
run_procs() {
    local dirs
    dirs=$(run_dirs "$1")
    [ -n "$dirs" ] || return 0
    local -A seen=()
    local p
    while read -r p; do [ -n "$p" ] && seen[$p]=1; done < <(find $dirs -name cgroup.procs -exec cat {} + 2>/dev/null)
    [ "${#seen[@]}" -gt 0 ] && alive $(printf '%s\n' "${!seen[@]}" | sort -n)
    return 0
}
# lock_holders: processes with our uid-slot lock file open (hutch runs and their keepers).
lock_holders() {
    local -A seen=()
    local f
    while read -r f; do f=${f#/proc/}; seen[${f%%/*}]=1; done < <(find /proc/[0-9]*/fd -lname "$lockfile" 2>/dev/null)
    [ "${#seen[@]}" -gt 0 ] && echo $(printf '%s\n' "${!seen[@]}" | sort -n)
    return 0
}
# ofd_locks: OFD locks held on our lock file (/proc/locks names it MAJOR:MINOR:INODE, in hex;
# the lock file is made once by the first run and never replaced, so its name is looked up once).
lock_id=
ofd_locks() {
    if [ -z "$lock_id" ]; then
        local major minor ino
        read -r major minor ino < <(stat -c '%Hd %Ld %i' "$lockfile" 2>/dev/null)
        [ -n "$ino" ] || { echo 0; return; }
        lock_id=$(printf '%02x:%02x:%d' "$major" "$minor" "$ino")
    fi
    local n=0 _ kind id
    while read -r _ kind _ _ _ id _; do
        [ "$kind" = OFDLCK ] && [ "$id" = "$lock_id" ] && n=$((n + 1))
    done </proc/locks
    echo "$n"
}
# slot_free SLOT: 0 if byte SLOT of the lock file can be locked now (then released at once).
slot_free() {
    python3 - "$lockfile" "$1" <<'EOF'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
F_OFD_SETLK = 37
try:
    fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, int(sys.argv[2]), 1, 0))
except OSError:
    sys.exit(1)
sys.exit(0)
EOF
}
# procs_with TEXT: live processes whose command line contains TEXT (ours carry unique sleep times;
# hutch's own command line holds them too, so this is for after hutch is gone).
procs_with() { alive $(pgrep -f -- "$1"); }
# sleeping TOKEN: the live "sleep TOKEN" processes (in a sandbox).
sleeping() { alive $(pgrep -f -- "^sleep $1\$"); }
is_sleeping() { [ -n "$(sleeping "$1")" ]; }
words() { echo $(cat); }
host_mounts() {
    local n=0 _
    while read -r _; do n=$((n + 1)); done </proc/self/mountinfo
    echo "$n"
}
# wait_until CMD...: polls CMD for up to 5 s.
wait_until() {
    local i
    for i in $(seq 250); do "$@" && return 0; sleep 0.02; done
    return 1
}
# uniq_sleep: a sleep argument no other process on the host has (GNU sleep takes fractions).
uniq_sleep() { echo "30.$$$RANDOM$RANDOM"; }

# gone PID WHAT [TOKEN...]: within 3 s of hutch PID's end, nothing of its run is left. The checks
# report what the last look saw (the one that found everything clear, or the one at 3 s).
gone() {
    local hp=$1 what=$2; shift 2
    local t0 tok dirs procs holders locks left
    local -A with=()
    t0=$(now_ms)
    while :; do
        dirs=$(run_dirs "$hp") procs=$(run_procs "$hp") holders=$(lock_holders) locks=$(ofd_locks)
        left="$dirs$procs$holders"
        for tok in "$@"; do with[$tok]=$(procs_with "$tok"); left="$left${with[$tok]}"; done
        [ -z "$left" ] && [ "$locks" = 0 ] && break
        [ $(($(now_ms) - t0)) -ge 3000 ] && break
        sleep 0.05
    done
    diag "$what: $([ -z "$left" ] && echo "all clear" || echo "NOT clear") $(($(now_ms) - t0)) ms after hutch ended"
    is "$dirs" "" "$what: no run-$hp-* cgroup directory left"
    is "$procs" "" "$what: no process left in its cgroups"
    is "$holders/$locks" "/0" "$what: no keeper or hutch holds the uid lock; no OFD lock left"
    for tok in "$@"; do is "${with[$tok]}" "" "$what: no 'sleep $tok' left"; done
}

mounts_before=$(host_mounts)

# --- the ordinary ends ----------------------------------------------------------------------

"$HUTCH" run --json -- true >"$scratch/ok.json" 2>&1 &
hp=$!; bg_pids+=($hp); wait $hp; rc=$?
is "$(jfield "$(cat "$scratch/ok.json")" status)/$rc" "OK/0" "normal exit: OK"
gone $hp "normal exit"

tok=$(uniq_sleep)
"$HUTCH" run --json --timeout 1 -- sleep "$tok" >"$scratch/to.json" 2>&1 &
hp=$!; bg_pids+=($hp); wait $hp; rc=$?
is "$(jfield "$(cat "$scratch/to.json")" status)/$rc" "TO/1" "timeout: TO"
gone $hp "timeout" "$tok"

tok=$(uniq_sleep)
"$HUTCH" run --json --timeout 2 -- sh -c "sleep $tok & echo started" >"$scratch/bgkid.json" 2>&1 &
hp=$!; bg_pids+=($hp); wait $hp; rc=$?
is "$(jfield "$(cat "$scratch/bgkid.json")" status)/$rc" "OK/0" "program exits, leaving a child behind: OK"
gone $hp "exit with a child left running" "$tok"

"$HUTCH" run --json --cwd /no/such/dir -- true >"$scratch/xx.json" 2>&1 &
hp=$!; bg_pids+=($hp); wait $hp; rc=$?
is "$(jfield "$(cat "$scratch/xx.json")" status)/$rc" "XX/2" "setup failure inside the sandbox: XX"
gone $hp "setup failure"

"$HUTCH" run --json --artifacts /proc/version -- true >"$scratch/xx2.json" 2>&1 &
hp=$!; bg_pids+=($hp); wait $hp; rc=$?
is "$(jfield "$(cat "$scratch/xx2.json")" status)/$rc" "XX/2" "artifacts cannot be copied: XX"
gone $hp "failure after the run"

# --- signals to hutch run ----------------------------------------------------------------

for sig in INT TERM; do
    tok=$(uniq_sleep)
    "$HUTCH" run --json -- sleep "$tok" >"$scratch/sig.json" 2>&1 &
    hp=$!; bg_pids+=($hp)
    if wait_until is_sleeping "$tok"; then ok "SIG$sig: the sandbox is up"
    else not_ok "SIG$sig: the sandbox is up"; fi
    t0=$(now_ms)
    kill -s "$sig" "$hp"
    wait $hp; rc=$?
    t1=$(now_ms)
    out=$(cat "$scratch/sig.json")
    is "$(jfield "$out" status)/$rc" "XX/2" "SIG$sig to hutch run: XX, exit 2"
    like "$(jfield "$out" message)" "interrupted by" "SIG$sig: the message says it was interrupted"
    if [ $((t1 - t0)) -lt 3000 ]; then ok "SIG$sig: hutch ended $((t1 - t0)) ms later"
    else not_ok "SIG$sig: hutch ended $((t1 - t0)) ms later"; fi
    gone $hp "SIG$sig" "$tok"
done

# --- SIGKILL of hutch run itself --------------------------------------------------------------

tok=$(uniq_sleep)
"$HUTCH" run -- sh -c "cat /proc/self/uid_map; exec sleep $tok" >"$scratch/k9.out" 2>&1 &
hp=$!; bg_pids+=($hp)
wait_until is_sleeping "$tok"
slot=$(awk '{print int(($2 - 1073741824) / 65536)}' "$scratch/k9.out")
if [ "$cgroup_mode" = v2 ]; then
    is "$(run_dirs $hp | grep -cE '^/sys/fs/cgroup/hutch/')" 1 "kill -9: before, the run has its cgroup2 group"
else
    is "$(run_dirs $hp | grep -cE '^/sys/fs/cgroup/(memory|pids)/')" 2 \
        "kill -9: before, the run has its memory and pids cgroups ($(run_dirs $hp | wc -l) directories in all)"
fi
nprocs=$(run_procs $hp | wc -w)
if [ "$nprocs" -ge 2 ]; then ok "kill -9: before, $nprocs processes in its cgroup (init, sleep)"
else not_ok "kill -9: before, $nprocs processes in its cgroup (init, sleep)"; fi
is "$(lock_holders | wc -w)/$(ofd_locks)" "2/1" "kill -9: before, hutch and its keeper hold the lock file; one OFD lock"
if [ -n "$slot" ] && ! slot_free "$slot"; then ok "kill -9: before, uid slot $slot is locked"
else not_ok "kill -9: before, uid slot '$slot' is locked"; fi
kill -9 $hp
wait $hp 2>/dev/null; rc=$?
is "$rc" 137 "kill -9 of hutch run: it died of SIGKILL"
gone $hp "kill -9" "$tok"
if [ -n "$slot" ] && slot_free "$slot"; then ok "kill -9: uid slot $slot can be locked again"
else not_ok "kill -9: uid slot '$slot' can be locked again"; fi
is "$(host_mounts)" "$mounts_before" "kill -9: the host's mount table is as before"

# daemons: setsid, double fork, nohup, ignoring SIGHUP and SIGTERM
t1=$(uniq_sleep); t2=$(uniq_sleep); t3=$(uniq_sleep); t4=$(uniq_sleep)
"$HUTCH" run -- sh -c "trap '' HUP TERM
    setsid sleep $t1 &
    (setsid sh -c 'sleep $t2 & exit' &)
    nohup sleep $t3 >/dev/null 2>&1 &
    exec sleep $t4" >"$scratch/daemons.out" 2>&1 &
hp=$!; bg_pids+=($hp)
all_up() { [ -n "$(sleeping "$t1")" ] && [ -n "$(sleeping "$t2")" ] && [ -n "$(sleeping "$t3")" ] && [ -n "$(sleeping "$t4")" ]; }
wait_until all_up
is "$(for t in $t1 $t2 $t3 $t4; do sleeping "$t" | wc -w; done | words)" "1 1 1 1" "daemons: all four running before the kill"
is "$(awk '{print $6 == $1}' /proc/"$(sleeping "$t1")"/stat 2>/dev/null)" 1 "daemons: the setsid one leads its own session"
{ kill -9 $hp; wait $hp; } 2>/dev/null
gone $hp "kill -9 with daemons" "$t1" "$t2" "$t3" "$t4"

# kill -9 of hutch while the sandbox is still being set up
for delay in 0.01 0.03 0.06; do
    "$HUTCH" run -- true >/dev/null 2>&1 &
    hp=$!; bg_pids+=($hp)
    sleep "$delay"
    kill -9 $hp 2>/dev/null
    wait $hp 2>/dev/null
    gone $hp "kill -9 after $delay s"
done
# kill -9 at the worst moments of setup, held there by strace: just after hutch made its first
# cgroup directory, with the cgroup2 group made but not yet cloned into, and with every group
# made but the sandbox not yet told (on v1 and hybrid: before it joins the v1 groups; pure v2
# clones it into its one group). strace holds hutch there for up to $hold_s s, and the test kills
# it as soon as the directories are there: no race with a short window, which a TCG guest lost.
hold_s=20
# kill_in_setup WHAT MIN_DIRS STRACE-ARGS...
kill_in_setup() {
    local what=$1 min=$2; shift 2
    # LeakSanitizer cannot work under ptrace
    ASAN_OPTIONS=detect_leaks=0 strace -f -qq -o "$scratch/strace.log" "$@" "$HUTCH" run -- true \
        >"$scratch/setup.out" 2>&1 &
    local sp=$! hp="" i n
    bg_pids+=($sp)
    # strace forks test children of its own first: hutch is the child running $HUTCH
    local exe c
    exe=$(readlink -f "$HUTCH")
    for i in $(seq 500); do
        for c in $(cat /proc/$sp/task/$sp/children 2>/dev/null); do
            [ "$(readlink /proc/"$c"/exe 2>/dev/null)" = "$exe" ] && hp=$c
        done
        [ -n "$hp" ] && break
        sleep 0.01
    done
    # until the directories are there (hutch is held past that point), at most $hold_s s
    local t0
    t0=$(now_ms)
    while [ "$(n_dirs "$hp")" -lt "$min" ] && [ $(($(now_ms) - t0)) -lt $((hold_s * 1000)) ] &&
        [ -e /proc/"$hp" ]; do
        sleep 0.02
    done
    n=$(n_dirs "$hp")
    kill -9 "$hp"
    wait "$sp" 2>/dev/null
    if [ "$n" -ge "$min" ]; then ok "$what: hutch held with $n cgroup directories made"
    else
        not_ok "$what: hutch held with $n cgroup directories made (want >= $min)"
        diag "hutch pid '$hp' said: $(head -c 500 "$scratch/setup.out")" "strace: $(head -c 3000 "$scratch/strace.log")"
    fi
    gone "$hp" "$what"
    # what hutch left behind, the test does not: empty cgroups, removed by their exact name
    for d in $(run_dirs "$hp"); do rmdir "$d"; done
}
if command -v strace >/dev/null; then
    # -P: only the mkdirs in hutch's own cgroup parents (v1, hybrid and pure v2), so the first
    # one held is the first run-PID-N directory, whatever hutch made before (its run directory).
    kill_in_setup "kill -9 while creating the cgroups" 1 \
        -P /sys/fs/cgroup/hutch -P /sys/fs/cgroup/unified/hutch -P /sys/fs/cgroup/memory/hutch \
        -P /sys/fs/cgroup/pids/hutch -e trace=mkdir,mkdirat \
        -e inject=mkdir,mkdirat:delay_exit=${hold_s}s:when=1
    # The keeper is forked (clone, not clone3) before the first mkdir; then the cgroup2 group,
    # the clone3, and on v1 and hybrid the v1 groups, made while the child builds its root and
    # handed to it by the second sendmsg.
    kill_in_setup "kill -9 with the cgroup2 group made, before the clone" 1 \
        -e trace=clone3 -e inject=clone3:delay_enter=${hold_s}s:when=1
    # pure v2: the one cgroup2 group is all there is
    kill_in_setup "kill -9 with every cgroup made, before the child is told" \
        "$([ "$cgroup_mode" = v2 ] && echo 1 || echo 3)" \
        -e trace=sendmsg -e inject=sendmsg:delay_enter=${hold_s}s:when=2
else
    skip "kill -9 during setup" "no strace"
fi
is "$(host_mounts)" "$mounts_before" "the host's mount table is as before"

# --- kill -9 while the template is built -------------------------------------------------------
# With a fresh state directory, the first run builds the base template (a few hundred ms) in a
# temporary tree that is renamed into place when complete. kill -9 in the middle leaves that tree
# behind; the next build must remove it, whoever left it.
chmod 755 "$scratch" # sandboxes must reach the templates of the state directories made under it
ver=$(cd "$HUTCH_STATE_DIR/templates" && ls -d base-v* | head -n 1)
st=$scratch/state-planted
mkdir -p "$st/templates/.$ver.99999/rootfs/etc" "$st/templates/.base-v1.1"
echo stale >"$st/templates/.$ver.99999/rootfs/etc/passwd"
echo keep >"$st/templates/keep"
is "$(ls -A "$st/templates" | words)" ".base-v1.1 .$ver.99999 keep" \
    "template: control: stale build trees (this version's, with a file, and an older one's) are there before the build"
out=$(HUTCH_STATE_DIR=$st hjson -- true); rc=$?
is "$(jfield "$out" status)/$rc" "OK/0" "template: the next run builds the template and is OK"
is "$(ls -A "$st/templates" | words)" ".lock $ver keep" \
    "template: the stale trees are gone; the lock, the template and other names are kept"
rm -rf "$st"

hits=0 left=0 bad=0
for i in $(seq 20); do
    st=$scratch/state-kill$i
    mkdir "$st"
    HUTCH_STATE_DIR=$st "$HUTCH" run -- true >/dev/null 2>&1 &
    hp=$!; bg_pids+=($hp)
    # until the build has begun (bounded), then 0 to 29 ms more
    for j in $(seq 300); do compgen -G "$st/templates/.base-v*" >/dev/null && break; sleep 0.01; done
    sleep "0.0$(printf %02d $(((i * 7) % 30)))"
    kill -9 $hp 2>/dev/null
    wait $hp 2>/dev/null
    compgen -G "$st/templates/.base-v*" >/dev/null && hits=$((hits + 1))
    HUTCH_STATE_DIR=$st "$HUTCH" run -- true >/dev/null 2>>"$scratch/rebuild.err" || bad=$((bad + 1))
    compgen -G "$st/templates/.base-*" >/dev/null && left=$((left + 1))
    [ -d "$st/templates/$ver" ] || bad=$((bad + 1))
    rm -rf "$st"
done
if [ "$hits" -ge 5 ]; then ok "template: control: $hits of 20 kills -9 mid-build left a temporary tree"
else not_ok "template: control: $hits of 20 kills -9 mid-build left a temporary tree (want >= 5)"; fi
is "$bad" 0 "template: after each kill the next run builds the template and exits 0"
[ "$bad" -gt 0 ] && diag "$(head -n 5 "$scratch/rebuild.err")"
is "$left" 0 "template: after each kill and one normal run, no .base-* tree is left"

# --- 200 in a row -----------------------------------------------------------------------------

fast=$ROOT/build/hutch
if [ ! -x "$fast" ]; then
    skip "200 runs in a row" "build/hutch is not built"
else
    "$fast" run -- true  # the template exists before the first snapshot
    snap_dirs() { run_cgroup_dirs '*' | sort; }
    snap_procs() { ps -e -o pid=,stat= | awk '$2 !~ /^Z/ {print $1}' | sort; }
    snap_tree() { find "$HUTCH_RUN_DIR" "$HUTCH_STATE_DIR" 2>/dev/null | sort; }
    snap_tmp() { ls -A /tmp | sort; }
    snap_dirs >"$scratch/dirs.0"; snap_procs >"$scratch/procs.0"; snap_tree >"$scratch/tree.0"
    snap_tmp >"$scratch/tmp.0"
    m0=$(host_mounts)
    : >"$scratch/pids"
    fails=0
    t0=$(now_ms)
    for i in $(seq 200); do
        "$fast" run -- /bin/true 2>>"$scratch/loop.err" &
        p=$!
        echo "$p" >>"$scratch/pids"
        wait $p || fails=$((fails + 1))
    done
    t1=$(now_ms)
    is "$fails" 0 "200 runs in a row: each exits 0 ($((t1 - t0)) ms)"
    [ "$fails" -gt 0 ] && diag "$(head -n 5 "$scratch/loop.err")"
    # a directory of ours: run-PID-N for a PID of the loop (all dead by now)
    ours() { grep -E "/run-($(paste -sd'|' "$scratch/pids"))-[0-9]+$"; }
    left=""
    for i in $(seq 100); do
        left=$(snap_dirs | comm -13 "$scratch/dirs.0" - | ours)
        [ -z "$left" ] && break
        sleep 0.02
    done
    is "$left" "" "200 runs: no run-* cgroup directory of theirs left"
    n0=$(wc -l <"$scratch/dirs.0"); n1=$(snap_dirs | wc -l)
    diag "run-* directories on the host (all sessions): $n0 before, $n1 after"
    # one scan of every process's cgroups for all 200 runs at once (their groups are gone, so
    # run_procs, which reads the groups, would see nothing by construction)
    leaked=$(alive $(grep -lE -- "/hutch/run-($(paste -sd'|' "$scratch/pids"))-" /proc/[0-9]*/cgroup 2>/dev/null |
        cut -d/ -f3 | sort -un))
    is "$leaked/$(lock_holders)" "/" "200 runs: no process left in their cgroups, none holding the lock"
    new_procs=$(snap_procs | comm -13 "$scratch/procs.0" -)
    ours_new=""
    for p in $new_procs; do
        u=$(awk '/^Uid:/ {print $2}' /proc/"$p"/status 2>/dev/null) || continue
        # a process in a sandbox's uid range that is in no live run's cgroup
        if [ -n "$u" ] && [ "$u" -ge 1073741824 ] && ! grep -q '/hutch/run-' /proc/"$p"/cgroup 2>/dev/null; then
            ours_new="$ours_new $p"
        fi
    done
    is "$ours_new" "" "200 runs: no new process with a sandbox uid outside a run's cgroup"
    diag "processes on the host: $(wc -l <"$scratch/procs.0") before, $(snap_procs | wc -l) after"
    is "$(host_mounts)" "$m0" "200 runs: the host's mount table has as many entries as before ($m0)"
    is "$(snap_tree | diff "$scratch/tree.0" - | head -n 5)" "" "200 runs: \$HUTCH_RUN_DIR and \$HUTCH_STATE_DIR unchanged"
    # /tmp is shared with other sessions: entries they make (mktemp names, their tools) are not
    # ours; anything a sandbox wrote through would be owned by a sandbox uid.
    new_tmp=$(snap_tmp | comm -13 "$scratch/tmp.0" -)
    suspicious=""
    while IFS= read -r e; do
        [ -z "$e" ] && continue
        u=$(stat -c %u "/tmp/$e" 2>/dev/null) || continue
        # other sessions' scratch directories are hutch-NAME.XXXXXX (mktemp), owned by root
        if [ "$u" -ge 1073741824 ] || [[ $e =~ ^(run-|hutch) && ! $e =~ ^hutch-[a-z_-]+\.[A-Za-z0-9]{6}$ ]]; then
            suspicious="$suspicious $e"
        fi
    done <<<"$new_tmp"
    is "$suspicious" "" "200 runs: nothing new in /tmp from hutch or a sandbox"
    diag "/tmp entries: $(wc -l <"$scratch/tmp.0") before, $(snap_tmp | wc -l) after"
fi

done_testing
