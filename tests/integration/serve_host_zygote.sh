#!/usr/bin/env bash
# The host's python zygote (src/serve/host_zygote.h, src/jail/enter.h): a kernel forked outside
# every sandbox that enters one must be as confined as any command of that sandbox, and carry
# nothing of the zygote's, the daemon's or another sandbox's. Each check attempts what a kernel
# (or a cell in it) could use: ids, capabilities, no_new_privs, seccomp, fds, the environment it
# started with, namespaces, cgroups, rlimits, signals to init, other runs' secrets in its memory,
# the zygote's children and fds, the zygote's death and the daemon's stop.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-host-zygote
SECRET=daemon-secret-$$-$RANDOM
OUT=$(mktemp -d /tmp/hutch-hz.XXXXXX)
trap 'rm -rf "$OUT"; serve_cleanup' EXIT
daemon_answers HUTCH_POOL=0 HUTCH_TEST_SECRET="$SECRET"

run() { curl -s -m "${2:-60}" -H "X-API-KEY: $KEY" -X POST "$U/run" -d "$1"; }
# python CODE [ENV_JSON]: a one-shot python run; its stdout, else its error
python_run() {
    local body env=${2:-}
    [ -n "$env" ] || env='{}'
    body=$(python3 -c 'import json,sys; print(json.dumps({"code": sys.argv[1], "env_vars": json.loads(sys.argv[2])}))' "$1" "$env")
    run "$body" | python3 -c 'import json,sys
out, err = [], []
for l in sys.stdin:
    m = json.loads(l)
    if m["type"] == "stdout": out.append(m["text"])
    if m["type"] == "error": err.append("%s: %s" % (m["name"], m["value"]))
print("".join(out) if out else "ERROR " + " ".join(err))'
}
zygote_pid() { pgrep -P "$daemon" -f 'python_zygote.py --host' | head -n1; }
# The zygote starts with the daemon; its imports take a second or two. A kernel forked from it
# has a parent outside the sandbox: its PPid reads 0 (a cold kernel's is the stub's init, 1).
PPID_CODE='print([l.split()[1] for l in open("/proc/self/status") if l.startswith("PPid:")][0])'
forked=
for _ in $(seq 60); do
    [ "$(python_run "$PPID_CODE")" = 0 ] && { forked=yes; break; }
    sleep 0.5
done
[ -n "$forked" ] && ok "a run's kernel comes from the host's zygote (its parent is outside the sandbox)" ||
    { not_ok "a run's kernel comes from the host's zygote"; tail -20 "$LOG"; done_testing; exit; }
ZPID=$(zygote_pid)
like "$ZPID" '^[0-9]+$' "the zygote is the daemon's child (pid $ZPID)"

# ---------------------------------------------------------------- inside: what the kernel is
FACTS='import ctypes, json, os, socket, sys
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
fds = {}
for f in os.listdir("/proc/self/fd"):
    try:
        fds[f] = os.readlink("/proc/self/fd/" + f)
    except OSError:
        pass
stubs = [int(p) for p in os.listdir("/proc") if p.isdigit() and
         open("/proc/%s/comm" % p).read().strip() == "kernel-stub"]
try:
    os.kill(stubs[0], 0)  # the stub of its own context: the same uid, another Landlock domain
    signal_stub = "allowed"
except PermissionError:
    signal_stub = "refused"
except IndexError:
    signal_stub = "no stub"
libc = ctypes.CDLL(None, use_errno=True)
# the environment block the process started with (the zygote exec had it), read from memory: a
# non-dumpable process may not open its own /proc/self/environ
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
env_start, env_end = int(stat[47]), int(stat[48])
environ = ctypes.string_at(env_start, env_end - env_start).decode(errors="replace")
keyctl = libc.syscall(250, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
print(json.dumps({k: st[k].strip() for k in ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb",
                                             "NoNewPrivs", "Seccomp", "PPid")} | {
    "pandas": "pandas" in sys.modules, "fds": fds,
    "environ": environ,
    "env": dict(os.environ), "cwd": os.getcwd(), "hostname": socket.gethostname(),
    "ifaces": [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]],
    "limits": open("/proc/self/limits").read(), "cgroup": open("/proc/self/cgroup").read(),
    "dumpable": libc.prctl(3, 0, 0, 0, 0), "signal_stub": signal_stub,
    "keyctl": [keyctl, ctypes.get_errno()],
    "host_dir_seen": os.path.exists(os.environ["HOST_DIR"]),
    "usr_interp": os.path.isdir("/usr/local/lib/hutch/interp")}))'
