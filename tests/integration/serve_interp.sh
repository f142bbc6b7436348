#!/usr/bin/env bash
# The code interpreter (port 49999) attacked as a bad client would and as hostile code inside a
# sandbox would: auth, malformed requests, cells that write garbage to the kernel's protocol fd,
# close their pipes, kill or exit their kernel, fork and memory bombs, daemonized grandchildren,
# other contexts' processes and the zygote, the daemon's port; interrupts of a client gone away,
# a sandbox killed mid-stream, the other languages. Each attack harms only its own context: a
# victim context made before keeps its state, the attacked one survives or says KernelError and
# works again.
. "$(dirname "$0")/lib.sh"
use_scratch interp

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-interp
daemon_answers

diag_in() { local l; while IFS= read -r l; do diag "$l"; done; }
api() { curl -s -m 30 -H "X-API-KEY: $KEY" -w '\n%{http_code}' "$@"; } # with a time limit
# new_sandbox VAR [MEMORY_MB]: a sandbox; VAR, VAR_T (envd token), VAR_TT (traffic token).
new_sandbox() {
    local r mem=${2:-}
    r=$(api -X POST -d "{\"templateID\":\"base\",\"timeout\":600${mem:+,\"memoryMB\":$mem}}" "$U/v2/sandboxes")
    local b
    b=$(body_of "$r")
    printf -v "$1" %s "$(jget "$b" 'd["sandboxID"]')"
    printf -v "$1_T" %s "$(jget "$b" 'd["envdAccessToken"]')"
    printf -v "$1_TT" %s "$(jget "$b" 'd["trafficAccessToken"]')"
    made+=("${!1}")
    [ "$(status_of "$r")" = 201 ] || diag "$r"
}
# ci SB TOKEN CURL_ARGS...: a call to SB's code interpreter with its envd token; the body, then
# the HTTP status.
ci() {
    local sb=$1 tok=$2
    shift 2
    curl -s -m 60 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $sb" -H "E2b-Sandbox-Port: 49999" \
        -H "X-Access-Token: $tok" "$@"
}
# exec_body CODE [CONTEXT] [ENV_JSON]: an execute's JSON.
exec_body() {
    if [ -n "$have_jq" ]; then
        jq -nc --arg c "$1" --arg x "${2:-}" --arg e "${3:-}" '{code: $c}
            + (if $x != "" then {context_id: $x} else {} end)
            + (if $e != "" then {env_vars: ($e | fromjson)} else {} end)'
        return
    fi
    python3 -c 'import json,sys
d={"code":sys.argv[1]}
if sys.argv[2]: d["context_id"]=sys.argv[2]
if sys.argv[3]: d["env_vars"]=json.loads(sys.argv[3])
print(json.dumps(d))' "$1" "${2:-}" "${3:-}"
}
# ex SB TOKEN CTX CODE [SECONDS] [ENV_JSON]: POST /execute; its NDJSON lines.
ex() {
    curl -s -N -m "${5:-60}" -H "E2b-Sandbox-Id: $1" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $2" \
        --data-binary "$(exec_body "$4" "$3" "${6:-}")" "$U/execute"
}
exa() { ex "$A" "$A_T" "$@"; } # in sandbox A
# mkctx SB TRAFFIC BODY: a new context (with the traffic token, as the SDK makes them); its id.
mkctx() {
    local r
    r=$(curl -s -m 60 -H "E2b-Sandbox-Id: $1" -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $2" \
        -d "$3" "$U/contexts")
    jget "$r" 'd["id"]' || diag "context: $r"
}
rmctx() {
    curl -s -m 30 -o /dev/null -w '%{http_code}' -X DELETE -H "E2b-Sandbox-Id: $1" -H "E2b-Sandbox-Port: 49999" \
        -H "E2B-Traffic-Access-Token: $2" "$U/contexts/$3"
}
# nd OUT WHAT: from an execute's lines: stdout, stderr, result (the main one's text), error
# ("NAME: VALUE"), ename, ends (how many end_of_execution), count (execution_count), bad (lines
# that are not JSON objects with a type).
nd() {
    if [ -n "$have_jq" ]; then # a tenth of python's start-up on a loaded host
        jq -Rrsj --arg w "$2" '
            [split("\n")[] | select(length > 0) | (fromjson? // "BAD")] as $all
            | [$all[] | select(type == "object" and (.type | type) == "string")] as $m
            | def of(t): $m[] | select(.type == t);
            if $w == "stdout" or $w == "stderr" then [of($w) | .text] | join("")
            elif $w == "result" then [of("result") | select(.is_main_result) | .text | tostring] | join("\n")
            elif $w == "error" then [of("error") | "\(.name): \(.value)"] | join(" | ")
            elif $w == "ename" then [of("error") | .name | tostring] | join(" ")
            elif $w == "ends" then [of("end_of_execution")] | length | tostring
            elif $w == "count" then [of("number_of_executions") | .execution_count | tostring] | join(" ")
            elif $w == "bad" then ($all | length) - ($m | length) | tostring
            else "" end' <<<"$1"
        return
    fi
    python3 - "$1" "$2" <<'EOF'
import json, sys
out, what = sys.argv[1], sys.argv[2]
msgs, bad = [], 0
for l in out.splitlines():
    try:
        m = json.loads(l)
        if not isinstance(m, dict) or not isinstance(m.get("type"), str): raise ValueError
        msgs.append(m)
    except ValueError:
        bad += 1
of = lambda t: [m for m in msgs if m["type"] == t]
if what == "stdout": sys.stdout.write("".join(m.get("text", "") for m in of("stdout")))
elif what == "stderr": sys.stdout.write("".join(m.get("text", "") for m in of("stderr")))
elif what == "result": print("\n".join(str(m.get("text")) for m in of("result") if m.get("is_main_result")))
elif what == "error": print(" | ".join("%s: %s" % (m.get("name"), m.get("value")) for m in of("error")))
elif what == "ename": print(" ".join(str(m.get("name")) for m in of("error")))
elif what == "ends": print(len(of("end_of_execution")))
elif what == "count": print(" ".join(str(m.get("execution_count")) for m in of("number_of_executions")))
elif what == "bad": print(bad)
EOF
}
# sh_in SB TOKEN CMD: CMD run in the sandbox as user through envd's Process Start; its stdout.
sh_in() {
    python3 - "$U" "$1" "$2" "$3" <<'EOF'
import sys, json, struct, base64, urllib.request
u, sid, tok, cmd = sys.argv[1:]
data = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}, "stdin": False}).encode()
req = urllib.request.Request(u + "/process.Process/Start", data=b"\0" + struct.pack(">I", len(data)) + data,
    headers={"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "X-Access-Token": tok})
raw = urllib.request.urlopen(req, timeout=60).read()
out = b""
while raw:
    n = struct.unpack(">I", raw[1:5])[0]
    if not raw[0] & 2:
        e = json.loads(raw[5:5 + n])["event"]
        out += base64.b64decode(e.get("data", {}).get("stdout", ""))
    raw = raw[5 + n:]
sys.stdout.write(out.decode())
EOF
}
# since MS: milliseconds since MS (now_ms).
since() { echo $(($(now_ms) - $1)); }
T_START=$(now_ms)
section() { diag "$(($(since "$T_START") / 1000)) s: $1"; }

new_sandbox A
new_sandbox B 2048
[ -n "$A" ] && [ -n "$B" ] && ok "two sandboxes (A with 512 MiB, B with 2 GiB)" ||
    { not_ok "two sandboxes"; done_testing; exit; }

# ---------------------------------------------------------------- 1. auth
section "1. auth"
r=$(curl -s -m 30 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
    --data-binary '{"code":"1"}' "$U/execute")
is "$(status_of "$r")" 401 "/execute without a token: 401"
r=$(ci "$A" "${A_T%??}00" --data-binary '{"code":"1"}' "$U/execute")
is "$(status_of "$r")" 401 "/execute with a wrong token: 401"
r=$(ci "$A" "$B_T" --data-binary '{"code":"1"}' "$U/execute")
is "$(status_of "$r")" 401 "/execute with another sandbox's token: 401"
r=$(curl -s -m 30 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $B_TT" "$U/contexts")
is "$(status_of "$r")" 401 "/contexts with another sandbox's traffic token: 401"
r=$(curl -s -m 30 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $A_TT" "$U/contexts")
is "$(status_of "$r")" 200 "GET /contexts with the traffic token: 200"
like "$(body_of "$r")" '"language":"python"' "... listing the default python context"
r=$(curl -s -m 30 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49983" \
    -H "E2B-Traffic-Access-Token: $A_TT" -H "Content-Type: application/json" -d '{}' "$U/process.Process/List")
is "$(status_of "$r")" 401 "the traffic token does not open envd's port"
r=$(ci nosuchsandbox0000000 "$A_T" --data-binary '{"code":"1"}' "$U/execute")
is "$(status_of "$r")" 502 "an unknown sandbox: 502"

# ---------------------------------------------------------------- 2. bad client input
section "2. bad client input"
bad() { # WANT_STATUS DESC CURL_ARGS...
    local want=$1 desc=$2
    shift 2
    local r
    r=$(ci "$A" "$A_T" "$@")
    is "$(status_of "$r")" "$want" "$desc: $want"
}
bad 400 "/execute with a body that is not JSON" --data-binary '{"code":' "$U/execute"
bad 400 "/execute with code that is a number" --data-binary '{"code":5}' "$U/execute"
bad 400 "/execute without code" --data-binary '{}' "$U/execute"
bad 400 "/execute with a JSON array" --data-binary '["1+1"]' "$U/execute"
bad 400 "/execute with context_id and language both" --data-binary '{"code":"1","context_id":"x","language":"python"}' "$U/execute"
bad 400 "/execute with an env var that is a number" --data-binary '{"code":"1","env_vars":{"A":1}}' "$U/execute"
bad 400 "/execute with env_vars that is a list" --data-binary '{"code":"1","env_vars":["A"]}' "$U/execute"
bad 404 "/execute in an unknown context" --data-binary '{"code":"1","context_id":"00000000-0000-0000-0000-000000000000"}' "$U/execute"
bad 400 "/execute in an unknown language" --data-binary '{"code":"1","language":"cobol"}' "$U/execute"
bad 400 "/execute with code holding a NUL" --data-binary '{"code":"1\u0000"}' "$U/execute"
bad 400 "POST /contexts in an unknown language" --data-binary '{"language":"cobol"}' "$U/contexts"
bad 400 "POST /contexts with a relative cwd" --data-binary '{"language":"python","cwd":"tmp"}' "$U/contexts"
bad 400 "POST /contexts with a cwd that is a number" --data-binary '{"cwd":7}' "$U/contexts"
bad 400 "POST /contexts with malformed JSON" --data-binary '{"language":' "$U/contexts"
head -c $((3 << 20)) /dev/zero | tr '\0' a | python3 -c 'import json,sys; print(json.dumps({"code": sys.stdin.read()}))' >"$scratch/huge.json"
bad 413 "/execute with a 3 MiB body" --data-binary @"$scratch/huge.json" "$U/execute"
bad 413 "POST /contexts with a 3 MiB body" --data-binary @"$scratch/huge.json" "$U/contexts"
bad 404 "DELETE /contexts/ with dots and slashes" -X DELETE "$U/contexts/..%2f..%2fetc"
bad 404 "DELETE /contexts/ with a 200-character id" -X DELETE "$U/contexts/$(head -c 200 /dev/zero | tr '\0' a)"
bad 404 "DELETE /contexts/ID/extra" -X DELETE "$U/contexts/abc/def"
bad 404 "DELETE of an unknown context" -X DELETE "$U/contexts/00000000-0000-0000-0000-000000000000"
bad 404 "restart of an unknown context" -X POST "$U/contexts/nope/restart"
bad 404 "restart with a bad id" -X POST "$U/contexts/a%20b/restart"
bad 404 "an unknown route" "$U/etc/passwd"
r=$(ci "$A" "$A_T" "$U/health")
is "$(status_of "$r")/$(body_of "$r")" '200/"OK"' "after all of that, the interpreter's /health answers"
kill -0 "$daemon" && ok "the daemon is still there" || not_ok "the daemon is still there"

# ---------------------------------------------------------------- 3. hostile cells
section "3. hostile cells"
V=$(mkctx "$A" "$A_TT" '{"language":"python"}')
X=$(mkctx "$A" "$A_TT" '{"language":"python","cwd":"/tmp"}')
SECRET=secret-$RANDOM$RANDOM
out=$(exa "$V" "secret = '$SECRET'; import os; os.getpid()")
VPID=$(nd "$out" result)
like "$VPID" '^[0-9]+$' "a victim context holds a secret (its kernel is pid $VPID)"
out=$(exa "$X" 'import os; os.getcwd()')
is "$(nd "$out" result)" /tmp "an attacker context, in /tmp"

victim_intact() { # DESC
    local out
    out=$(exa "$V" 'secret')
    is "$(nd "$out" result)" "$SECRET" "... the victim context keeps its secret ($1)"
}
# attack DESC CODE ERROR_REGEX STATE(kept|cleared): CODE in X, whose error must match (empty:
# none), then X answers again with its state kept or cleared, and the victim is intact.
attack() {
    local desc=$1 code=$2 want=$3 state=$4 out err t0
    t0=$(now_ms)
    exa "$X" 'mark = 7' >/dev/null
    out=$(exa "$X" "$code" 90)
    err=$(nd "$out" error)
    if [ -n "$want" ]; then like "$err" "$want" "$desc: $want"; else is "$err" "" "$desc: no error"; fi
    is "$(nd "$out" ends)/$(nd "$out" bad)" 1/0 "... one end_of_execution, every line JSON"
    out=$(exa "$X" 'str(globals().get("mark"))')
    local want_mark=7
    [ "$state" = cleared ] && want_mark=None
    is "$(nd "$out" result)" "$want_mark" "... the context answers again, its state $state"
    victim_intact "$desc"
    diag "($(since "$t0") ms)"
}

# the kernel's protocol end: fds at 3 or above that are pipes open for writing, other than the
# pipes behind fds 1 and 2 (the daemon's ends of the command's stdout and stderr)
FIND_FDS='import os, fcntl
def proto_fds():
    mine = {os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2")}
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            link = os.readlink("/proc/self/fd/%d" % fd)
            if fd >= 3 and link.startswith("pipe:") and link not in mine and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == 1:
                fds.append(fd)
        except OSError:
            pass
    return fds
'
out=$(exa "$X" "$FIND_FDS"$'\nprint(len(proto_fds()))')
like "$(nd "$out" stdout)" '^[1-9]' "the cell finds the kernel's protocol fds (pipes open for writing: $(nd "$out" stdout | tr -d '\n'))"
attack "garbage written to every protocol fd" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"garbage\\n")' \
    'KernelError: the kernel sent .*restarts' cleared
attack "a line of malformed JSON" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"stdout\\",\\"text\\":\\n")' \
    'KernelError: the kernel sent' cleared
attack "a message with an unknown type" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"pwn\\"}\\n")' \
    'KernelError: the kernel sent' cleared
attack "stdout whose text is a number" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"stdout\\",\\"text\\":5}\\n")' \
    'KernelError: the kernel sent' cleared
attack "a fake end_of_execution with a wrong id" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"end_of_execution\\",\\"id\\":\\"nope\\"}\\n")\nimport time; time.sleep(1)' \
    'KernelError: the kernel sent the end of an execution that was not running' cleared
attack "a fake ready" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"ready\\",\\"language\\":\\"python\\"}\\n")\nimport time; time.sleep(1)' \
    'KernelError: the kernel sent a second ready' cleared
attack "a fake ready naming pid 1" "$FIND_FDS"$'\nfor fd in proto_fds(): os.write(fd, b"{\\"type\\":\\"ready\\",\\"language\\":\\"python\\",\\"pid\\":1}\\n")\nimport time; time.sleep(1)' \
    'KernelError: the kernel sent a ready' cleared
attack "a line longer than 32 MiB" "$FIND_FDS"$'\nchunk = b"x" * (1 << 20)\nfor fd in proto_fds():\n    try:\n        for i in range(40): os.write(fd, chunk)\n    except OSError: pass' \
    'KernelError: the kernel sent a line longer than 32 MiB' cleared
attack "os.close(1); os.close(2)" $'import os\nos.close(1); os.close(2)\nprint("gone")' 'OSError: \[Errno 9\]' kept
out=$(exa "$X" $'import os\nos.close(1)\nprint("lost")')
out=$(exa "$X" 'print("back")')
is "$(nd "$out" stdout)" back "after a cell closed fd 1, the next one's output arrives"
attack "closing every fd from 0 to 1023" $'import os\nfor fd in range(1024):\n    try: os.close(fd)\n    except OSError: pass\nprint("x")' \
    'KernelError' cleared
attack "os.kill(os.getpid(), 9)" 'import os; os.kill(os.getpid(), 9)' 'KernelError: the kernel died of signal 9' cleared
attack "os._exit(0)" 'import os; os._exit(0)' 'KernelError: the kernel exited with status 0' cleared
attack "sys.exit()" 'import sys; sys.exit(3)' 'SystemExit' kept
attack "raise SystemExit in a thread and KeyboardInterrupt" $'import threading\nthreading.Thread(target=lambda: exec("raise SystemExit")).start()\nraise KeyboardInterrupt' \
    'KeyboardInterrupt' kept
attack "del builtins and broken sys.stdout" $'import builtins, sys\nsys.stdout = None\nsys.stderr = 5\ndel builtins.print' '' kept
attack "a 50 GiB bytearray" 'x = bytearray(50 << 30)' 'MemoryError' kept
attack "100 MiB chunks up to the sandbox's memory limit" $'chunks = []\nwhile True: chunks.append(bytearray(100 << 20))' \
    'KernelError|MemoryError' cleared
attack "stdin read by the cell" $'import sys, os\nprint(repr(sys.stdin.read()), repr(os.read(0, 10)))' '' kept

# a daemonized grandchild: gone with its context
exa "$X" $'import subprocess\nsubprocess.Popen(["setsid", "sleep", "1000"])\nsubprocess.Popen("setsid -f sleep 1001 </dev/null >/dev/null 2>&1 &", shell=True)\nimport time; time.sleep(0.5)' >/dev/null
ps_out=$(sh_in "$A" "$A_T" 'ps -eo args')
grep -q '^sleep 1000' <<<"$ps_out" && grep -q '^sleep 1001' <<<"$ps_out" && ok "a cell started two setsid sleeps" ||
    { not_ok "a cell started two setsid sleeps"; diag_in <<<"$ps_out"; }
is "$(rmctx "$A" "$A_TT" "$X")" 204 "DELETE of the attacker's context: 204"
for _ in $(seq 30); do sh_in "$A" "$A_T" 'ps -eo args' | grep -q '^sleep 100[01]' || break; sleep 0.2; done
ps_out=$(sh_in "$A" "$A_T" 'ps -eo args')
grep -q '^sleep 100[01]' <<<"$ps_out" && { not_ok "... no setsid sleep left in the sandbox"; diag_in <<<"$ps_out"; } ||
    ok "... no setsid sleep left in the sandbox"
victim_intact "after the DELETE of another context"
out=$(exa "$X" '1')
like "$out" 'not found' "the deleted context is gone for /execute too"

X=$(mkctx "$A" "$A_TT" '{"language":"python"}')
out=$(exa "$X" "'secret' in globals(), 'secret' in dir(__builtins__)")
is "$(nd "$out" result)" "(False, False)" "another context does not see the victim's globals"
out=$(exa "$X" "import glob, os; [p for p in glob.glob('/tmp/**', recursive=True) + glob.glob('/home/user/**', recursive=True) + glob.glob('/dev/shm/*') if os.path.isfile(p) and '$SECRET' in open(p, errors='replace').read()]")
is "$(nd "$out" result)" "[]" "no file in /tmp, /home/user or /dev/shm holds the victim's secret"
ZPID=$(sh_in "$A" "$A_T" 'ps -eo pid,ppid,args' | awk '$2 == 1 && /python_zygote.py/ {print $1}' | head -n1)
like "$ZPID" '^[0-9]+$' "the sandbox's zygote runs (pid $ZPID)"
CROSS=$'import os, ctypes, signal
libc = ctypes.CDLL(None, use_errno=True)
res = {}
def t(name, f):
    try:
        f(); res[name] = "ok"
    except OSError as e:
        res[name] = e.errno
def attach(pid):
    if libc.ptrace(16, pid, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(17, pid, 0, 0)
def mem(pid):
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(0x400000); f.read(16)
def pidfd_signal(pid):
    fd = os.pidfd_open(pid)
    try: signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally: os.close(fd)
for who, pid in (("victim", VPID), ("zygote", ZPID)):
    t(who + " kill0", lambda: os.kill(pid, 0))
    t(who + " SIGKILL", lambda: os.kill(pid, signal.SIGKILL))
    t(who + " SIGINT", lambda: os.kill(pid, signal.SIGINT))
    t(who + " pidfd", lambda: pidfd_signal(pid))
    t(who + " ptrace", lambda: attach(pid))
    t(who + " mem", lambda: mem(pid))
    t(who + " environ", lambda: open("/proc/%d/environ" % pid, "rb").read())
    t(who + " fd 1 readlink", lambda: os.readlink("/proc/%d/fd/1" % pid))
    t(who + " fd 1 write", lambda: open("/proc/%d/fd/1" % pid, "wb").write(b"garbage\\n"))
    t(who + " fd 101 write", lambda: open("/proc/%d/fd/101" % pid, "wb").write(b"garbage\\n"))
t("pgid kill", lambda: os.killpg(os.getpgid(VPID), signal.SIGKILL))
print(sorted(k for k, v in res.items() if v == "ok"))'
out=$(exa "$X" "VPID, ZPID = $VPID, $ZPID"$'\n'"$CROSS")
is "$(nd "$out" stdout)" "[]" "signals (kill 0, SIGKILL, SIGINT, pidfd), ptrace, /proc/PID/mem, environ and fd/: all refused for the victim's kernel and the zygote"
[ "$(nd "$out" stdout)" = "[]" ] || diag "$(nd "$out" error)"
out=$(exa "$V" 'import os; os.environ.get("ONE_RUN")' 30 '{"ONE_RUN":"env-secret"}')
is "$(nd "$out" result)" env-secret "env_vars of an execution are seen by it"
out=$(exa "$X" 'import os; str([k for k, v in os.environ.items() if "env-secret" in v])')
is "$(nd "$out" result)" "[]" "... not by another context"
out=$(exa "$V" 'import os; str(os.environ.get("ONE_RUN"))')
is "$(nd "$out" result)" None "... nor by the next execution of the same one"
# kill(-1, SIGKILL): every process the cell may signal (a child of its own, forked for it)
out=$(exa "$X" $'import os, signal\nif os.fork() == 0:\n    import time; time.sleep(5); os._exit(0)\nos.kill(-1, signal.SIGKILL)\nprint("survived")')
is "$(nd "$out" stdout)" survived "kill(-1, SIGKILL) from a cell: the cell itself survives"
victim_intact "after signals and ptrace from another context"
ps_out=$(sh_in "$A" "$A_T" 'ps -eo pid,args')
grep -q "^ *$ZPID .*python_zygote.py" <<<"$ps_out" && ok "... and the zygote is still alive" || { not_ok "... and the zygote is still alive"; diag_in <<<"$ps_out"; }
out=$(exa "$X" "import socket
for host in ('127.0.0.1', 'localhost', '::1'):
    try:
        socket.create_connection((host, $PORT), timeout=3).close(); print('reached', host)
    except OSError as e:
        pass
print('done')")
is "$(nd "$out" stdout)" done "the kernel cannot connect to the daemon's port $PORT on loopback"
out=$(exa "$X" $'import os\nprocs = [open("/proc/%s/cmdline" % p, "rb").read().replace(b"\\0", b" ").decode(errors="replace") for p in os.listdir("/proc") if p.isdigit()]\nprint(len(procs), any("serve --listen" in c or "hutch-san" in c for c in procs))')
like "$(nd "$out" stdout)" '^[0-9] False|^[1-2][0-9] False' "the kernel sees only the sandbox's processes ($(nd "$out" stdout | tr -d '\n')), not the daemon"

# many small processes up to the memory limit: each context's group is fitted to what the rest of
# the sandbox leaves (src/serve/context_share.h), so the OOM killer picks among the attacker's
# processes, never the victim's kernel (the largest process of the sandbox)
out=$(exa "$X" $'import subprocess, time\nps = [subprocess.Popen(["python3", "-c", "x = bytearray(12 << 20)\\nimport time\\ntime.sleep(1000)"]) for i in range(45)]\ntime.sleep(8)\nprint("filled", sum(p.poll() is not None for p in ps))' 60)
diag "the attacker's cell: stdout '$(nd "$out" stdout | tr -d '\n')', error '$(nd "$out" error | head -c 200)'"
out=$(exa "$V" 'secret' 30)
victim_secret=$(nd "$out" result)
is "$victim_secret" "$SECRET" "many 12 MiB processes of one context filling the sandbox's memory do not kill another context's kernel"
[ "$(nd "$out" result)" = "$SECRET" ] || diag "the victim after the attacker filled the memory: $(nd "$out" error)"
out=$(exa "$X" '6 * 7' 30)
is "$(nd "$out" result)" 42 "... and the attacker's context runs again"
rmctx "$A" "$A_TT" "$X" >/dev/null
[ "$victim_secret" = "$SECRET" ] || { exa "$V" "secret = '$SECRET'; import os; os.getpid()" >/dev/null; }

# ---------------------------------------------------------------- 3b. a fork bomb (sandbox B, 2 GiB: the pids limit comes first)
section "3b. a fork bomb (sandbox B, 2 GiB: the pids limit comes first)"
BV=$(mkctx "$B" "$B_TT" '{"language":"python"}')
ex "$B" "$B_T" "$BV" "secret = '$SECRET'" >/dev/null
BX=$(mkctx "$B" "$B_TT" '{"language":"python"}')
PIDS=$(for d in /sys/fs/cgroup/pids/hutch/$B /sys/fs/cgroup/hutch/$B; do [ -f "$d/pids.current" ] && echo "$d"; done | head -n1)
before=$(cat "$PIDS/pids.current" 2>/dev/null)
t0=$(now_ms)
ex "$B" "$B_T" "$BX" $'import subprocess, time\nsubprocess.Popen(["/bin/bash", "-c", "b() { b & b & sleep 1000; }; b"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\ntime.sleep(7)' 40 >"$scratch/bomb" &
bomb=$!
bg_pids+=("$bomb")
sleep 4
took=$(curl -s -o /dev/null -m 10 -w '%{time_total}' "$U/health")
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 3 else 1)' "$took" && ok "during a fork bomb the daemon answers ($took s)" ||
    not_ok "during a fork bomb the daemon answers ($took s)"
wait "$bomb"
peak=$(cat "$PIDS/pids.current" 2>/dev/null)
max=$(cat "$PIDS/pids.max" 2>/dev/null)
[ -n "$peak" ] && [ "$peak" -gt 500 ] && [ "$peak" -le "$max" ] && ok "the bomb made $peak processes, within the sandbox's pids.max $max" ||
    not_ok "the bomb made ${peak:-?} processes, within the sandbox's pids.max ${max:-?} ($PIDS)"
out=$(ex "$B" "$B_T" "$BV" 'secret' 30)
is "$(nd "$out" result)" "$SECRET" "... another context of that sandbox keeps its secret"
out=$(ex "$B" "$B_T" "$BV" $'import subprocess\nsubprocess.run(["true"]).returncode' 30)
is "$(nd "$out" result)" 0 "... and can still start processes: the bomb's context has a smaller pids limit ($(cat "$PIDS"/c*/pids.max 2>/dev/null | sort -u | tr '\n' ' '))"
is "$(rmctx "$B" "$B_TT" "$BX")" 204 "DELETE of the bomb's context"
for _ in $(seq 50); do [ "$(cat "$PIDS/pids.current")" -le $((before + 1)) ] && break; sleep 0.2; done
now=$(cat "$PIDS/pids.current")
[ "$now" -le $((before + 1)) ] && ok "... the bomb's processes are gone ($before before, $now now)" ||
    not_ok "... the bomb's processes are gone ($before before, $now now)"
ps_out=$(sh_in "$B" "$B_T" 'ps -eo args')
grep -q 'sleep 1000\|^/bin/bash -c b' <<<"$ps_out" && { not_ok "... none left in the sandbox's ps"; diag_in <<<"$ps_out"; } ||
    ok "... none left in the sandbox's ps"

# ---------------------------------------------------------------- 3c. the zygote's socket
section "3c. the zygote's socket"
# A kernel can connect to its sandbox's zygote (a socket in /tmp owned by the same user), but the
# zygote forks only for a stub the daemon started and allowed: a cell's own handover is closed
# unserved (else its fork would be in the zygote's cgroup and outlive the context that asked).
BX=$(mkctx "$B" "$B_TT" '{"language":"python"}')
ZYGOTE_FORK=$'import os, socket, array, json
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("/tmp/.hutch-zygote-python")
req_r, req_w = os.pipe(); msg_r, msg_w = os.pipe()
null = os.open("/dev/null", os.O_WRONLY)
s.sendmsg([b"/tmp\\0PATH=/usr/bin:/bin"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [req_r, msg_w, null]))])
print(s.recv(64).decode())
os.close(req_r); os.close(msg_w)
f = os.fdopen(msg_r, "rb")
f.readline()
os.write(req_w, (json.dumps({"type": "execute", "id": "x", "code": "import subprocess; subprocess.Popen([\\"sleep\\", \\"1002\\"], start_new_session=True)"}) + "\\n").encode())
while True:
    l = f.readline()
    if b"end_of_execution" in l or not l: break'
