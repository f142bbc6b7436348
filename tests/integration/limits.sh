# hutch run: every verdict, the limits behind them (as the kernel sees them, from the host and
# from inside), misbehaving programs (fork, memory, disk, CPU and output bombs), exit statuses and
# usage errors.
. "$(dirname "$0")/lib.sh"

use_scratch limits

# bg_run OUT ARGS...: hutch run --json ARGS in the background, JSON to OUT; its pid in BG_PID
# (the run's cgroup is hutch/run-BG_PID-0). bg_wait OUT: waits for it, exit status to OUT.rc.
bg_run() {
    local out=$1; shift
    "$HUTCH" run --json "$@" >"$out" 2>"$out.err" &
    BG_PID=$!
    bg_pids+=("$BG_PID")
}
bg_wait() { wait "$BG_PID"; echo $? >"$1.rc"; }
# cgroup_file CTRL PID FILE: path of FILE in the cgroup of the run whose hutch pid is PID (its
# CTRL hierarchy on v1 and hybrid, its one group on pure v2).
cgroup_file() {
    local hier=/sys/fs/cgroup/$1
    [ "$cgroup_mode" = v2 ] && hier=/sys/fs/cgroup
    ls -d "$hier"/hutch/run-"$2"-*/"$3" 2>/dev/null | head -n 1
}
# wait_for CMD...: polls (5 s) until CMD prints something, and prints it.
wait_for() {
    local i out
    for i in $(seq 250); do
        out=$("$@") && [ -n "$out" ] && { echo "$out"; return 0; }
        sleep 0.02
    done
    return 1
}

# --- verdicts, with the fields that go with them -------------------------------------------

out=$(hjson -- true); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" exit_code)/$(jfield "$out" signal)/$rc" "OK/0/null/0" \
    "true: OK, exit_code 0, no signal, hutch exits 0"
is "$(jfield "$out" message)" "" "OK: empty message"

