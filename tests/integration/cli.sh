#!/usr/bin/env bash
# hutch's own CLI over the daemon's unix socket: create, ls, exec (exit codes, streaming, stdin,
# signals), sh (through a pty), cp both ways (20 MiB, by hash), pause, resume, kill, logs (and
# GET /sandboxes/{id}/logs itself), the create body's cpuCount/memoryMB/diskSizeMB, the socket's
# mode and its keyless access, errors with their exit statuses, and a hostile daemon.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh" # daemon_fds (its own start and cleanup are below)
use_scratch cli

KEY=test-key-$$-$RANDOM
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT
SOCK=$HUTCH_RUN_DIR/hutch.sock
LOG=$scratch/daemon.log
# every sanitizer report, the daemon's and each CLI run's, goes to a file of its own here
export ASAN_OPTIONS="${ASAN_OPTIONS}:log_path=$scratch/san"
export UBSAN_OPTIONS="${UBSAN_OPTIONS}:log_path=$scratch/san"
daemon=
made=()
cleanup() {
    for id in "${made[@]}"; do "$HUTCH" kill "$id" >/dev/null 2>&1; done
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    lib_cleanup
}
trap cleanup EXIT
h() { "$HUTCH" "$@"; }
# hx ARGS...: hutch's stdout in $out, stderr in $err, status in $rc
hx() {
    out=$("$HUTCH" "$@" 2>"$scratch/err")
    rc=$?
    err=$(cat "$scratch/err")
}
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# --- no daemon ---
hx ls
is "$rc" 1 "ls without a daemon: exit 1"
like "$err" "no daemon at $SOCK: start it with \`hutch serve\`" "... and it says how to start one"

HUTCH_API_KEY=$KEY "$HUTCH" serve --listen 127.0.0.1:$PORT >>"$LOG" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && curl -s -o /dev/null "$U/health" && break; sleep 0.1; done
[ -S "$SOCK" ] && ok "the daemon listens on RUN/hutch.sock" || { not_ok "the daemon listens on RUN/hutch.sock"; cat "$LOG"; done_testing; exit; }
is "$(stat -c '%a %U' "$SOCK")" "600 root" "the socket is mode 0600, root's"
is "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/v2/sandboxes)" 200 \
    "the socket takes control-plane calls without an API key"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/v2/sandboxes")" 401 "TCP still needs the key"

# --- create, ls ---
hx create --timeout 600 --cpu 1 --memory 256 --disk 512 --env FOO=bar --metadata suite=cli
A=$out
made+=("$A")
[ "$rc" = 0 ] && [[ $A =~ ^[a-z0-9]{20}$ ]] && ok "create prints the new id" || { not_ok "create prints the new id"; diag "$rc $out $err"; }
hx create --json --template code-interpreter-v1
B=$(jget "$out" 'd["sandboxID"]')
made+=("$B")
[ -n "$B" ] && [ -n "$(jget "$out" 'd["envdAccessToken"]')" ] && ok "create --json prints the daemon's answer" ||
    not_ok "create --json prints the daemon's answer"
# code-interpreter-v1 starts its default python kernel at the create: the count is taken once it
# answers (its pipes are the daemon's for the sandbox's life)
curl -s -m 60 -o /dev/null -H "E2b-Sandbox-Id: $B" -H "E2b-Sandbox-Port: 49999" \
    -H "X-Access-Token: $(jget "$out" 'd["envdAccessToken"]')" -d '{"code":"1"}' "$U/execute"
fds_before=$(daemon_fds)
hx ls --json
is "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(" ".join(str(s[k]) for s in d if s["sandboxID"]==sys.argv[2] for k in ("cpuCount","memoryMB","diskSizeMB","state")))' "$out" "$A")" \
    "1 256 512 running" "ls --json: the sandbox with the resources it was created with"