out=$(ex "$B" "$B_T" "$BX" "$ZYGOTE_FORK" 30)
diag "a kernel forked by the zygote for another kernel: $(nd "$out" stdout | tr '\n' ' ')$(nd "$out" error)"
rmctx "$B" "$B_TT" "$BX" >/dev/null
sleep 0.5
check "a cell that asks the zygote for a fork itself gets none: nothing of it outlives the context (sleep 1002 gone)" \
    bash -c '! grep -q "^sleep 1002" <<<"$1"' _ "$(sh_in "$B" "$B_T" 'ps -eo args')"

# ... or put its own socket in the zygote's place: the next context's kernel is then its own
# (its pipes: the code and env_vars sent to that context, its answers)
BX=$(mkctx "$B" "$B_TT" '{"language":"python"}')
HIJACK=$'import os, socket, array, json, threading
path = "/tmp/.hutch-zygote-python"
os.unlink(path)
L = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); L.bind(path); L.listen(4)
def serve():
    conn, _ = L.accept()
    fds = array.array("i")
    data, anc, fl, _ = conn.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
    for lvl, kind, p in anc: fds.frombytes(p[:len(p) - len(p) % fds.itemsize])
    conn.send(b"pid %d" % os.getpid())
    r, w = fds[0], fds[1]
    os.write(w, b"{\\"type\\":\\"ready\\",\\"language\\":\\"python\\"}\\n")
    for line in os.fdopen(r, "rb"):
        req = json.loads(line)
        with open("/tmp/stolen", "a") as f: f.write(json.dumps(req) + "\\n")
        os.write(w, (json.dumps({"type": "stdout", "text": "hijacked\\n"}) + "\\n" + json.dumps({"type": "end_of_execution", "id": req["id"]}) + "\\n").encode())