facts=$(python_run "$FACTS" "{\"HOST_DIR\":\"$OUT\",\"RUN_VAR\":\"given\"}")
f() { jpy "$facts" "$1" 2>/dev/null; }
jpy "$facts" 1 >/dev/null 2>&1 || diag "the run said: $facts"
is "$(f 'o["Uid"] + "|" + o["Gid"]')" "$(printf '1000\t1000\t1000\t1000|1000\t1000\t1000\t1000')" \
    "uid and gid: the sandbox's user, every one of them"
is "$(f 'o["CapEff"] + o["CapPrm"] + o["CapBnd"] + o["CapAmb"]')" "$(printf '0%.0s' {1..64})" \
    "no capability: effective, permitted, bounding, ambient"
is "$(f 'o["NoNewPrivs"] + " " + o["Seccomp"]')" "1 2" "no_new_privs, and a seccomp filter"
is "$(f 'o["keyctl"][0] == -1')" "true" "... which refuses the keyring calls"
is "$(f 'o["PPid"]')" "0" "its parent is no process of the sandbox's"
is "$(f 'o["pandas"]')" "true" "pandas is imported already (the zygote's)"
is "$(f 'sorted(k for k, v in o["fds"].items() if not (v.startswith("pipe:") or v == "/dev/null" or v.startswith("/proc/")))')" \
    "[]" "every fd is a pipe of its own or /dev/null: no socket, pidfd, cgroup or host file of the zygote's"
is "$(f 'sorted(int(k) for k, v in o["fds"].items() if int(k) < 100 and not v.startswith("/proc/"))')" \
    "[0, 1, 2]" "... and below the kernel's own (100 and up) only stdio"
is "$(python3 -c 'import json,sys; o=json.loads(sys.argv[1]); print([w for w in sys.argv[2:] if w in o["environ"]])' "$facts" "$SECRET" "$KEY" HUTCH_API_KEY)" \
    "[]" "the environment it started with (its /proc/self/environ, the zygote's) holds nothing of the daemon's"
is "$(f '[o["env"].get("HOME"), o["env"].get("RUN_VAR"), [k for k in o["env"] if k.startswith(("HUTCH", "MPLCONFIG", "IPYTHON"))]]')" \
    '["/home/user", "given", []]' "its os.environ is the command's: HOME, the run's env_vars, nothing of the zygote's"
is "$(f 'o["cwd"] + " " + o["hostname"]')" "/home/user e2b" "cwd and hostname are the sandbox's"
is "$(f 'o["ifaces"]')" '["lo"]' "its network is the sandbox's: loopback only"
is "$(f 'o["host_dir_seen"]')" "false" "its root is the sandbox's: the host's $OUT is not there"
is "$(f 'o["usr_interp"]')" "true" "... and the sandbox's kernels' directory is"
like "$(f 'o["cgroup"]')" '0::/' "a cgroup namespace of its own, rooted at its group"
is "$(f 'o["dumpable"]')" "0" "non-dumpable: no process of the sandbox may open its /proc/PID/mem"
# Landlock's signal scoping is ABI 6 (kernel 6.12); below it every process of a sandbox's user may
# signal the others, the stub as any (doctor says so)
landlock_abi=$(python3 -c 'import ctypes
r = ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)
print(r if r > 0 else 0)')
if [ "$landlock_abi" -ge 6 ]; then
    is "$(f 'o["signal_stub"]')" "refused" "it may not signal its own stub, a process of the same uid (a Landlock domain of its own)"