q=$(cat /sys/fs/cgroup/cpu/hutch/$A/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/hutch/$A/cpu.max 2>/dev/null)
is "$q" 100000 "--cpu 1 is enforced (a quota of one CPU)"
mem=$(cat /sys/fs/cgroup/memory/hutch/$A/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/hutch/$A/memory.max 2>/dev/null)
is "$mem" $((256 << 20)) "--memory 256 is enforced (memory limit 256 MiB)"
hx ls
like "$out" "$A +base +running" "ls: a table with the id, template and state"
like "$out" "$B +code-interpreter-v1" "... and the other one under its alias"
hx ls --state paused
[[ $out != *"$A"* ]] && ok "ls --state paused: not the running one" || not_ok "ls --state paused: not the running one"

# --- exec ---
hx exec "$A" -- sh -c 'echo out; echo err >&2; echo "$FOO"; exit 3'
is "$rc/$out/$err" "3/out
bar/err" "exec: stdout and stderr apart, the sandbox's env, the command's exit code"
hx exec "$A" -- true
is "$rc" 0 "exec true: 0"
hx exec "$A" -- sh -c 'kill -9 $$'
is "$rc" 137 "a command killed by SIGKILL: 128+9"
hx exec "$A" -- sh -c 'kill -TERM $$'
is "$rc" 143 "a command killed by SIGTERM: 128+15"
hx exec "$A" -- no-such-command
is "$rc" 127 "a command that does not exist: 127"
like "$err" "cannot execute no-such-command" "... and hutch says so"
hx exec "$A" --user root --cwd /tmp --env X=1 -- sh -c 'echo $(id -u) $(pwd) $X'
is "$out" "0 /tmp 1" "exec --user root --cwd --env"
out=$(printf 'a\nb\nc\n' | h exec "$A" -- wc -l)
is "$out" 3 "exec forwards stdin that is not a terminal"
head -c 3000000 /dev/urandom >"$scratch/in"
out=$(h exec "$A" -- sha256sum <"$scratch/in" | cut -d' ' -f1)
is "$out" "$(sha256sum <"$scratch/in" | cut -d' ' -f1)" "3 MB of stdin arrive whole (by hash)"
out=$(h exec "$A" -- cat </dev/null)
is "$?/$out" "0/" "stdin from /dev/null: the command sees its end"
# streaming: each line is seen as it is written, in the order written
out=$(python3 - "$HUTCH" "$A" <<'EOF'
import subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "exec", sys.argv[2], "--", "sh", "-c",
                      "echo one; sleep 1.5; echo two >&2; sleep 1.5; echo three"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
t0 = time.time(); seen = []
for line in p.stdout:
    seen.append("%s@%.1f" % (line.decode().strip(), time.time() - t0))
p.wait()
print(" ".join(seen), p.returncode)
EOF
)
like "$out" "^one@[0-9.]+ two@[0-9.]+ three@[0-9.]+ 0$" "exec streams: one, two, three in order"
t1=$(sed -E 's/^one@([0-9.]+).*/\1/' <<<"$out")
t3=$(sed -E 's/.*three@([0-9.]+).*/\1/' <<<"$out")
python3 -c "import sys; sys.exit(0 if float('$t3') - float('$t1') >= 2.5 else 1)" &&
    ok "... the first line arrives 3 s before the last (as it is written, not at the end)" ||
    not_ok "... the first line arrives 3 s before the last ($out)"

# --- cp ---
head -c $((20 << 20)) /dev/urandom >"$scratch/big"
want=$(sha256sum <"$scratch/big" | cut -d' ' -f1)
hx cp "$scratch/big" "$A:/tmp/big"
is "$rc" 0 "cp LOCAL ID:PATH, 20 MiB"
is "$(h exec "$A" -- sha256sum /tmp/big | cut -d' ' -f1)" "$want" "... arrives whole (by hash)"
hx cp "$A:/tmp/big" "$scratch/back"
is "$rc" 0 "cp ID:PATH LOCAL, 20 MiB"
is "$(sha256sum <"$scratch/back" | cut -d' ' -f1)" "$want" "... arrives whole (by hash)"
mkdir "$scratch/dir"
h cp "$A:/tmp/big" "$scratch/dir" && cmp -s "$scratch/big" "$scratch/dir/big" &&
    ok "cp into a local directory keeps the file name" || not_ok "cp into a local directory keeps the file name"
