#!/usr/bin/env bash
# envd's directory watching through hutch serve (curl, Connect JSON): the WatchDir stream (each
# event type and name, recursive or not, errors, keepalives, Connect-Timeout-Ms, a paused and a
# killed sandbox, a client that goes away: no watch left in init) and the watcher calls
# (CreateWatcher, GetWatcherEvents, RemoveWatcher: unknown ids, 64 per sandbox, 4096 events
# buffered), with hostile input; the SDK's files.watchDir when node is there.
. "$(dirname "$0")/lib.sh"
use_scratch watch

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-watch
daemon_answers

diag_in() { local l; while IFS= read -r l; do diag "$l"; done; }

r=$(api -X POST -d '{"templateID":"base","timeout":600}' "$U/v2/sandboxes")
A=$(jget "$(body_of "$r")" 'd["sandboxID"]')
T=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$A")
is "$(status_of "$r")" 201 "a sandbox to watch in"
ROOT_AUTH='Authorization: Basic cm9vdDo='

# sh CMD: runs CMD in the sandbox as user (process Start), waits for its end; its output.
sh_in() {
    python3 - "$U" "$A" "$T" "$1" <<'EOF'
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
# rpc METHOD JSON [HEADER]: a unary filesystem call; the body, then the HTTP status.
rpc() {
    curl -s -w '\n%{http_code}' -H "Content-Type: application/json" -H "Connect-Protocol-Version: 1" \
        -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $T" ${3:+-H "$3"} \
        --data-binary "$2" "$U/filesystem.Filesystem/$1"
}
# watch_bg OUT JSON [HEADER...]: WatchDir streamed by curl in the background into OUT; its pid in
# $watch_pid (killed by the test, or on exit).
watch_bg() {
    local out=$1 json=$2
    shift 2
    local hdr=()
    for h in "$@"; do hdr+=(-H "$h"); done
    rm -f "$out" # curl makes it only when bytes come: an old one would answer wait_for
    python3 -c 'import sys,struct; d=sys.argv[1].encode(); sys.stdout.buffer.write(b"\0"+struct.pack(">I",len(d))+d)' \
        "$json" >"$out.req"
    curl -sN -o "$out" -H "Content-Type: application/connect+json" -H "Connect-Protocol-Version: 1" \
        -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $T" "${hdr[@]}" \
        --data-binary @"$out.req" "$U/filesystem.Filesystem/WatchDir" &
    watch_pid=$!
    bg_pids+=("$watch_pid")
}
# reap PID: waits for a background curl that ends by itself; off the list that is killed on exit
# (its pid may be another process's by then). stop_bg PID: kills it first (still running).
reap() {
    wait "$1" 2>/dev/null
    local p keep=()
    for p in "${bg_pids[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
    bg_pids=("${keep[@]}")
}
stop_bg() {
    kill "$1" 2>/dev/null
    reap "$1"
}
# frames FILE: the stream's frames so far, one JSON a line ("EOS " before the end-of-stream).
frames() {
    python3 - "$1" <<'EOF'
import sys, struct
raw = open(sys.argv[1], "rb").read()
while len(raw) >= 5:
    n = struct.unpack(">I", raw[1:5])[0]
    if len(raw) < 5 + n: break
    print(("EOS " if raw[0] & 2 else "") + raw[5:5 + n].decode(errors="replace"))
    raw = raw[5 + n:]
EOF
}
# events FILE: "TYPE name" for each filesystem event of the stream.
events() {
    frames "$1" | python3 -c '
import sys, json
for line in sys.stdin:
    if line.startswith("EOS"): continue
    e = json.loads(line).get("filesystem")
    if e: print(e["type"].replace("EVENT_TYPE_", ""), e["name"])'
}
# wait_for FILE REGEX [SECONDS]: until the stream's bytes so far match REGEX (grep on the raw
# frames: no python started per look, which costs most of this test's time on a loaded host).
wait_for() {
    local i
    for i in $(seq $((${3:-10} * 10))); do
        grep -aqE "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# in_order WANT HAVE: every line of WANT appears in HAVE, in that order.
in_order() {
    python3 - "$1" "$2" <<'EOF'
import sys
want, have = sys.argv[1].splitlines(), sys.argv[2].splitlines()
i = 0
for h in have:
    if i < len(want) and h == want[i]: i += 1
sys.exit(0 if i == len(want) else 1)
EOF
}

sh_in 'mkdir -p w/sub b' >/dev/null

# --- WatchDir: each event type, names relative to the watched directory ---
watch_bg "$scratch/s1" '{"path":"w"}' "Keepalive-Ping-Interval: 1"
wait_for "$scratch/s1" '\{"start":\{\}\}' && ok "WatchDir: the start event comes first" ||
    { not_ok "WatchDir: the start event comes first"; frames "$scratch/s1" | diag_in; }
is "$(frames "$scratch/s1" | head -n1)" '{"start":{}}' "the first frame is exactly {\"start\":{}}"
sh_in 'cd w && echo a > f1 && echo more >> f1 && mv f1 f2 && chmod 600 f2 && rm f2 && touch sub/deep && echo end > last' >/dev/null
wait_for "$scratch/s1" '"last"' || true
ev=$(events "$scratch/s1")
# (the two writes of f1 may come as one WRITE: inotify merges an event identical to the one
# still unread at its queue's tail)
want='CREATE f1
WRITE f1
RENAME f1
CREATE f2
CHMOD f2
REMOVE f2
CREATE last'
in_order "$want" "$ev" && ok "create, write, rename (old name, then the new one created), chmod, remove: each in order" ||
    { not_ok "create, write, rename, chmod, remove: each in order"; diag "$ev"; }
grep -q 'sub/deep' <<<"$ev" && not_ok "not recursive: a subdirectory's file is not reported" ||
    ok "not recursive: a subdirectory's file is not reported"
sleep 2.2
[ "$(frames "$scratch/s1" | grep -c '^{"keepalive":{}}$')" -ge 1 ] && ok "Keepalive-Ping-Interval 1: keepalive frames when quiet" ||
    not_ok "Keepalive-Ping-Interval 1: keepalive frames when quiet"
frames "$scratch/s1" | grep -q '^EOS' && not_ok "the stream stays open while its client is there" ||
    ok "the stream stays open while its client is there"
stop_bg "$watch_pid"

# --- recursive ---
watch_bg "$scratch/s2" '{"path":"/home/user/w","recursive":true}'
wait_for "$scratch/s2" '"start"'
sh_in 'cd w && touch sub/x && mkdir -p new && sleep 0.3 && echo hi > new/y' >/dev/null
wait_for "$scratch/s2" '"new/y"' || true
ev=$(events "$scratch/s2")
in_order 'CREATE sub/x
CREATE new' "$ev" && ok "recursive: a subdirectory's file is named sub/x" ||
    { not_ok "recursive: a subdirectory's file is named sub/x"; diag "$ev"; }
grep -q '^CREATE new/y$' <<<"$ev" && ok "recursive: a new subdirectory is watched too (new/y)" ||
    { not_ok "recursive: a new subdirectory is watched too (new/y)"; diag "$ev"; }
stop_bg "$watch_pid"

# --- errors ---
watch_bg "$scratch/e1" '{"path":"/home/user/nope"}'
reap "$watch_pid"
like "$(frames "$scratch/e1")" '^EOS \{"error":\{"code":"not_found"' "a missing directory: not_found in the end-of-stream frame"
sh_in 'echo x > afile' >/dev/null
watch_bg "$scratch/e2" '{"path":"afile"}'
reap "$watch_pid"
like "$(frames "$scratch/e2")" '^EOS \{"error":\{"code":"invalid_argument"' "a file, not a directory: invalid_argument"
out=$(curl -s -w '\n%{http_code}' -H "Content-Type: application/connect+json" -H "E2b-Sandbox-Id: $A" \
    -H "X-Access-Token: $T" --data-binary '{"path":"w"}' "$U/filesystem.Filesystem/WatchDir")
like "$out" 'invalid_argument' "a body that is not an envelope: invalid_argument"
watch_bg "$scratch/e3" '{"path":'
reap "$watch_pid"
like "$(frames "$scratch/e3")" 'invalid_argument' "malformed JSON in the envelope: invalid_argument"
watch_bg "$scratch/e4" "{\"path\":\"/$(head -c 5000 /dev/zero | tr '\0' a)\"}"
reap "$watch_pid"
like "$(frames "$scratch/e4")" 'invalid_argument' "a 5000-byte path: invalid_argument"
watch_bg "$scratch/e5" "{\"path\":\"/home/user/$(head -c 300 /dev/zero | tr '\0' a)\"}"
reap "$watch_pid"
like "$(frames "$scratch/e5")" 'invalid_argument' "a 300-byte name: invalid_argument"
watch_bg "$scratch/e6" '{"path":"w","recursive":"yes"}'
reap "$watch_pid"
like "$(frames "$scratch/e6")" 'invalid_argument' "recursive that is not a boolean: invalid_argument"
out=$(curl -s -w '\n%{http_code}' -H "Content-Type: application/connect+json" -H "E2b-Sandbox-Id: $A" \
    -H "X-Access-Token: wrong" --data-binary '{}' "$U/filesystem.Filesystem/WatchDir")
like "$out" 'unauthenticated' "a wrong access token: unauthenticated"

# paths that would leave the sandbox: resolved inside it, never on the host
mkdir -p "$scratch/host-only"
sh_in "ln -s '$scratch/host-only' hostlink; ln -s / rootlink" >/dev/null
watch_bg "$scratch/h1" '{"path":"hostlink"}'
reap "$watch_pid"
like "$(frames "$scratch/h1")" 'not_found' "a symlink to a host path: not_found (that path is not in the sandbox)"
watch_bg "$scratch/h2" "{\"path\":\"../../../../..$scratch/host-only\"}"
reap "$watch_pid"
like "$(frames "$scratch/h2")" 'not_found' "../../ up to a host path: not_found"
watch_bg "$scratch/h3" '{"path":"rootlink/tmp"}'
wait_for "$scratch/h3" '"start"'
sh_in 'touch /tmp/inside-marker' >/dev/null
touch "/tmp/hutch-watch-host-marker-$$"
wait_for "$scratch/h3" 'inside-marker' 5 || true
ev=$(events "$scratch/h3")
rm -f "/tmp/hutch-watch-host-marker-$$"
grep -q '^CREATE inside-marker$' <<<"$ev" && ! grep -q 'host-marker' <<<"$ev" &&
    ok "a symlink to /: the sandbox's /tmp is watched, not the host's" ||
    { not_ok "a symlink to /: the sandbox's /tmp is watched, not the host's"; diag "$ev"; }
stop_bg "$watch_pid"

# --- Connect-Timeout-Ms ---
python3 -c 'import sys,struct; d=sys.argv[1].encode(); sys.stdout.buffer.write(b"\0"+struct.pack(">I",len(d))+d)' \
    '{"path":"w"}' >"$scratch/t1.req"
took=$(curl -sN -o "$scratch/t1" -w '%{time_total}' -H "Content-Type: application/connect+json" \
    -H "Connect-Timeout-Ms: 1000" -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $T" \
    --data-binary @"$scratch/t1.req" "$U/filesystem.Filesystem/WatchDir")
like "$(frames "$scratch/t1" | tail -n1)" '^EOS \{"error":\{"code":"deadline_exceeded"' "Connect-Timeout-Ms 1000: the stream ends with deadline_exceeded"
python3 -c 'import sys; sys.exit(0 if 0.9 <= float(sys.argv[1]) < 3 else 1)' "$took" &&
    ok "... after a second ($took s)" || not_ok "... after a second ($took s)"

# --- a client that goes away: the watch ends in init (32 per user there), nothing leaks ---
inotify_in_sandbox() {
    local n=0 p
    for p in $(grep -l "$A" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
        n=$((n + $(find "/proc/$p/fd" -lname 'anon_inode:inotify' 2>/dev/null | wc -l)))
    done
    echo $n
}
inotify_before=$(inotify_in_sandbox)
watch_bg "$scratch/loop" '{"path":"w"}'
wait_for "$scratch/loop" '"start"' 5
is "$(inotify_in_sandbox)" $((inotify_before + 1)) "while a watch is open, its files worker holds one inotify instance more"
stop_bg "$watch_pid"
fds_before=$(daemon_fds)
fails=0
for i in $(seq 65); do
    watch_bg "$scratch/loop" '{"path":"w"}'
    wait_for "$scratch/loop" '"start"' 5 || { fails=$((fails + 1)); frames "$scratch/loop" | head -n2 | diag_in; }
    stop_bg "$watch_pid"
done
is "$fails" 0 "65 watches one after the other, each client gone: every one starts (none left behind in init)"
for _ in $(seq 30); do [ "$(inotify_in_sandbox)" = "$inotify_before" ] && break; sleep 0.1; done
is "$(inotify_in_sandbox)" "$inotify_before" "init holds as many inotify instances as before ($inotify_before)"
for _ in $(seq 30); do [ "$(daemon_fds)" -le "$fds_before" ] && break; sleep 0.1; done
[ "$(daemon_fds)" -le "$fds_before" ] && ok "the daemon holds no more fds than before" ||
    not_ok "the daemon holds no more fds than before ($fds_before, now $(ls /proc/$daemon/fd | wc -l))"

# --- watchers ---
r=$(rpc CreateWatcher '{"path":"b"}')
W=$(jget "$(body_of "$r")" 'd["watcherId"]')
is "$(status_of "$r")" 200 "CreateWatcher: 200"
like "$W" '^w[0-9a-f]+$' "... with a watcherId"
sh_in 'cd b && echo 1 > one && mv one two && chmod 700 two && rm two' >/dev/null
# take_events ID LAST: the watcher's events into $ev, a line each ("TYPE name", then the entry's
# path, size and permissions when it has one), taken until a line LAST is in (each call takes
# what came since the one before), 5 s at most
take_events() {
    local got
    ev=
    for _ in $(seq 50); do
        r=$(rpc GetWatcherEvents "{\"watcherId\":\"$1\"}")
        got=$(jget "$(body_of "$r")" '"\n".join(" ".join([e["type"].replace("EVENT_TYPE_",""), e["name"]] + ([e["entry"]["path"], e["entry"]["size"], e["entry"]["permissions"]] if "entry" in e else [])) for e in d["events"])')
        [ -n "$got" ] && ev=${ev:+$ev$'\n'}$got
        grep -qx "$2" <<<"$ev" && break
        sleep 0.1
    done
}
take_events "$W" 'REMOVE two'
in_order 'CREATE one
WRITE one
RENAME one
CREATE two
CHMOD two
REMOVE two' "$ev" && ok "GetWatcherEvents: the events since the watcher was made, in order" ||
    { not_ok "GetWatcherEvents: the events since the watcher was made, in order"; diag "$r"; }
r=$(rpc GetWatcherEvents "{\"watcherId\":\"$W\"}")
is "$(body_of "$r")" '{"events":[]}' "GetWatcherEvents again: none (they were taken)"
sh_in 'touch b/three' >/dev/null
for _ in $(seq 50); do
    r=$(rpc GetWatcherEvents "{\"watcherId\":\"$W\"}")
    [[ $(body_of "$r") == *'"name":"three"'* ]] && break
    sleep 0.1
done
like "$(body_of "$r")" '"name":"three"' "later events come on the next call"
# includeEntry: the events that leave a file carry its EntryInfo (in the daemon's buffer too)
r=$(rpc CreateWatcher '{"path":"b","includeEntry":true}')
WE=$(jget "$(body_of "$r")" 'd["watcherId"]')
sh_in 'cd b && printf four > four && chmod 600 four && sleep 0.3 && rm four' >/dev/null
take_events "$WE" 'REMOVE four'
grep -qx 'CHMOD four /home/user/b/four 4 -rw-------' <<<"$ev" && grep -qx 'REMOVE four' <<<"$ev" &&
    ok "a watcher with includeEntry: CHMOD with the file's entry, REMOVE without" ||
    { not_ok "a watcher with includeEntry: CHMOD with the file's entry, REMOVE without"; diag "$ev"; }
rpc RemoveWatcher "{\"watcherId\":\"$WE\"}" >/dev/null
r=$(rpc GetWatcherEvents '{"watcherId":"wdoesnotexist"}')
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 404/not_found "GetWatcherEvents of an unknown id: not_found"
r=$(rpc RemoveWatcher "{\"watcherId\":\"$W\"}")
is "$(status_of "$r")/$(body_of "$r")" '200/{}' "RemoveWatcher: {}"
r=$(rpc RemoveWatcher "{\"watcherId\":\"$W\"}")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 404/not_found "RemoveWatcher again: not_found"
r=$(rpc GetWatcherEvents "{\"watcherId\":\"$W\"}")
is "$(status_of "$r")" 404 "GetWatcherEvents of a removed watcher: not_found"
r=$(rpc CreateWatcher '{"path":"/home/user/nope"}')
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 404/not_found "CreateWatcher of a missing directory: not_found"

# hostile input to the watcher calls
r=$(rpc CreateWatcher '{"path":')
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 400/invalid_argument "CreateWatcher with malformed JSON: invalid_argument"
r=$(rpc GetWatcherEvents '{}')
is "$(status_of "$r")" 400 "GetWatcherEvents without a watcherId: 400"
r=$(rpc GetWatcherEvents '{"watcherId":42}')
is "$(status_of "$r")" 400 "a watcherId that is a number: 400"
r=$(rpc RemoveWatcher "{\"watcherId\":\"$(head -c 3000 /dev/zero | tr '\0' w)\"}")
is "$(status_of "$r")" 400 "a 3000-byte watcherId: 400"
r=$(rpc RemoveWatcher '{"watcherId":"w\n../x"}')
is "$(status_of "$r")" 400 "a watcherId with a newline: 400"
r=$(rpc GetWatcherEvents '{"watcherId":"a","watcherId":"b"}')
is "$(status_of "$r")" 400 "a duplicate key: 400"
r=$(head -c 2000000 /dev/zero | tr '\0' ' ' | rpc CreateWatcher @-)
[ "$(status_of "$r")" -ge 400 ] && [ "$(status_of "$r")" -lt 500 ] && ok "a 2 MB body: 4xx" || not_ok "a 2 MB body: 4xx ($(status_of "$r"))"

# 64 watchers per sandbox (init takes 32 per user: half as user, half as root)
ids=()
fails=0
for i in $(seq 64); do
    if [ "$i" -le 32 ]; then r=$(rpc CreateWatcher '{"path":"/home/user/b"}'); else r=$(rpc CreateWatcher '{"path":"/home/user/b"}' "$ROOT_AUTH"); fi
    id=$(grep -o '"watcherId":"w[0-9a-f]*"' <<<"$r" | cut -d'"' -f4)
    [ -n "$id" ] && ids+=("$id") || { fails=$((fails + 1)); diag "$r"; }
done
is "$fails/${#ids[@]}" "0/64" "64 watchers at once"
r=$(rpc CreateWatcher '{"path":"/home/user/b"}' "$ROOT_AUTH")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 429/resource_exhausted "a 65th: resource_exhausted"
like "$(jget "$(body_of "$r")" 'd["message"]')" '64 watchers' "... saying the limit"
for id in "${ids[@]}"; do rpc RemoveWatcher "{\"watcherId\":\"$id\"}" >/dev/null; done
r=$(rpc CreateWatcher '{"path":"b"}')
W=$(jget "$(body_of "$r")" 'd["watcherId"]')
is "$(status_of "$r")" 200 "after removing them, a new watcher is made"

# the buffer: 4096 events, the oldest dropped
sh_in 'cd b && i=1; while [ $i -le 5000 ]; do : > f$i; i=$((i+1)); done' >/dev/null
sleep 2
rpc GetWatcherEvents "{\"watcherId\":\"$W\"}" | sed '$d' >"$scratch/many.json" # over one argv string's limit
is "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["events"]))' "$scratch/many.json")" 4096 "5000 files made: 4096 events kept"
is "$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["events"]; print(e[-1]["name"], e[0]["name"])' "$scratch/many.json")" \
    "f5000 f905" "... the newest, the oldest dropped"
rpc RemoveWatcher "{\"watcherId\":\"$W\"}" >/dev/null

# --- a paused sandbox: the stream waits, and goes on after the resume ---
watch_bg "$scratch/p1" '{"path":"w"}' "Keepalive-Ping-Interval: 1"
wait_for "$scratch/p1" '"start"'
r=$(api -X POST "$U/sandboxes/$A/pause")
is "$(status_of "$r")" 204 "pause with a watch open"
sleep 1.5
r=$(api -X POST -d '{"timeout":600}' "$U/v2/sandboxes/$A/connect")
is "$(status_of "$r")" 201 "resume"
sh_in 'touch w/after-resume' >/dev/null
wait_for "$scratch/p1" '"after-resume"' && ok "the stream from before the pause reports what came after the resume" ||
    { not_ok "the stream from before the pause reports what came after the resume"; frames "$scratch/p1" | diag_in; }
stop_bg "$watch_pid"

# --- a killed sandbox ends the stream with an error ---
r=$(api -X POST -d '{"templateID":"base","timeout":120}' "$U/v2/sandboxes")
K=$(jget "$(body_of "$r")" 'd["sandboxID"]')
made+=("$K")
A0=$A T0=$T
A=$K T=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
r=$(rpc CreateWatcher '{"path":"/home/user"}')
like "$(body_of "$r")" 'watcherId' "a watcher in a second sandbox"
kpid_file=$scratch/k1
watch_bg "$kpid_file" '{"path":"/home/user"}'
wait_for "$kpid_file" '"start"'
api -X DELETE "$U/sandboxes/$K" >/dev/null
reap "$watch_pid"
like "$(frames "$kpid_file" | tail -n1)" '^EOS \{"error":\{"code":"unavailable"' "its sandbox killed: the stream ends with unavailable"
A=$A0 T=$T0

# --- the SDK ---
if [ -d /work/sdk/node_modules/e2b ] && command -v node >/dev/null; then
    out=$(E2B_API_KEY=$KEY E2B_API_URL=$U E2B_SANDBOX_URL=$U NODE_PATH=/work/sdk/node_modules timeout 60 node - "$A" <<'EOF' 2>&1
const { Sandbox } = require('e2b')
;(async () => {
  const sbx = await Sandbox.connect(process.argv[2])
  const seen = []
  const h = await sbx.files.watchDir('/home/user/w', (e) => seen.push(`${e.type} ${e.name}`), { recursive: true })
  await sbx.files.write('/home/user/w/sub/sdk.txt', 'x')
  await sbx.commands.run('mv /home/user/w/sub/sdk.txt /home/user/w/sdk2.txt; rm /home/user/w/sdk2.txt')
  for (let i = 0; i < 50 && !seen.includes('remove sdk2.txt'); i++) await new Promise((r) => setTimeout(r, 100))
  await h.stop()
  let err = ''
  try { await sbx.files.watchDir('/home/user/nope', () => {}) } catch (e) { err = e.constructor.name }
  console.log(JSON.stringify({ seen, err }))
})().catch((e) => { console.log('FAIL ' + e); process.exit(1) })
EOF
    )
    like "$out" '"create sub/sdk.txt"' "SDK files.watchDir: create with a recursive name"
    like "$out" '"rename sub/sdk.txt".*"create sdk2.txt".*"remove sdk2.txt"' "SDK: rename, create, remove"
    like "$out" '"err":"(NotFoundError|FileNotFoundError)"' "SDK: a missing directory throws NotFoundError"
else
    skip "SDK files.watchDir" "no node or no /work/sdk"
fi

kill -0 "$daemon" && ok "the daemon is still there" || not_ok "the daemon is still there"
for id in "${made[@]}"; do curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
made=()
kill "$daemon" && wait "$daemon"
daemon=
grep -qE 'Sanitizer|runtime error' "$LOG" && grep -E 'Sanitizer|runtime error' "$LOG" | head -n 5 | diag_in
grep -qE 'Sanitizer|runtime error' "$LOG" && not_ok "no sanitizer report (leaks included) in the daemon's log" ||
    ok "no sanitizer report (leaks included) in the daemon's log"
done_testing