else
    is "$(f 'o["signal_stub"]')" "allowed" "it may signal its own stub, as any process of its user (Landlock ABI $landlock_abi: no signal scoping)"
fi
# the same limits as a command the sandbox's init started (the bash kernel's: node would raise its
# soft open-file limit to the hard one)
cold_limits=$(run '{"code":"cat /proc/self/limits","language":"bash"}' |
    python3 -c 'import json,sys; print("".join(json.loads(l).get("text", "") for l in sys.stdin if json.loads(l)["type"] == "stdout"), end="")')
is "$(f 'o["limits"].strip()')" "$(printf '%s' "$cold_limits" | python3 -c 'import sys; print(sys.stdin.read().strip())')" \
    "its rlimits are exactly those of a command its sandbox's init started"

# ---------------------------------------------------------------- outside: where it is
# it sleeps while the checks below read its /proc entries: 6 s, stretched in the slow test guest
# (HUTCH_TEST_TIME_SCALE, tests/guest/suite.sh), where they took longer; under the one-shot
# sandbox's 60 s
nap=$((6 * ${HUTCH_TEST_TIME_SCALE:-1}))
[ "$nap" -gt 40 ] && nap=40
curl -s -N -m 60 -H "X-API-KEY: $KEY" -X POST "$U/run" \
    -d '{"code":"import os, time; print(os.getpid(), flush=True); time.sleep('"$nap"')"}' >"$OUT/sleeper" &
sleeper=$!
kpid=
for _ in $(seq 100); do
    inner=$(grep -o '"type":"stdout","text":"[0-9]*' "$OUT/sleeper" 2>/dev/null | grep -o '[0-9]*$')
    for c in $(pgrep -P "$ZPID"); do
        [ -n "$inner" ] && [ "$(awk '/^NSpid:/ {print $NF}' /proc/$c/status 2>/dev/null)" = "$inner" ] && kpid=$c
    done
    [ -n "$kpid" ] && break
    sleep 0.1
done
like "$kpid" '^[0-9]+$' "a running kernel is the zygote's child on the host (pid $kpid, $inner in its sandbox)"
stub=
for s in $(pgrep -x kernel-stub); do
    [ "$(cat /proc/$s/cgroup 2>/dev/null)" = "$(cat /proc/$kpid/cgroup 2>/dev/null)" ] && stub=$s
done
like "$stub" '^[0-9]+$' "... in the very cgroups of its context's command (its stub's, pid $stub)"
# the memory controller's group on v1 and hybrid hosts, the one group on pure v2
kgroup=$(grep -E '^[0-9]+:memory:' /proc/$kpid/cgroup || grep '^0::' /proc/$kpid/cgroup)
like "$kgroup" '/hutch/[^/]+/c[0-9]+$' "... a command group of its sandbox's ($kgroup)"
same=yes
for ns in user mnt net pid ipc uts; do
    mine=$(stat -L -c %i /proc/$kpid/ns/$ns 2>/dev/null)
    [ -n "$mine" ] && [ "$mine" = "$(stat -L -c %i /proc/$stub/ns/$ns 2>/dev/null)" ] &&
        [ "$mine" != "$(stat -L -c %i /proc/self/ns/$ns)" ] || { same=no; diag "$ns: not the stub's"; }
done
is "$same" yes "... and in its namespaces, none the host's: user, mount, network, pid, IPC, UTS"
host_uid=$(awk '/^Uid:/ {print $2}' /proc/$kpid/status 2>/dev/null)
[ -n "$host_uid" ] && [ "$host_uid" != 0 ] && [ "$host_uid" = "$(awk '/^Uid:/ {print $2}' /proc/$stub/status)" ] &&
    ok "its host uid is the sandbox user's (the stub's: $host_uid), never root" ||
    not_ok "its host uid is the sandbox user's (got '$host_uid')"