out=$(hjson -- sh -c 'exit 3'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" exit_code)/$rc" "RE/3/1" "exit 3: RE, exit_code 3, hutch exits 1"
like "$(jfield "$out" message)" "status 3" "RE: message gives the status"

out=$(hjson -- sh -c 'kill -SEGV $$'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" signal)/$(jfield "$out" exit_code)/$rc" "SG/11/null/1" \
    "kill -SEGV: SG, signal 11, exit_code null, hutch exits 1"
out=$(hjson $(probe hog) -- /tmp/hog segv); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" signal)/$rc" "SG/11/1" "a real null dereference: SG, signal 11"
like "$(jfield "$out" message)" "signal 11" "SG: message names the signal"

t0=$(now_ms)
out=$(hjson --timeout 1 -- sleep 30); rc=$?
t1=$(now_ms)
is "$(jfield "$out" status)/$rc" "TO/1" "wall timeout: TO, hutch exits 1"
wall=$(jfield "$out" wall_ms)
if [ "$wall" -ge 900 ] && [ "$wall" -le 3000 ]; then ok "wall timeout: wall_ms $wall in [900, 3000]"
else not_ok "wall timeout: wall_ms $wall in [900, 3000]"; fi
if [ $((t1 - t0)) -lt 5000 ]; then ok "wall timeout: returned after $((t1 - t0)) ms, not 30 s"
else not_ok "wall timeout: returned after $((t1 - t0)) ms, not 30 s"; fi
like "$(jfield "$out" message)" "wall-clock limit of 1.000 s" "wall timeout: message says which limit"

t0=$(now_ms)
out=$(hjson --cpu-time 1 --timeout 20 -- sh -c 'while :; do :; done'); rc=$?
t1=$(now_ms)
is "$(jfield "$out" status)/$rc" "TO/1" "CPU timeout (shell loop): TO, hutch exits 1"
cpu=$(jfield "$out" cpu_ms)
# under 2000: the supervisor stopped it, not the kernel's RLIMIT_CPU backstop (2 s for 1 s)
if [ "$cpu" -ge 1000 ] && [ "$cpu" -lt 1800 ]; then ok "CPU timeout: cpu_ms $cpu in [1000, 1800)"
else not_ok "CPU timeout: cpu_ms $cpu in [1000, 1800)"; fi
is "$(jfield "$out" signal)" null "CPU timeout: no SIGXCPU (the backstop did not have to act)"
if [ $((t1 - t0)) -lt 6000 ]; then ok "CPU timeout: stopped after $((t1 - t0)) ms, long before --timeout 20"
else not_ok "CPU timeout: stopped after $((t1 - t0)) ms, long before --timeout 20"; fi
like "$(jfield "$out" message)" "CPU time limit of 1.000 s" "CPU timeout: message says which limit"
out=$(hjson $(probe hog) --cpu-time 500ms --timeout 20 -- /tmp/hog spin); rc=$?
is "$(jfield "$out" status)/$rc" "TO/1" "CPU timeout (compiled spin, 500ms): TO"
cpu=$(jfield "$out" cpu_ms)
if [ "$cpu" -ge 500 ] && [ "$cpu" -lt 1500 ]; then ok "CPU timeout 500ms: cpu_ms $cpu in [500, 1500)"
else not_ok "CPU timeout 500ms: cpu_ms $cpu in [500, 1500)"; fi

# Memory charged to sandboxes (anon and tmpfs) is counted in hutch's parent memory cgroup; what
# the host calls free memory is no measure on this VM (freed pages go back to the hypervisor).
memory_stat=/sys/fs/cgroup/memory/hutch/memory.stat
[ "$cgroup_mode" = v2 ] && memory_stat=/sys/fs/cgroup/hutch/memory.stat
sandbox_mem() {
    awk '$1 == "total_rss" || $1 == "total_shmem" || $1 == "anon" || $1 == "shmem" {n += $2}
        END {print n + 0}' "$memory_stat" 2>/dev/null
}
sbm_before=$(sandbox_mem)
out=$(hjson --memory 64M -- python3 -c 'b = b"x" * (256 << 20); print(len(b))'); rc=$?
is "$(jfield "$out" status)/$rc" "ML/1" "python touching 256 MiB under --memory 64M: ML, hutch exits 1"
oom=$(jfield "$out" oom_kills)
if [ "$oom" -ge 1 ]; then ok "ML: oom_kills $oom >= 1"; else not_ok "ML: oom_kills $oom >= 1"; fi
is "$(jfield "$out" stdout)" "" "ML: python never got to print"
peak=$(jfield "$out" memory_peak_bytes)
if [ "$peak" -ge $((32 << 20)) ] && [ "$peak" -le $((64 << 20)) ]; then
    ok "ML: memory_peak_bytes $peak in [32 MiB, 64 MiB]"
else not_ok "ML: memory_peak_bytes $peak in [32 MiB, 64 MiB]"; fi
like "$(jfield "$out" message)" "memory limit of 67108864 bytes" "ML: message says which limit"
out=$(hjson $(probe hog) --memory 64M -- /tmp/hog mem 256); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" signal)/$rc" "ML/9/1" "probe touching 256 MiB under 64M: ML, SIGKILL"
out=$(hjson $(probe hog) --memory 64M -- /tmp/hog mem 32); rc=$?
is "$(jfield "$out" status)/$(echo $(jfield "$out" stdout))/$rc" "OK/touched 32/0" "probe touching 32 MiB under 64M: OK (the limit is not lower than asked)"
# The writable layer is tmpfs: its pages count toward --memory too, and they belong to no
# process, so the OOM killer may pick any process of the sandbox (init included).
out=$(hjson --memory 64M --disk 512M -- dd if=/dev/zero of=/tmp/big bs=1M count=400); rc=$?
is "$(jfield "$out" status)/$rc" "ML/1" "filling the tmpfs layer past --memory 64M: ML, hutch exits 1"
like "$(jfield "$out" message)" "memory limit" "tmpfs ML: message says which limit"
out=$(hjson -- true); rc=$?
is "$(jfield "$out" status)/$rc" "OK/0" "after the memory bombs a sandbox runs"
sbm_after=$(sandbox_mem)
for i in $(seq 50); do  # other sessions' sandboxes may come and go: let them
    [ "$sbm_after" -le $((sbm_before + (16 << 20))) ] && break
    sleep 0.1; sbm_after=$(sandbox_mem)
done
if [ -f "$memory_stat" ]; then
    if [ "$sbm_after" -le $((sbm_before + (16 << 20))) ]; then
        ok "memory bombs: sandbox anon+tmpfs memory back to $sbm_after bytes (was $sbm_before)"
    else not_ok "memory bombs: sandbox anon+tmpfs memory back to $sbm_after bytes (was $sbm_before)"; fi
else
    skip "memory bombs: sandbox memory back" "no v1 memory hierarchy"
fi

# tmpfs pages that outlived the sandbox would show as host Shmem: fill 300 MiB, then look.
shm_before=$(awk '/^Shmem:/ {print $2}' /proc/meminfo)
out=$(hjson --memory 512M --disk 400M -- sh -c \
    'dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>/dev/null; awk "/^Shmem:/ {print \$2}" /proc/meminfo'); rc=$?
shm_during=$(jfield "$out" stdout)
shm_after=$(awk '/^Shmem:/ {print $2}' /proc/meminfo)
for i in $(seq 50); do  # as above: other sessions' sandboxes have tmpfs layers too
    [ "$shm_after" -le $((shm_before + 32 * 1024)) ] && break
    sleep 0.1; shm_after=$(awk '/^Shmem:/ {print $2}' /proc/meminfo)
done
is "$(jfield "$out" status)/$rc" "OK/0" "300 MiB in the writable layer under --disk 400M --memory 512M: OK"
if [ "${shm_during:-0}" -ge $((shm_before + 250 * 1024)) ]; then
    ok "the 300 MiB showed as host Shmem during the run (${shm_before} -> ${shm_during} kB)"
else not_ok "the 300 MiB showed as host Shmem during the run (${shm_before} -> ${shm_during} kB)"; fi
if [ "$shm_after" -le $((shm_before + 32 * 1024)) ]; then
    ok "host Shmem back after the run (${shm_before} -> ${shm_after} kB): the tmpfs is gone"
else not_ok "host Shmem back after the run (${shm_before} -> ${shm_after} kB): the tmpfs is gone"; fi

out=$(hjson --output-limit 10K -- yes); rc=$?
is "$(jfield "$out" status)/$rc" "OL/1" "yes under --output-limit 10K: OL, hutch exits 1"
is "$(jfield "$out" stdout_truncated)/$(jfield "$out" stderr_truncated)" "true/false" "OL: stdout_truncated only"
# --json counts the output as the JSON writes it: "y\n" is "y\\n", 3 bytes
is "$(jpy "$out" 'len(json.dumps(o["stdout"], ensure_ascii=False).encode()) - 2')/$(jpy "$out" 'len(o["stdout"])')" \
    "10240/6827" "OL: stdout kept takes exactly 10240 bytes in the JSON (3413 lines and a y)"
is "$(jpy "$out" 'set(o["stdout"])=={"y","\n"}')" true "OL: what was kept is yes's output"
like "$(jfield "$out" message)" "output beyond the limit of 10240" "OL: message says which limit"
out=$(hjson --output-limit 10K -- sh -c 'echo start; yes err >&2'); rc=$?
is "$(jfield "$out" status)/$rc" "OL/1" "stderr flood: OL"
is "$(jfield "$out" stderr_truncated)/$(jfield "$out" stdout_truncated)/$(jpy "$out" 'len(json.dumps(o["stderr"]))-2')" \
    "true/false/10240" "stderr flood: stderr_truncated, exactly 10240 bytes of JSON kept"
is "$(jfield "$out" stdout)" "start" "stderr flood: stdout intact"
out=$(hjson --output-limit 10K -- sh -c 'head -c 10240 /dev/zero | tr "\0" y'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" stdout_truncated)/$(jpy "$out" 'len(o["stdout"])')/$rc" \
    "OK/false/10240/0" "exactly 10240 bytes under --output-limit 10K: OK, not truncated"
out=$(hjson --output-limit 10K -- sh -c 'head -c 10241 /dev/zero | tr "\0" y'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" stdout_truncated)/$(jpy "$out" 'len(o["stdout"])')" \
    "OL/true/10240" "10241 bytes under --output-limit 10K: OL, cut at 10240"
hrun --output-limit 10K -- yes >"$scratch/yes.out" 2>/dev/null; rc=$?
n=$(wc -c <"$scratch/yes.out")
is "$n/$rc" "10240/1" "without --json: 10240 bytes reach our stdout, hutch exits 1"

out=$(hjson -- no-such-command-xyz); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" exit_code)/$rc" "RE/127/1" "command not found: RE, exit_code 127, hutch exits 1"
like "$(jfield "$out" message)" "no-such-command-xyz" "command not found: message names the command"

touch "$scratch/a-file"
out=$(HUTCH_STATE_DIR=$scratch/a-file hjson -- true); rc=$?
is "$(jfield "$out" status)/$rc" "XX/2" "state directory is a file: XX, hutch exits 2"
like "$(jfield "$out" message)" "a-file.*Not a directory" "XX: message names the path and the reason"
out=$(HUTCH_RUN_DIR=$scratch/a-file hjson -- true); rc=$?
is "$(jfield "$out" status)/$rc" "XX/2" "run directory is a file: XX, hutch exits 2"
like "$(jfield "$out" message)" "uid-slots.lock" "XX: message names the lock file"
err=$(HUTCH_STATE_DIR=$scratch/a-file hrun -- true 2>&1 >/dev/null); rc=$?
like "$err/$rc" "^hutch: XX: .*Not a directory/2$" "XX without --json: one line on stderr, exit 2"

# The other mode forced: on hybrid, cgroup2 has no controllers (v2); on pure v2 no v1 hierarchy
# is mounted (hybrid). Either must fail clearly and leave nothing.
other=v2
[ "$cgroup_mode" = v2 ] && other=hybrid
export HUTCH_CGROUP_MODE=$other
bg_run "$scratch/v2" --memory 64M -- true
unset HUTCH_CGROUP_MODE
v2pid=$BG_PID
bg_wait "$scratch/v2"
out=$(cat "$scratch/v2")
is "$(jfield "$out" status)/$(cat "$scratch/v2.rc")" "XX/2" "HUTCH_CGROUP_MODE=$other on this $cgroup_mode host: XX, exit 2"
like "$(jfield "$out" message)" "memory" "forced $other: message names the missing controller"
is "$(run_cgroup_dirs "$v2pid")" "" "forced $other: no cgroup directory left behind"

# --- exit statuses and usage errors -------------------------------------------------------

hrun -- true >/dev/null 2>&1; is "$?" 0 "exit status 0 for OK"
err=$(hrun -- false 2>&1); rc=$?
is "$rc" 1 "exit status 1 for RE"
is "$err" "hutch: RE: exited with status 1" "RE without --json: one line on stderr"
is "$(hrun -- echo hello 2>/dev/null)" "hello" "without --json the output passes through"
# usage ARGS... : exit 2, a message on stderr, nothing on stdout
usage_case() {
    local want=$1; shift
    local out err rc
    out=$("$HUTCH" run "$@" 2>"$scratch/usage.err"); rc=$?
    err=$(cat "$scratch/usage.err")
    if [ "$rc" = 2 ] && [ -z "$out" ] && [[ $err =~ $want ]] && [[ $err != *AddressSanitizer* ]]; then
        ok "usage: hutch run $* -> exit 2: $err"
    else
        not_ok "usage: hutch run $*"
        diag "rc=$rc stdout='$out' stderr='$err' want stderr =~ $want"
    fi
}
usage_case "unknown option.*--bogus" --json --bogus -- true
usage_case "--memory abc: expected a size" --json --memory abc -- true
usage_case "--timeout 0: expected a positive duration" --json --timeout 0 -- true
usage_case "--env FOO: expected NAME=VALUE" --json --env FOO -- true
usage_case "--file nocolon: expected HOST:SANDBOX" --json --file nocolon -- true
usage_case "no command given" --json
usage_case "no command given" --json --
usage_case "missing value: --timeout" --timeout
usage_case "--lang cobol" --lang cobol --code x
usage_case "need --lang" --code 'print(1)' -- true
usage_case "--pids 0" --pids 0 -- true
usage_case "--cwd tmp: must be an absolute" --cwd tmp -- true
out=$(hrun --help); rc=$?
like "$out/$rc" "usage: hutch run.*--output-limit.*/0$" "--help: usage on stdout, exit 0"

# --- limits as the kernel sees them -------------------------------------------------------

# The sandbox waits for a line on its stdin (a FIFO we hold open) until the files are read: a
# fixed `sleep 2` was over before a TCG guest had read them. (Not bg_run: a command started
# with & reads /dev/null unless it has a redirection of its own.)
mkfifo "$scratch/lim.go"
exec {lim_go}<>"$scratch/lim.go"
"$HUTCH" run --json --memory 100M --pids 64 --nofile 64 --cpu-time 5 --timeout 120 -- \
    sh -c 'ulimit -n; ulimit -Hn; ulimit -St; ulimit -Ht; read -r _' \
    <"$scratch/lim.go" >"$scratch/lim" 2>"$scratch/lim.err" &
BG_PID=$! lim_pid=$!
bg_pids+=("$BG_PID")
if [ "$cgroup_mode" = v2 ]; then
    f=$(wait_for cgroup_file memory "$lim_pid" memory.max)
    is "$(cat "$f" 2>/dev/null)" 104857600 "--memory 100M: memory.max of the run's cgroup"
    is "$(cat "$(cgroup_file memory "$lim_pid" memory.swap.max)" 2>/dev/null)" 0 \
        "--memory 100M: memory.swap.max 0 (no swap on top)"
    is "$(cat "$(cgroup_file memory "$lim_pid" memory.oom.group)" 2>/dev/null)" 1 \
        "--memory 100M: memory.oom.group 1 (an OOM kill takes the whole sandbox)"
else
    f=$(wait_for cgroup_file memory "$lim_pid" memory.limit_in_bytes)
    is "$(cat "$f" 2>/dev/null)" 104857600 "--memory 100M: memory.limit_in_bytes of the run's cgroup"
    f=$(cgroup_file memory "$lim_pid" memory.memsw.limit_in_bytes)
    if [ -n "$f" ]; then is "$(cat "$f")" 104857600 "--memory 100M: memory.memsw.limit_in_bytes too (no swap on top)"
    else skip "--memory 100M: memsw" "no swap accounting on this kernel"; fi
fi
f=$(cgroup_file pids "$lim_pid" pids.max)
is "$(cat "$f" 2>/dev/null)" 64 "--pids 64: pids.max of the run's cgroup"
echo go >&"$lim_go"
exec {lim_go}>&-
bg_wait "$scratch/lim"
out=$(cat "$scratch/lim")
is "$(jfield "$out" status)/$(cat "$scratch/lim.rc")" "OK/0" "the run with the limits: OK"
is "$(echo $(jfield "$out" stdout))" "64 64 6 7" \
    "inside: ulimit -n 64 (soft and hard); RLIMIT_CPU backstop 6/7 s for --cpu-time 5"
out=$(hjson -- sh -c 'ulimit -n; ulimit -St'); rc=$?
is "$(echo $(jfield "$out" stdout))" "1024 31" "defaults inside: nofile 1024, RLIMIT_CPU 31 s"

# --- fork bombs ---------------------------------------------------------------------------

# Looked at while it bombs: pids.current read until it is past half the limit (for as long as the
# run lasts), not once after a fixed 2 s, which under TCG came after the run's end.
bomb_timeout=6
t0=$(now_ms)
bg_run "$scratch/bomb" --pids 64 --timeout "$bomb_timeout" -- bash -c ':(){ :|:& };:; sleep 30'
bomb_pid=$BG_PID
f=$(wait_for cgroup_file pids "$bomb_pid" pids.max)
is "$(cat "$f" 2>/dev/null)" 64 "fork bomb: pids.max of its cgroup is 64"
cur=
while [ -d "${f%/*}" ] && [ $(($(now_ms) - t0)) -lt $((bomb_timeout * 1000)) ]; do
    cur=$(<"${f%/*}/pids.current") 2>/dev/null
    [ "${cur:-0}" -ge 32 ] && break
    sleep 0.1
done
if [ -n "$cur" ] && [ "$cur" -ge 32 ] && [ "$cur" -le 64 ]; then
    ok "fork bomb: pids.current $cur in [32, 64] (it is bombing, and held)"
else not_ok "fork bomb: pids.current '$cur' in [32, 64] (it is bombing, and held)"; fi
bg_wait "$scratch/bomb"
t1=$(now_ms)
out=$(cat "$scratch/bomb")
like "$(jfield "$out" status)/$(cat "$scratch/bomb.rc")" "^(TO|RE)/1$" "fork bomb under --pids 64: ends TO or RE"
if [ $((t1 - t0)) -lt $(((bomb_timeout + 5) * 1000)) ]; then ok "fork bomb: over after $((t1 - t0)) ms (--timeout $bomb_timeout)"
else not_ok "fork bomb: over after $((t1 - t0)) ms (--timeout $bomb_timeout)"; fi
check "host can still fork after the bomb" sh -c '/bin/true & wait $!'
is "$(run_cgroup_dirs "$bomb_pid")" "" "fork bomb: its cgroups are gone"
out=$(hjson $(probe hog) --pids 64 --timeout 20 -- /tmp/hog fork); rc=$?
# 64 = init + the hog + 62 children
is "$(jfield "$out" status)/$(jfield "$out" stdout | cut -d, -f1)/$rc" "OK/forked 62/0" \
    "fork loop under --pids 64: exactly 62 children, then fork fails"
out=$(hjson -- true); rc=$?
is "$(jfield "$out" status)/$rc" "OK/0" "after the bombs a sandbox runs"

# --- disk ---------------------------------------------------------------------------------

avail() { df -k --output=avail "$1" | tail -n 1; }
root_before=$(avail /); tmp_before=$(avail /tmp)
out=$(hjson --disk 16M -- sh -c '
    dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; echo "dd=$?"; echo "size=$(stat -c %s /tmp/fill)"
    rm /tmp/fill
    dd if=/dev/zero of=/home/user/fill bs=1M count=64 2>&1; echo "dd=$?"; echo "size=$(stat -c %s /home/user/fill)"
    dd if=/dev/zero of=/tmp/more bs=1M count=1 2>&1; echo "dd=$?"
    echo still-writing'); rc=$?
root_after=$(avail /); tmp_after=$(avail /tmp)
so=$(jfield "$out" stdout)
is "$(jfield "$out" status)/$rc" "OK/0" "disk fill under --disk 16M: the program runs on (OK)"
is "$(grep -c 'No space left on device' <<<"$so")" 3 "disk fill: dd in /tmp, /home/user, then /tmp again gets ENOSPC"
is "$(grep '^dd=' <<<"$so" | tr '\n' ' ')" "dd=1 dd=1 dd=1 " "disk fill: each dd fails"
sizes=$(grep '^size=' <<<"$so" | cut -d= -f2 | tr '\n' ' ')
read -r s1 s2 <<<"$sizes"
if [ "${s1:-0}" -ge $((12 << 20)) ] && [ "${s1:-0}" -le $((16 << 20)) ] &&
    [ "${s2:-0}" -ge $((12 << 20)) ] && [ "${s2:-0}" -le $((16 << 20)) ]; then
    ok "disk fill: /tmp and /home/user each took 12..16 MiB before ENOSPC ($sizes)"
else not_ok "disk fill: /tmp and /home/user each took 12..16 MiB before ENOSPC ($sizes)"; fi
like "$so" "still-writing" "disk fill: stdout still works when the disk is full"
d_root=$((root_before - root_after)); d_tmp=$((tmp_before - tmp_after))
if [ "${d_root#-}" -le 8192 ] && [ "${d_tmp#-}" -le 8192 ]; then
    ok "host free space on / and /tmp unchanged (${d_root} kB, ${d_tmp} kB)"
else not_ok "host free space on / and /tmp unchanged (${d_root} kB, ${d_tmp} kB)"; fi

# A size the kernel would round past 2^64 is refused, never wrapped: tmpfs took
# size=18446744073709551615 as 0 pages, which it reads as no limit at all.
out=$("$HUTCH" run --disk 18446744073709551615 -- df -k / 2>&1); rc=$?
if [ "$rc" = 2 ] && ! grep -q '^overlay  *0 ' <<<"$out"; then
    ok "--disk 2^64-1: refused (exit 2), not an unlimited writable layer"
else
    not_ok "--disk 2^64-1: refused (exit 2), not an unlimited writable layer"
    diag "$out"
fi
out=$("$HUTCH" run --disk 2T -- df -k / 2>&1)
like "$out" "overlay +2147483648 " "control: --disk 2T gives a writable layer of 2 TiB"

# --nofile above hutch's own hard limit: raised for the sandbox when hutch holds
# CAP_SYS_RESOURCE, else refused with the reason (it used to be a bare EPERM, XX).
hard=$(ulimit -Hn)
want=$((hard + 100))
[ "$want" -le 1048576 ] || want=1048576
out=$("$HUTCH" run --nofile 512 -- sh -c 'ulimit -n' 2>&1)
is "$out" 512 "--nofile 512: the program's open-file limit is 512"
out=$("$HUTCH" run --nofile "$want" -- sh -c 'ulimit -n' 2>&1); rc=$?
capeff=$(sed -n 's/^CapEff:\t//p' /proc/self/status)
if (( (0x$capeff >> 24) & 1 )); then
    is "$out/$rc" "$want/0" "--nofile $want above our hard limit $hard: raised (we hold CAP_SYS_RESOURCE)"
else
    like "$rc/$out" "^2/hutch: XX: .*above this process's own hard limit $hard.*CAP_SYS_RESOURCE" \
        "--nofile $want above our hard limit $hard: refused, saying why (no CAP_SYS_RESOURCE here)"
fi

done_testing
