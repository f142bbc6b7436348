# Shared by the tests of `hutch serve` (sourced after lib.sh): a daemon of the test's own on a free
# loopback port, with its own API key and log, and the helpers every such test uses.
#   serve_setup NAME         KEY, PORT, U (the base URL), daemon, made (ids to kill at the end),
#                            LOG (in $scratch if use_scratch came first, else /tmp/hutch-NAME-log.*);
#                            serve_cleanup on EXIT
#   start_daemon [VAR=VALUE...]  starts it with those variables set (HUTCH_POOL=0 unless given:
#                            a warm pool's hidden sandboxes would change the counts tests make);
#                            1 if /health never answers
#   daemon_answers [VAR=VALUE...]  start_daemon as a check: the test ends, with the log, if not
#   serve_cleanup            kills the sandboxes in made, then the daemon; removes LOG (or the
#                            scratch directory) and the test's private dirs. A test's own cleanup
#                            calls it last.
#   daemon_fds               the daemon's open fds, once its disk pool is full (a spare being
#                            made holds 3: src/serve/disk_pool.h) and the count holds still;
#                            DISK_POOL: the spares it keeps
#   api ARGS...              curl with the key: the body, then the status on a line of its own
#   status_of R, body_of R   the two parts of api's answer
#   jget JSON EXPR           EXPR in Python over the parsed JSON as d; empty when it fails
#   envd_stream ID TOKEN METHOD JSON  a process.Process server-stream call (ENVD_HEADERS: more
#                            headers, as JSON): its frames' JSON, a line each ("EOS " before the
#                            end of stream's); "HTTP CODE BODY" for a refusal
#   run_in ID TOKEN SCRIPT   /bin/sh -c SCRIPT through Start; stdout_of its stdout; sh_out both
#   bg_start ID TOKEN CMD    CMD started, its stream left after the start event; prints its pid

serve_setup() {
    KEY=test-key-$$-$RANDOM
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    U=http://127.0.0.1:$PORT
    if [ -n "${scratch:-}" ]; then
        LOG=$scratch/daemon.log
    else
        LOG=$(mktemp "/tmp/hutch-$1-log.XXXXXX")
    fi
    daemon=
    made=()
    trap serve_cleanup EXIT
}

start_daemon() {
    env HUTCH_API_KEY="$KEY" HUTCH_POOL=0 "$@" "$HUTCH" serve --listen "127.0.0.1:$PORT" >>"$LOG" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "$U/health" && return 0
        sleep 0.1
    done
    return 1
}

daemon_answers() {
    start_daemon "$@" && { ok "the daemon answers"; return 0; }
    not_ok "the daemon answers"
    cat "$LOG"
    done_testing
    exit
}

serve_cleanup() {
    local id
    for id in "${made[@]}"; do curl -s -o /dev/null -m 10 -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    if [ -n "${scratch:-}" ]; then
        lib_cleanup
    else
        rm -f "$LOG"
        [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"
    fi
    return 0
}

daemon_fds() {
    local _ last now same=0
    for _ in $(seq 200); do
        [ "$(ls "$HUTCH_STATE_DIR"/disk-pool/*/disk.img 2>/dev/null | wc -l)" -ge "${DISK_POOL:-4}" ] && break
        sleep 0.1
    done
    # the last spare holds 2 fds until the fsync after its image got its name: a count that
    # held still in 3 reads 50 ms apart
    last=$(ls "/proc/$daemon/fd" | wc -l)
    for _ in $(seq 100); do
        sleep 0.05
        now=$(ls "/proc/$daemon/fd" | wc -l)
        if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; fi
        last=$now
        [ "$same" -ge 2 ] && break
    done
    echo "$last"
}

api() { curl -s -H "X-API-KEY: $KEY" -w '\n%{http_code}' "$@"; }
status_of() { tail -n1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# envd ID TOKEN METHOD JSON: a Connect server-stream call; prints the frames' JSON, one a line
envd_stream() {
    python3 - "$U" "$1" "$2" "$3" "$4" <<'EOF'
import os, sys, json, struct, urllib.request, urllib.error
u, sid, tok, method, body = sys.argv[1:]
data = body.encode()
req = urllib.request.Request(u + "/process.Process/" + method, data=b"\0" + struct.pack(">I", len(data)) + data,
    headers={"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
             "X-Access-Token": tok, **json.loads(os.environ.get("ENVD_HEADERS", "{}"))})
try:
    raw = urllib.request.urlopen(req, timeout=30).read()
except urllib.error.HTTPError as e:  # the status and the body, for the checks of refusals
    print("HTTP", e.code, e.read().decode(errors="replace"))
    sys.exit(1)
while raw:
    flags, n = raw[0], struct.unpack(">I", raw[1:5])[0]
    print(("EOS " if flags & 2 else "") + raw[5:5 + n].decode())
    raw = raw[5 + n:]
EOF
}
run_in() { envd_stream "$1" "$2" Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"$3\"]},\"stdin\":false}"; }
stdout_of() { python3 -c '
import sys, json, base64
out = b""
for line in sys.stdin:
    if line.startswith("EOS"): continue
    e = json.loads(line)["event"]
    if "data" in e and "stdout" in e["data"]: out += base64.b64decode(e["data"]["stdout"])
sys.stdout.write(out.decode())'; }
sh_out() { run_in "$1" "$2" "$3" | stdout_of; }
# s_text: an execute's NDJSON on stdin -> each result's text, each error as "ERROR NAME VALUE"
s_text() { python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m["type"] == "result": print(m.get("text", ""))
    if m["type"] == "error": print("ERROR", m["name"], m["value"])'; }
# bg_start ID TOKEN CMD: starts CMD and leaves its stream after the start event (as the SDK's
# background commands do); prints its pid
bg_start() {
    python3 - "$U" "$1" "$2" "$3" <<'EOF'
import sys, json, struct, http.client
u, sid, tok, cmd = sys.argv[1:]
body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}, "stdin": False}).encode()
c = http.client.HTTPConnection(u.split("//")[1], timeout=20)
c.request("POST", "/process.Process/Start", b"\0" + struct.pack(">I", len(body)) + body,
          {"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "X-Access-Token": tok})
r = c.getresponse()
head = r.read(5); n = struct.unpack(">I", head[1:5])[0]
print(json.loads(r.read(n))["event"]["start"]["pid"])
EOF
}