wait "$sleeper"
like "$(cat "$OUT/sleeper")" 'end_of_execution' "the sleeping run ended"
for _ in $(seq 50); do [ -z "$(pgrep -P "$ZPID")" ] && break; sleep 0.1; done
is "$(pgrep -P "$ZPID" | tr '\n' ' ')" "" "the zygote reaped every kernel once its run was over"

# ---------------------------------------------------------------- nothing shared between runs
# Sandbox A's env vars (a create's envVars: where users put their keys) hold a secret, which its
# kernel, forked from the zygote, starts with; a later run B, forked from the same zygote, searches
# all of its own memory for it. B's cell never makes the secret whole: it looks for its first half
# followed by its second. (When the zygote got each kernel's environment in its request, the
# freed buffers kept it: this is what such a leak would show.)
NEEDLE_A=topsecret
NEEDLE_B=-sandbox-a-$$
big=$(for _ in $(seq 400); do printf '%s%s.padding.' "$NEEDLE_A" "$NEEDLE_B"; done)
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d "{\"templateID\":\"code-interpreter-v1\",\"timeout\":120,\"envVars\":{\"SECRET\":\"$big\"}}" "$U/v2/sandboxes")
A=$(jfield "$r" sandboxID)
A_TOKEN=$(jfield "$r" envdAccessToken)
a_out=$(curl -s -m 60 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $A_TOKEN" \
    -d '{"code":"import os; kept = os.environ[\"SECRET\"]; print(len(kept), open(\"/proc/self/status\").read().split(\"PPid:\")[1].split()[0])"}' "$U/execute")
like "$a_out" '"text":"'$((${#big}))' 0' "sandbox A's kernel (from the zygote too) holds its secret"
SCAN='import ctypes, os, re
a, b = os.environ["PART_A"].encode(), os.environ["PART_B"].encode()
hits = regions = 0
for line in open("/proc/self/maps").read().splitlines():
    # the anonymous ones: where a freed buffer of the zygote would be (the heap, arenas, stacks)
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r\S* \S+ \S+ \S+\s*(\S*)$", line)
    if not m or m.group(3) not in ("", "[heap]", "[stack]"):
        continue
    lo, hi = int(m.group(1), 16), int(m.group(2), 16)
    data = ctypes.string_at(lo, hi - lo)  # (a non-dumpable process may not read its /proc/self/mem)
    regions += 1
    i = data.find(a)
    while i >= 0:
        hits += data[i + len(a):i + len(a) + len(b)] == b
        i = data.find(a, i + 1)
print(hits, regions)'
scan=$(python_run "$SCAN" "{\"PART_A\":\"$NEEDLE_A\",\"PART_B\":\"$NEEDLE_B\"}")
like "$scan" '^0 [0-9]+$' "a later run reads all of its own memory ($scan: copies found, regions read) and finds no copy of sandbox A's secret"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$A"
r1=$(python_run 'import random, numpy; print(random.random(), numpy.random.random())')
r2=$(python_run 'import random, numpy; print(random.random(), numpy.random.random())')
[ -n "$r1" ] && [ "$r1" != "$r2" ] && ok "two runs draw different random numbers (random, numpy)" ||
    not_ok "two runs draw different random numbers: '$r1' and '$r2'"

# ---------------------------------------------------------------- the zygote itself
zfds=$(ls -l /proc/$ZPID/fd 2>/dev/null | awk 'NR > 1 {print $NF}' | grep -v -e '^socket:' -e '^/dev/null$' -e '^pipe:' -e '^pid:\[' -e "^$(readlink /proc/$daemon/fd/2)\$" | tr '\n' ' ')
is "$zfds" "" "the idle zygote holds no fd of a sandbox's (only its socket, pipes, /dev/null, the daemon's log, its own pid namespace)"
zenv=$(tr '\0' '\n' </proc/$ZPID/environ)
grep -q -e "$SECRET" -e "$KEY" <<<"$zenv" && not_ok "the zygote's environment holds nothing of the daemon's" ||
    ok "the zygote's environment holds nothing of the daemon's"
kill -9 "$ZPID"
is "$(python_run 'print(6 * 7)')" "42" "a run right after the zygote was killed still runs"
for _ in $(seq 60); do
    [ "$(python_run "$PPID_CODE")" = 0 ] && break
    sleep 0.5
done
NEW=$(zygote_pid)
[ -n "$NEW" ] && [ "$NEW" != "$ZPID" ] && ok "the daemon started a new zygote (pid $NEW), whose forks serve again" ||
    not_ok "the daemon started a new zygote (got '$NEW')"
# ---------------------------------------------------------------- a restart of the daemon
# A context of a code-interpreter-v1 sandbox (its kernel the zygote's) lives through a kill -9 of
# the daemon, with its state, and is interrupted by the next daemon (which finds its kernel in
# its command's group: no zygote of the sandbox's own knows it).
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"code-interpreter-v1","timeout":300,"envVars":{"PYTHONPATH":"/opt/from-pythonpath"}}' "$U/v2/sandboxes")
C=$(jfield "$r" sandboxID)
C_TOKEN=$(jfield "$r" envdAccessToken)
c_exec() { curl -s -m "${2:-60}" -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $C_TOKEN" -d "$1" "$U/execute"; }
like "$(c_exec '{"code":"x = 41; print(open(\"/proc/self/status\").read().split(\"PPid:\")[1].split()[0])"}')" \
    '"text":"0' "a code-interpreter-v1 sandbox's kernel is the host zygote's too"
like "$(c_exec '{"code":"import sys; (sys.path.index(\"/opt/from-pythonpath\") == 1, sys.dont_write_bytecode)"}')" \
    '"text":"\(True, False\)"' "... with the PYTHONPATH of its env vars on its path, as at a start, and bytecode written"
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
for _ in $(seq 50); do kill -0 "$NEW" 2>/dev/null || break; sleep 0.1; done
kill -0 "$NEW" 2>/dev/null && not_ok "the zygote exits when its daemon is killed" || ok "the zygote exits when its daemon is killed"
start_daemon HUTCH_POOL=0 HUTCH_TEST_SECRET="$SECRET"
like "$(c_exec '{"code":"x + 1"}')" '"text":"42"' "after a kill -9 and a new daemon, the context's state is there"
# the sandbox user's site-packages (pip install --user): a new context's kernel has it on its path,
# as one started cold would (the zygote's own HOME is elsewhere)
c_exec '{"code":"import os, site; d = os.path.expanduser(\"~/.local/lib/python%d.%d/site-packages\" % __import__(\"sys\").version_info[:2]); os.makedirs(d, exist_ok=True); open(d + \"/hutch_user_mod.py\", \"w\").write(\"X = 7\")"}' >/dev/null
ctx=$(curl -s -m 60 -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $C_TOKEN" -d '{"language":"python"}' "$U/contexts")
ctx_id=$(jfield "$ctx" id)
like "$(c_exec "{\"code\":\"import sys, hutch_user_mod; (hutch_user_mod.X, [p for p in sys.path if p.endswith('-packages')][0].startswith('/home/user/'))\",\"context_id\":\"$ctx_id\"}")" \
    '"text":"\(7, True\)"' "a new context imports what the user installed in its site-packages, ahead of the system's"
like "$(c_exec "{\"code\":\"import sys; ('pandas' in sys.modules, open('/proc/self/status').read().split('PPid:')[1].split()[0])\",\"context_id\":\"$ctx_id\"}")" \
    '"text":"\(True, '"'"'0'"'"'\)"' "... forked from the host's zygote as before the restart: pandas imported, its parent outside"
# matplotlib's configuration from the sandbox user's HOME, as a kernel importing it cold reads it
# (the zygote imported it with its own): a matplotlibrc, a style sheet, the config directory
backend0=$(c_exec '{"code":"import matplotlib; matplotlib.get_backend()"}' | grep -o '"text":"[^"]*"')
c_exec '{"code":"import os; d = os.path.expanduser(\"~/.config/matplotlib\"); os.makedirs(d + \"/stylelib\", exist_ok=True); open(d + \"/matplotlibrc\", \"w\").write(\"lines.linewidth: 7\\nbackend: TkAgg\\n\"); open(d + \"/stylelib/hutchstyle.mplstyle\", \"w\").write(\"axes.grid: True\\n\")"}' >/dev/null
ctx=$(curl -s -m 60 -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $C_TOKEN" -d '{"language":"python"}' "$U/contexts")
ctx_id=$(jfield "$ctx" id)
like "$(c_exec "{\"code\":\"import matplotlib as mpl, matplotlib.pyplot as plt; (mpl.rcParams['lines.linewidth'], 'hutchstyle' in plt.style.available, mpl.get_configdir())\",\"context_id\":\"$ctx_id\"}")" \
    '"text":"\(7\.0, True, '"'"'/home/user/\.config/matplotlib'"'"'\)"' \
    "a new context reads the user's matplotlibrc and style sheets from its HOME"
is "$(c_exec "{\"code\":\"import matplotlib; matplotlib.get_backend()\",\"context_id\":\"$ctx_id\"}" | grep -o '"text":"[^"]*"')" "$backend0" \
    "... and keeps the kernel's backend ($backend0), not the rc's TkAgg"
t0=$(now_ms)
c_exec '{"code":"import time; time.sleep(30)"}' 2 >/dev/null
like "$(c_exec '{"code":"x"}' 20)" '"text":"41"' "... and the new daemon interrupts its kernel (a client gone away), the state kept"
[ $(($(now_ms) - t0)) -lt 15000 ] && ok "... within seconds, not the sleep's 30" || not_ok "... within seconds (took $(($(now_ms) - t0)) ms)"
# ---------------------------------------------------------------- the spare kernel
# After a sandbox's first python context, a spare kernel is forked for the next create with the
# default cwd, which takes it: a kernel started before that create, yet with the user's
# site-packages as they are at the create, sharing nothing with the other contexts, its count from
# 1, hidden from the list until taken. A daemon after a kill -9 tells the spares it gave away
# (contexts, listed, with their state, also one never used) from the one it did not (hidden, and
# taken by the next create).
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"code-interpreter-v1","timeout":300}' "$U/v2/sandboxes")
S=$(jfield "$r" sandboxID)
S_TOKEN=$(jfield "$r" envdAccessToken)
s_call() { curl -s -m 60 -H "E2b-Sandbox-Id: $S" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $S_TOKEN" "$@"; }
# s_exec CODE [CONTEXT]: an execute's lines; s_ctx BODY: a new context's id
s_exec() { s_call -d "$(python3 -c 'import json,sys; d={"code":sys.argv[1]}; d.update({"context_id":sys.argv[2]} if sys.argv[2:] and sys.argv[2] else {}); print(json.dumps(d))' "$@")" "$U/execute"; }
s_ctx() { jfield "$(s_call -d "$1" "$U/contexts")" id; }
s_python_ids() { s_call "$U/contexts" | python3 -c 'import json,sys; print(" ".join(sorted(c["id"] for c in json.load(sys.stdin) if c["language"] == "python")))'; }
AGE='import os; _t = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK"); _age = round(float(open("/proc/uptime").read().split()[0]) - _t, 2)'
DEFAULT_PY=$(s_python_ids)
c1=$(s_ctx '{"language":"python"}')
s_exec 'secret_of_c1 = 1' "$c1" >/dev/null
sleep 2 # the spare: forked after c1's create, ready by now
s_exec 'import os, sys; d = os.path.expanduser("~/.local/lib/python%d.%d/site-packages" % sys.version_info[:2]); os.makedirs(d, exist_ok=True); open(d + "/hutch_spare_mod.py", "w").write("X = 5")' >/dev/null
t0=$(now_ms)
c2=$(s_ctx '{}')
since=$(($(now_ms) - t0))
out=$(s_exec "$AGE"$'\ntry:\n    secret_of_c1\n    seen = True\nexcept NameError:\n    seen = False\nimport hutch_spare_mod\n(_age, seen, hutch_spare_mod.X, os.getcwd())' "$c2")
facts=$(s_text <<<"$out")
python3 -c 'import sys; age, seen, x, cwd = eval(sys.argv[1]); sys.exit(not (age > float(sys.argv[2]) / 1000 + 1))' "$facts" "$since" &&
    ok "the next create takes the spare: its kernel started before that create ($facts; the create ${since} ms ago)" ||
    not_ok "the next create takes the spare: its kernel started before that create (got '$facts', the create ${since} ms ago)"
like "$facts" "^\([0-9.]+, False, 5, '/home/user'\)$" "... with none of another context's variables, the user's site-packages written after its start, the default cwd"
like "$out" '"execution_count":1[,}]' "... its first execution counted 1"
c3=$(s_ctx '{"language":"python"}') # another spare (or its fork on the way), never run
c4=$(s_ctx '{"cwd":"/tmp"}')        # a cwd of its own: a kernel of its own
is "$(s_exec 'import os; os.getcwd()' "$c4" | s_text)" /tmp "a create with a cwd of its own runs there"
want=$(printf '%s\n' $DEFAULT_PY "$c1" "$c2" "$c3" "$c4" | sort | tr '\n' ' ' | sed 's/ $//')
is "$(s_python_ids)" "$want" "the list shows the created contexts and the default one, no spare"
s_exec 'kept_in_c2 = 9' "$c2" >/dev/null
sleep 2 # a spare again, ready
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon HUTCH_POOL=0 HUTCH_TEST_SECRET="$SECRET"
is "$(s_python_ids)" "$want" "after a kill -9 and a new daemon: the same contexts listed, also one never run, and no spare"
is "$(s_exec 'kept_in_c2' "$c2" | s_text)" 9 "... a context that was a spare has its state"
is "$(s_exec '1 + 2' "$c3" | s_text)" 3 "... the one never run works"
t0=$(now_ms)
c5=$(s_ctx '{}')
since=$(($(now_ms) - t0))
facts=$(s_exec "$AGE"$'\n_age' "$c5" | s_text)
python3 -c 'import sys; sys.exit(not (float(sys.argv[1]) > float(sys.argv[2]) / 1000 + 1))' "$facts" "$since" &&
    ok "... and the spare it found hidden is taken by the next create (its kernel $facts s old)" ||
    not_ok "... and the spare it found hidden is taken by the next create (got '$facts', the create ${since} ms ago)"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$S"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$C"
NEW=$(zygote_pid)
kill "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon=
for _ in $(seq 50); do [ -n "$NEW" ] && kill -0 "$NEW" 2>/dev/null || break; sleep 0.1; done
[ -n "$NEW" ] && kill -0 "$NEW" 2>/dev/null && not_ok "the zygote exits with the daemon" || ok "the zygote exits with the daemon"
# ---------------------------------------------------------------- files others may change
# The zygote runs its script and modules as host root: where anyone but root may change them, the
# daemon starts none, and kernels start cold in their sandboxes.
chmod 755 "$OUT"
mkdir "$OUT/interp"
cp src/interp/*.py src/interp/PROTOCOL.md "$OUT/interp/"
chmod 777 "$OUT/interp"
start_daemon HUTCH_INTERP="$OUT/interp" HUTCH_POOL=0
is "$(python_run "$PPID_CODE")" "1" "with a kernels' directory anyone may write to, a run's kernel starts cold"
sleep 2
is "$(python_run "$PPID_CODE")" "1" "... and so does the next one: no zygote was started"
is "$(pgrep -P "$daemon" -f 'python_zygote.py --host')" "" "... none runs"
grep -q "may be changed by others than root: no host zygote" "$LOG" && ok "the daemon says why" || not_ok "the daemon says why"
kill "$daemon"
wait "$daemon"
daemon=
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error" "$LOG" >/dev/null &&
    { not_ok "no sanitizer report"; grep -A5 Sanitizer "$LOG" | head -30; } || ok "no sanitizer report"
done_testing