echo small >"$scratch/small"
h cp "$scratch/small" "$A:/home/user/" && is "$(h exec "$A" -- cat /home/user/small)" small "cp to a PATH ending in / keeps the file name" ||
    not_ok "cp to a PATH ending in / keeps the file name"
: >"$scratch/empty"
h cp "$scratch/empty" "$A:/tmp/empty" && h cp "$A:/tmp/empty" "$scratch/empty-back" && [ -f "$scratch/empty-back" ] && [ ! -s "$scratch/empty-back" ] &&
    ok "an empty file both ways" || not_ok "an empty file both ways"
hx cp "$A:/no/such/file" "$scratch/none"
is "$rc" 1 "cp of a missing file: exit 1"
[ ! -e "$scratch/none" ] && ok "... and no local file is made" || not_ok "... and no local file is made"
hx cp "$scratch/nonexistent" "$A:/tmp/x"
is "$rc" 1 "cp of a missing local file: exit 1"

# --- sh, through a pty ---
cat >"$scratch/ptyharness.py" <<'EOF'
import os, pty, sys, time, select, fcntl, termios, struct, signal
hutch, sid = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    os.execv(hutch, [hutch, "sh", sid])
out = b""
def wait_for(pat, t=20):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:
                return False
            if not d:
                return False
            out += d
            if pat in out:
                return True
    return False
# the local terminal is raw while the shell runs: no local echo, no line discipline
wait_for(b"$")
lflag = termios.tcgetattr(fd)[3]
print("raw", "yes" if not lflag & termios.ICANON else "no")
os.write(fd, b"echo $((6*7))MARK\r")
print("typed", wait_for(b"42MARK"))
os.write(fd, b"stty size\r")
print("size", wait_for(b"30 100"))
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
os.kill(pid, signal.SIGWINCH)
time.sleep(0.5)
os.write(fd, b"stty size\r")
print("resized", wait_for(b"40 120"))
os.write(fd, b"exit 5\r")
wait_for(b"\0never", 5)
_, st = os.waitpid(pid, 0)
print("exit", os.waitstatus_to_exitcode(st))
print("restored", "yes" if termios.tcgetattr(fd)[3] & termios.ICANON else "no")
EOF
out=$(timeout 90 python3 "$scratch/ptyharness.py" "$HUTCH" "$A" 2>&1)
like "$out" "raw yes" "sh: the terminal is raw while the shell runs"
like "$out" "typed True" "sh: a typed command's output comes back"
like "$out" "size True" "sh: the shell's pty has the terminal's size (30x100)"
like "$out" "resized True" "sh: SIGWINCH resizes it (40x120)"
like "$out" "exit 5" "sh: hutch exits with the shell's status"
like "$out" "restored yes" "sh: the terminal is restored at the end"

# --- pause, resume ---
hx pause "$A"
is "$rc" 0 "pause"
hx ls --state paused
like "$out" "$A +base +paused" "ls --state paused shows it"
hx pause "$A"
is "$rc" 1 "pause again: exit 1"
like "$err" "already paused" "... the daemon's reason"
hx exec "$A" -- true
is "$rc" 125 "exec in a paused sandbox: 125"
like "$err" "hutch resume $A" "... and it says how to resume it"
hx resume "$A"
is "$rc" 0 "resume"
is "$(h exec "$A" -- echo back)" back "exec after resume"