threading.Thread(target=serve, daemon=True).start()
print("listening")'
out=$(ex "$B" "$B_T" "$BX" "$HIJACK" 30)
diag "a cell in the zygote's place: $(nd "$out" stdout | tr '\n' ' ')$(nd "$out" error)"
BY=$(mkctx "$B" "$B_TT" '{"language":"python"}')
out=$(ex "$B" "$B_T" "$BY" 'import os; print("mine", os.environ.get("API_TOKEN"))' 20 '{"API_TOKEN":"tok-'$RANDOM'"}')
check "a context made after another one took the zygote's socket path gets a kernel of its own (not the other context's: $(nd "$out" stdout | tr '\n' ' '))" \
    grep -q '"mine tok-' <<<"$out"
rmctx "$B" "$B_TT" "$BY" >/dev/null
rmctx "$B" "$B_TT" "$BX" >/dev/null
out=$(ex "$B" "$B_T" "$BV" 'secret' 30)
is "$(nd "$out" result)" "$SECRET" "the first context of that sandbox keeps its secret"

# ---------------------------------------------------------------- 4. interrupts
section "4. interrupts"
I=$(mkctx "$A" "$A_TT" '{"language":"python"}')
exa "$I" 'n = 5' >/dev/null
t0=$(now_ms)
exa "$I" $'import time\ntime.sleep(300)' 2 >/dev/null
out=$(exa "$I" 'n' 20)
el=$(since "$t0")
is "$(nd "$out" result)" 5 "a client gone 2 s into time.sleep(300): the next execution answers with the state kept"
[ "$el" -lt 7000 ] && ok "... within 5 s of the disconnect (${el} ms in all)" || not_ok "... within 5 s of the disconnect (${el} ms in all)"
t0=$(now_ms)
exa "$I" $'import time\nwhile True:\n    try:\n        time.sleep(100)\n    except BaseException:\n        pass' 2 >/dev/null
out=$(exa "$I" 'print(globals().get("n"))' 30)
el=$(since "$t0")
is "$(nd "$out" stdout)" None "a cell that ignores KeyboardInterrupt, its client gone: its kernel is killed, the next execution runs on a new one (state cleared)"
[ "$el" -lt 12000 ] && ok "... within 10 s of the disconnect (${el} ms in all)" || not_ok "... within 10 s of the disconnect (${el} ms in all)"
exa "$I" 'n = 6' >/dev/null
exa "$I" $'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(300)' 2 >/dev/null
out=$(exa "$I" 'print(globals().get("n"))' 30)
is "$(nd "$out" stdout)" None "a cell that ignores SIGINT itself: the same"
victim_intact "after the interrupts"
exa "$I" 'n = 8' >/dev/null
r=$(curl -s -m 60 -w '\n%{http_code}' -X POST -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $A_TT" "$U/contexts/$I/restart")
is "$(status_of "$r")" 200 "POST /contexts/ID/restart: 200"
out=$(exa "$I" 'str(globals().get("n"))')
is "$(nd "$out" result)" None "... the state is cleared"
exa "$I" $'import time\ntime.sleep(30)' 30 >"$scratch/restarted" &
restarted=$!
bg_pids+=("$restarted")
sleep 1
curl -s -m 60 -o /dev/null -X POST -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $A_TT" "$U/contexts/$I/restart"
wait "$restarted"
like "$(nd "$(cat "$scratch/restarted")" error)" 'ContextRestarted' "a restart while a cell runs ends that cell with an error"
is "$(rmctx "$A" "$A_TT" "$I")" 204 "DELETE of that context"
r=$(curl -s -m 30 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $A_TT" "$U/contexts")
[[ $r == *"$V"* && $r != *"$I"* && $r != *"$X"* ]] && ok "GET /contexts lists the victim, not the deleted ones" ||
    { not_ok "GET /contexts lists the victim, not the deleted ones"; diag "$r"; }

# ---------------------------------------------------------------- 6. languages
section "6. languages"
out=$(curl -s -N -m 60 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $A_T" \
    --data-binary '{"code":"1+1","language":"js"}' "$U/execute")
is "$(nd "$out" result)" 2 "js: 1+1 is 2"
out=$(curl -s -N -m 60 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $A_T" \
    --data-binary '{"code":"echo hi","language":"bash"}' "$U/execute")
is "$(nd "$out" stdout)" hi "bash: echo hi"
out=$(curl -s -N -m 60 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $A_T" \
    --data-binary '{"code":"const x: number = 3; x * 2","language":"ts"}' "$U/execute")
is "$(nd "$out" result)" 6 "ts: a typed const"
J=$(mkctx "$A" "$A_TT" '{"language":"js"}')
exa "$J" 'var kept = 1' >/dev/null
out=$(exa "$J" "require('fs').writeFileSync('/proc/' + process.ppid + '/fd/1', 'garbage\\n'); 1")
err=$(nd "$out" error)
like "$err" 'KernelError: the kernel sent|EACCES|EPERM' "js: garbage for the launcher's protocol fd (/proc/PPID/fd/1): refused, or a KernelError"
out=$(exa "$J" 'typeof kept')
want=number
[[ $err == KernelError* ]] && want=undefined
is "$(nd "$out" result)" "$want" "... and the context answers again, its state $([ $want = number ] && echo kept || echo cleared)"
out=$(exa "$J" "process.kill(process.pid, 'SIGKILL')")
out=$(exa "$J" '40 + 2')
is "$(nd "$out" result)" 42 "js: a worker that killed itself is replaced"
rmctx "$A" "$A_TT" "$J" >/dev/null
victim_intact "after the js attacks"
for lang in r java; do
    if [ -e "$ROOT/src/interp/${lang}_kernel.py" ]; then
        skip "$lang: no kernel file to miss" "src/interp/${lang}_kernel.py exists"
        continue
    fi
    r=$(curl -s -m 30 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" \
        -H "E2B-Traffic-Access-Token: $A_TT" -d "{\"language\":\"$lang\"}" "$U/contexts")
    is "$(status_of "$r")" 400 "$lang without its kernel file: POST /contexts says 400"
    like "$(body_of "$r")" "not available" "... that it is not available"
    out=$(curl -s -N -m 30 -H "E2b-Sandbox-Id: $A" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $A_T" \
        --data-binary "{\"code\":\"1\",\"language\":\"$lang\"}" "$U/execute")
    like "$(nd "$out" error)" "KernelError.*not available" "... and /execute in $lang a KernelError"
done

# ---------------------------------------------------------------- 5. a sandbox killed mid-stream
section "5. a sandbox killed mid-stream"
ex "$B" "$B_T" "$BV" $'import time\nprint("started", flush=True)\ntime.sleep(120)' 60 >"$scratch/killed" &
streamer=$!
bg_pids+=("$streamer")
for _ in $(seq 50); do grep -q started "$scratch/killed" 2>/dev/null && break; sleep 0.1; done
t0=$(now_ms)
api -X DELETE "$U/sandboxes/$B" >/dev/null
wait "$streamer"
el=$(since "$t0")
[ "$el" -lt 5000 ] && ok "the sandbox killed while a cell streams: the stream ends (${el} ms)" ||
    not_ok "the sandbox killed while a cell streams: the stream ends (${el} ms)"
out=$(cat "$scratch/killed")
like "$(nd "$out" error)" '(KernelError|SandboxError): .*kill' "... with an error line saying the sandbox is killed"
is "$(nd "$out" ends)" 1 "... and its end_of_execution"
left=
for p in $(grep -l "$B" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
    left+="$p:$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) "
done
is "$left" "" "no process of that sandbox left on the host (kernels, zygote)"
is "$(ls -d /sys/fs/cgroup/*/hutch/"$B" /sys/fs/cgroup/hutch/"$B" 2>/dev/null)" "" "... and no cgroup of it"

# ---------------------------------------------------------------- 7. a kernel that breaks before its ready
section "7. a kernel that breaks before its ready"
# node loads NODE_OPTIONS' --require before the kernel: its garbage comes first on the protocol fd
r=$(api -X POST -d '{"templateID":"base","timeout":300,"envVars":{"NODE_OPTIONS":"--require /tmp/early.js"}}' "$U/v2/sandboxes")
C=$(jget "$(body_of "$r")" 'd["sandboxID"]')
C_T=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
C_TT=$(jget "$(body_of "$r")" 'd["trafficAccessToken"]')
made+=("$C")
sh_in "$C" "$C_T" "echo 'process.stdout.write(\"garbage before ready\" + String.fromCharCode(10))' > /tmp/early.js" >/dev/null
r=$(curl -s -m 60 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $C_TT" -d '{"language":"js"}' "$U/contexts")
is "$(status_of "$r")" 500 "a created js context whose kernel writes garbage before its ready: 500"
like "$(body_of "$r")" "before it was ready" "... saying what the kernel sent"
listed=$(curl -s -m 30 -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $C_TT" "$U/contexts")
is "$(jget "$listed" 'sorted(c["language"] for c in d)')" "['javascript', 'python']" "... and it is not listed (the default ones are)"
out=$(ex "$C" "$C_T" "" '6 * 7')
is "$(nd "$out" result)" 42 "... and the default python context of that sandbox works"

# ---------------------------------------------------------------- 8. a kernel that never gets ready
section "8. a kernel that never gets ready"
# the same daemon again (its sandboxes outlive it), its kernels given 3 s to their ready
kill -TERM "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon_answers HUTCH_KERNEL_READY_TIMEOUT=3
sh_in "$C" "$C_T" "echo 'require(\"child_process\").execSync(\"exec sleep 3600\")' > /tmp/early.js" >/dev/null
t0=$(date +%s.%N)
r=$(curl -s -m 60 -w '\n%{http_code}' -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" \
    -H "E2B-Traffic-Access-Token: $C_TT" -d '{"language":"js"}' "$U/contexts")
took=$(python3 -c "import sys,time; print(time.time() - float(sys.argv[1]))" "$t0")
is "$(status_of "$r")" 500 "a created js context whose kernel sleeps before its ready: 500"
like "$(body_of "$r")" "did not get ready within 3 s" "... saying so"
python3 -c "import sys; sys.exit(not 2.5 < float(sys.argv[1]) < 20)" "$took" && ok "... after about 3 s" ||
    not_ok "... after about 3 s (took $took s)"
listed=$(curl -s -m 30 -H "E2b-Sandbox-Id: $C" -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $C_TT" "$U/contexts")
is "$(jget "$listed" 'sorted(c["language"] for c in d)')" "['javascript', 'python']" "... and it is not listed"
left=
for _ in $(seq 50); do
    left=$(sh_in "$C" "$C_T" 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done | grep -c "^sleep 3600" || true')
    [ "$left" = 0 ] && break
    sleep 0.1
done
is "$left" 0 "... and its kernel's tree is killed (no sleep left in the sandbox)"
victim_intact "after a daemon restart"

# ---------------------------------------------------------------- the end
section "the end"
victim_intact "at the end"
kill -0 "$daemon" && ok "the daemon is still there" || not_ok "the daemon is still there"
for id in "${made[@]}"; do curl -s -o /dev/null -m 30 -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
made=()
kill -TERM "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon=
grep -qE 'Sanitizer|runtime error' "$LOG" && grep -E 'Sanitizer|runtime error' "$LOG" | head -n 5 | diag_in
grep -qE 'ERROR: AddressSanitizer|LeakSanitizer|runtime error' "$LOG" && not_ok "no sanitizer report (leaks included) in the daemon's log" ||
    ok "no sanitizer report (leaks included) in the daemon's log"
done_testing