# --- logs ---
hx logs "$A"
is "$rc" 0 "logs"
like "$out" "sandbox created" "logs: created"
like "$out" "command [0-9]+ started: sh -c echo out; echo err" "logs: a command started, with its command line"
like "$out" "command [0-9]+ ended: exit code 3 after [0-9.]+ m?s \(CPU [0-9.]+ m?s, peak memory [0-9.]+ [KM]?i?B\)" \
    "logs: the command ended with its exit code, duration, CPU and peak memory"
like "$out" "ended: killed by signal 9" "logs: the SIGKILLed one"
like "$out" "sandbox paused.*sandbox resumed" "logs: paused, then resumed"
hx logs "$A" --json
is "$(jget "$out" '[e["fields"]["exitCode"] for e in d if e["fields"]["event"]=="command_ended"][0]')" 3 \
    "logs --json: structured entries (the first command's exitCode 3)"

# the API itself: E2B's shape, paging
r=$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs")
is "$(jget "$r" 'sorted(d.keys()) == ["logEntries","logs"] and sorted(d["logs"][0].keys()) == ["line","timestamp"] and d["logs"][0]["line"]')" "sandbox created" \
    "GET /sandboxes/ID/logs: {logs:[{timestamp,line}], logEntries:[...]}"
total=$(jget "$r" 'len(d["logs"])')
hdrs=$(curl -s -D - -o "$scratch/p1" -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs?limit=2")
next=$(grep -i '^x-next-token:' <<<"$hdrs" | tr -d '\r' | awk '{print $2}')
p2=$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs?limit=2&nextToken=$next")
is "$(jget "$(cat "$scratch/p1")" 'len(d["logs"])') $(jget "$p2" 'd["logs"][0]["line"]')" "2 $(jget "$r" 'd["logs"][2]["line"]')" \
    "limit=2 gives two, and X-Next-Token the page after them"
all_pages=$(n=0; tok=; while :; do
    hd=$(curl -s -D - -o "$scratch/pg" -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs?limit=3${tok:+&nextToken=$tok}")
    n=$((n + $(jget "$(cat "$scratch/pg")" 'len(d["logs"])')))
    tok=$(grep -i '^x-next-token:' <<<"$hd" | tr -d '\r' | awk '{print $2}')
    [ -z "$tok" ] && break
done; echo $n)
is "$all_pages" "$total" "paging by 3 to the end gives every entry once ($total)"
future=$(( ($(date +%s) + 3600) * 1000 ))
is "$(jget "$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs?start=$future")" 'len(d["logs"])')" 0 "start after the last event: none"
for bad in limit=0 limit=1001 limit=x start=-1 nextToken=abc; do
    is "$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" "$U/sandboxes/$A/logs?$bad")" 400 "logs?$bad: 400"
done
is "$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" "$U/sandboxes/nosuchsandbox/logs")" 404 "logs of an unknown sandbox: 404"
# v2: E2B's SandboxLogsV2Response, cursor either way, level, search
v2=$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs")
is "$(jget "$v2" 'list(d.keys()) == ["logs"] and sorted(d["logs"][0].keys()) == ["fields","level","message","timestamp"] and d["logs"][0]["message"]')" "sandbox created" \
    "GET /v2/sandboxes/ID/logs: {logs:[{timestamp,level,message,fields}]}, oldest first"
is "$(jget "$v2" 'len(d["logs"])')" "$total" "... every entry"
back=$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?direction=backward&limit=2")
is "$(jget "$back" '[e["message"] for e in d["logs"]]')" "$(jget "$v2" '[e["message"] for e in d["logs"]][::-1][:2]')" \
    "direction=backward&limit=2: the newest two, newest first"
# the third entry's time T: backward from T ends with it, forward from T starts with it
T=$(jget "$v2" 'd["logs"][2]["timestamp"]')
mid=$(python3 -c 'import datetime,sys; print(int(datetime.datetime.fromisoformat(sys.argv[1].replace("Z","+00:00")).timestamp()*1000))' "$T")
is "$(jget "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?direction=backward&cursor=$mid")" "[d['logs'][0]['timestamp'] == '$T', all(e['timestamp'] <= '$T' for e in d['logs'])]")" "[True, True]" \
    "direction=backward&cursor=T: the entries at or before T, newest first"
is "$(jget "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?cursor=$mid")" "[d['logs'][0]['timestamp'] == '$T', all(e['timestamp'] >= '$T' for e in d['logs'])]")" "[True, True]" \
    "cursor=T: the entries at or after T, oldest first"
want_found=$(jget "$v2" 'sum("killed by signal" in e["message"] for e in d["logs"])')
is "$(jget "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?search=killed+by+signal")" 'str(len(d["logs"])) + " " + str(all("killed by signal" in e["message"] for e in d["logs"]))')" "$want_found True" \
    "search: only the entries whose message holds it ($want_found)"
is "$(jget "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?level=error")" 'len(d["logs"])')" 0 "level=error: none in a sandbox that did not fail"
for bad in direction=up level=fatal cursor=x limit=0; do
    is "$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" "$U/v2/sandboxes/$A/logs?$bad")" 400 "v2 logs?$bad: 400"
done
is "$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" "$U/v2/sandboxes/nosuchsandbox/logs")" 404 "v2 logs of an unknown sandbox: 404"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/sandboxes/$A/logs")" 401 "logs over TCP without the key: 401"

# the create body's resource fields, bounded
for body in '{"cpuCount":0}' '{"cpuCount":65}' '{"cpuCount":"2"}' '{"memoryMB":1}' '{"memoryMB":1.5}' '{"diskSizeMB":9999999999}'; do
    r=$(curl -s -w '\n%{http_code}' -H "X-API-KEY: $KEY" -d "$body" "$U/v2/sandboxes")
    is "$(tail -n1 <<<"$r")/$(jget "$(sed '$d' <<<"$r")" 'd["code"]')" 400/400 "create $body: 400 in E2B's shape"
done

# SIGINT to hutch exec: the command is sent SIGTERM, and hutch exits with its status
"$HUTCH" exec "$A" -- sleep 61 </dev/null &
ex=$!
# once the daemon logged the start, hutch has its handlers (they come before its Start)
for _ in $(seq 150); do h logs "$A" 2>/dev/null | grep -q "started: sleep 61" && break; sleep 0.2; done
t0=$(now_ms)
# the first asks SIGTERM, a second SIGKILL (a SIGTERM through init does not end it yet here)
kill -INT "$ex"
sleep 2
kill -INT "$ex" 2>/dev/null
wait "$ex"
like "$?" "^(143|137)$" "SIGINT to hutch exec: the command gets SIGTERM, then SIGKILL; hutch exits with its status"
[ $(($(now_ms) - t0)) -lt 10000 ] && ok "... at once, not after the command's 61 s" || not_ok "... at once, not after the command's 61 s"

# a deadline: the log says it timed out
hx create --timeout 1
C=$out
made+=("$C")
sleep 3
hx logs "$C"
like "$out" "sandbox killed: timeout: its deadline passed" "logs of a sandbox past its deadline: killed, timeout"

fds_after=$(daemon_fds)
is "$fds_after" "$fds_before" "after all of that the daemon holds as many fds as before ($fds_before)"

# --- kill ---
hx kill "$B"
is "$rc" 0 "kill"
hx kill "$B"
is "$rc" 1 "kill again: exit 1"
like "$err" "sandbox $B not found" "... with the daemon's message"
hx logs "$B"
like "$out" "sandbox killed: killed through the API" "logs of a killed sandbox: killed, and why"

# --- errors ---
for cmd in "exec nosuchsandbox -- true" "sh nosuchsandbox" "cp nosuchsandbox:/x $scratch/x" "pause nosuchsandbox" "resume nosuchsandbox" "logs nosuchsandbox"; do
    hx $cmd
    want=1; [[ $cmd == exec* || $cmd == sh* ]] && want=125
    is "$rc" "$want" "hutch $cmd: exit $want"
    like "$err" "nosuchsandbox not found" "... says the sandbox is not found"
done
for cmd in "create --bogus" "create --cpu 0" "create --env NOEQUALS" "create --timeout x" "ls --state dead" "ls extra" \
    "exec" "exec $A" "exec $A --user nobody -- true" "sh" "cp a b" "cp $A:/a $A:/b" "cp only-one" "kill" "kill a b" "kill ../etc" "logs" "pause -x"; do
    hx $cmd
    is "$rc" 2 "hutch $cmd: a usage error, exit 2"
done

# --- a hostile daemon: the CLI reports and exits, never crashes ---
cat >"$scratch/fake.py" <<'EOF'
import json, os, socket, struct, sys
path, mode = sys.argv[1:]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8); s.settimeout(20)
detail = json.dumps({"sandboxID": "fake", "state": "running", "envdAccessToken": "t"}).encode()
def read_request(c):
    req = b""
    while b"\r\n\r\n" not in req:
        d = c.recv(65536)
        if not d: return req
        req += d
    head, _, body = req.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"): n = int(line.split(b":")[1])
    while len(body) < n:
        d = c.recv(65536)
        if not d: break
        body += d
    return req
for _ in range(2):
    c, _ = s.accept()
    req = read_request(c)
    if req.startswith(b"GET /sandboxes/fake "):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(detail) + detail)
        c.close(); continue
    def frame(flags, obj):
        b = json.dumps(obj).encode(); return bytes([flags]) + struct.pack(">I", len(b)) + b
    if mode == "garbage":
        c.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    elif mode == "huge-body":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n")
        try:
            while True: c.sendall(b"[" * 65536)
        except OSError: pass
    elif mode == "bad-chunk":
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    elif mode == "huge-frame":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n\x00\xff\xff\xff\xff")
    elif mode == "bad-frame":
        body = frame(0, {"event": {"start": {"pid": 1}}}) + b"\x00\x00\x00\x00\x03{{{"
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    elif mode == "bad-base64":
        body = frame(0, {"event": {"start": {"pid": 1}}}) + frame(0, {"event": {"data": {"stdout": "!!!"}}})
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    elif mode == "no-end":
        body = frame(0, {"event": {"start": {"pid": 1}}}) + frame(2, {})
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    elif mode == "close-early":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
    c.close()
    break
EOF
for mode in garbage huge-body bad-chunk huge-frame bad-frame bad-base64 no-end close-early; do
    fake=$scratch/fake-$mode
    python3 "$scratch/fake.py" "$fake" "$mode" &
    bg_pids+=($!)
    for _ in $(seq 150); do [ -S "$fake" ] && break; sleep 0.1; done
    if [ "$mode" = garbage ] || [ "$mode" = huge-body ] || [ "$mode" = close-early ]; then
        out=$(HUTCH_SOCKET=$fake timeout 20 "$HUTCH" ls 2>&1); rc=$?; want=1
    else
        out=$(HUTCH_SOCKET=$fake timeout 20 "$HUTCH" exec fake -- true 2>&1 </dev/null); rc=$?; want=125
    fi
    is "$rc" "$want" "a hostile daemon ($mode): hutch exits $want"
    diag "$(head -c 200 <<<"$out")"
done

# --- nothing left ---
hx kill "$A"
is "$rc" 0 "kill the first"
made=()
left=$(for d in /sys/fs/cgroup/*/hutch/{$A,$B,$C} /sys/fs/cgroup/hutch/{$A,$B,$C}; do [ -d "$d" ] && echo "$d"; done)
is "$left" "" "no cgroup of theirs is left"
kill "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon cleanly"
daemon=
san=$(cat "$scratch"/san.* 2>/dev/null | grep -E "ERROR: AddressSanitizer|runtime error|ERROR: LeakSanitizer" | head -5)
is "$san" "" "the sanitizers found nothing in the daemon or the CLI"
done_testing
