#!/usr/bin/env bash
# A command's input through hutch serve: StreamInput (Connect's client stream: a start event, then
# data events as they come) and SendInput, with input larger than a pipe holds and a command that
# reads it late: nothing lost, nothing reordered, the daemon answering meanwhile, and the
# refusals (data before start, an unknown pid, bad envelopes, a queue past its bound).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-input
start_daemon
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"base","timeout":120}' "$U/v2/sandboxes")
sbx=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sandboxID"])' "$r" 2>/dev/null)
[ -n "$sbx" ] && made+=("$sbx")
tok=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["envdAccessToken"])' "$r" 2>/dev/null)
if [ -z "$sbx" ]; then
    not_ok "a sandbox is created"
    diag "$r" "$(tail -n 20 "$LOG")"
    done_testing
    exit
fi
ok "a sandbox is created"

# The client: each scenario prints NAME=VALUE lines, checked below.
results=$(python3 - "$PORT" "$sbx" "$tok" <<'EOF'
import base64, hashlib, http.client, json, os, struct, sys, threading, time
port, sid, tok = int(sys.argv[1]), sys.argv[2], sys.argv[3]
H = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": tok}

def env(obj, flags=0):
    b = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return bytes([flags]) + struct.pack(">I", len(b)) + b

def frames(raw):
    out = []
    while raw:
        n = struct.unpack(">I", raw[1:5])[0]
        out.append((raw[0], json.loads(raw[5:5 + n] or b"{}")))
        raw = raw[5 + n:]
    return out

class Started:
    """A Start stream followed in a thread: pid, stdout, end."""
    def __init__(self, script):
        self.pid, self.out, self.end, self.ready = None, b"", None, threading.Event()
        self.t = threading.Thread(target=self.run, args=(script,), daemon=True)
        self.t.start()
        self.ready.wait(20)
    def run(self, script):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = env({"process": {"cmd": "/bin/sh", "args": ["-c", script]}, "stdin": True})
        c.request("POST", "/process.Process/Start", body, {**H, "Content-Type": "application/connect+json"})
        r = c.getresponse()
        while True:
            h = r.read(5)
            if len(h) < 5:
                break
            f = json.loads(r.read(struct.unpack(">I", h[1:5])[0]) or b"{}")
            if h[0] & 2:
                self.end = self.end or f
                break
            e = f.get("event", {})
            if "start" in e:
                self.pid = e["start"]["pid"]
                self.ready.set()
            if "data" in e and "stdout" in e["data"]:
                self.out += base64.b64decode(e["data"]["stdout"])
            if "end" in e:
                self.end = e["end"]
        self.ready.set()

def stream_input(messages, raw_tail=b""):
    """StreamInput with a chunked body, one chunk per message; returns (status, frames)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    def body():
        for m in messages:
            yield m if isinstance(m, bytes) else env(m)
        if raw_tail:
            yield raw_tail
    c.request("POST", "/process.Process/StreamInput", body(),
              {**H, "Content-Type": "application/connect+json"}, encode_chunked=True)
    r = c.getresponse()
    return r.status, frames(r.read())

def unary(method, obj):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/process.Process/" + method, json.dumps(obj), {**H, "Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")

def health_ms():
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/health")
    c.getresponse().read()
    return (time.monotonic() - t) * 1000

def data(b):
    return {"data": {"input": {"stdin": base64.b64encode(b).decode()}}}

def say(k, v):
    print(f"{k}={v}", flush=True)

# 1. 4 MiB in 64 KiB events, to a command that reads it only after 2 s: the pipe fills, the
#    daemon's queue fills, the request's body waits; all of it arrives, in order.
blob = os.urandom(4 << 20)
cmd = Started("sleep 2; cat > /tmp/in; wc -c < /tmp/in; sha256sum < /tmp/in | cut -d' ' -f1")
msgs = [{"start": {"process": {"pid": cmd.pid}}}]
for i in range(0, len(blob), 64 << 10):
    msgs.append(data(blob[i:i + (64 << 10)]))
    if i % (1 << 20) == 0:
        msgs.append({"keepalive": {}})
result = {}
th = threading.Thread(target=lambda: result.update(r=stream_input(msgs)), daemon=True)
t0 = time.monotonic()
th.start()
time.sleep(0.8)
say("health_while_waiting_ms", int(health_ms()))
say("input_waiting_after_0.8s", int(th.is_alive()))
th.join(60)
status, fr = result.get("r", (0, []))
say("stream_status", status)
say("stream_frames", json.dumps([[f, m] for f, m in fr], separators=(",", ":")))
say("stream_took_over_1.5s", int(time.monotonic() - t0 > 1.5))
say("close", unary("CloseStdin", {"process": {"pid": cmd.pid}})[0])
cmd.t.join(30)
lines = cmd.out.decode().split()
say("received_bytes", lines[0] if lines else "")
say("received_sha_matches", int(len(lines) > 1 and lines[1] == hashlib.sha256(blob).hexdigest()))

# 2. SendInput past a pipe's size: 512 KiB requests queued for a command that reads only once
#    told to, until the queue's bound (4 MiB waiting) refuses one whole.
cmd = Started("until [ -e /tmp/go ]; do sleep 0.05; done; wc -c")
half = os.urandom(1 << 19)
b64 = base64.b64encode(half).decode()
answers = [unary("SendInput", {"process": {"pid": cmd.pid}, "input": {"stdin": b64}}) for _ in range(10)]
codes = [a[0] for a in answers]
say("sendinput_first_8", ",".join(map(str, codes[:8])))
say("sendinput_last", f"{codes[-1]} {answers[-1][1].get('code')}")
say("sendinput_accepted_bytes", sum(len(half) for c in codes if c == 200))
Started("touch /tmp/go").t.join(20)
unary("CloseStdin", {"process": {"pid": cmd.pid}})
cmd.t.join(30)
say("sendinput_received", cmd.out.decode().strip())

# 3. refusals, each in the stream's end frame
cmd = Started("cat >/dev/null")
st, fr = stream_input([data(b"x")])
say("data_before_start", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": 999999}}}])
say("unknown_pid", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": cmd.pid}}}, env(b'{"data":')])
say("bad_json", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": cmd.pid}}}, env({"keepalive": {}}, flags=1)])
say("compressed_flag", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": cmd.pid}}}], raw_tail=b"\x00\x00\x00")
say("cut_envelope", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": cmd.pid}}}, {"start": {"process": {"pid": cmd.pid}}}])
say("second_start", f"{st} {fr[-1][1].get('error', {}).get('code')}")
st, fr = stream_input([{"start": {"process": {"pid": cmd.pid}}}, b"\x00\xff\xff\xff\xff"])
say("huge_length", f"{st} {fr[-1][1].get('error', {}).get('code')}")
unary("SendSignal", {"process": {"pid": cmd.pid}, "signal": "SIGNAL_SIGKILL"})
cmd.t.join(20)
EOF
)
get() { sed -n "s/^$1=//p" <<<"$results" | head -n1; }

is "$(get stream_status)" 200 "StreamInput: 200"
is "$(get stream_frames)" '[[0,{}],[2,{}]]' "StreamInput: its answer is {} then the end of the stream"
is "$(get received_bytes)" 4194304 "StreamInput: 4 MiB in 64 KiB events all reach the command"
is "$(get received_sha_matches)" 1 "StreamInput: in order, byte for byte (sha256)"
is "$(get input_waiting_after_0.8s)" 1 "StreamInput: the request waits while the command does not read (its body paused)"
is "$(get stream_took_over_1.5s)" 1 "StreamInput: it ends only once the late reader took the input"
h=$(get health_while_waiting_ms)
[ -n "$h" ] && [ "$h" -lt 1000 ] && ok "the daemon answers meanwhile (/health in $h ms)" ||
    not_ok "the daemon answers meanwhile (/health in ${h:-?} ms)"
is "$(get close)" 200 "CloseStdin after a StreamInput: 200"
is "$(get sendinput_first_8)" 200,200,200,200,200,200,200,200 \
    "SendInput: 8 x 512 KiB to a command not reading yet are queued, not refused"
is "$(get sendinput_last)" "429 resource_exhausted" "SendInput: past the 4 MiB that may wait, resource_exhausted"
is "$(get sendinput_received)" "$(get sendinput_accepted_bytes)" \
    "SendInput: the command reads every byte of the requests that were taken, none of the refused"
is "$(get data_before_start)" "200 invalid_argument" "StreamInput: data before start is invalid_argument"
is "$(get unknown_pid)" "200 not_found" "StreamInput: an unknown pid is not_found"
is "$(get bad_json)" "200 invalid_argument" "StreamInput: malformed JSON in an event is invalid_argument"
is "$(get compressed_flag)" "200 invalid_argument" "StreamInput: a compressed envelope is invalid_argument"
is "$(get cut_envelope)" "200 invalid_argument" "StreamInput: a body ending inside an envelope is invalid_argument"
is "$(get second_start)" "200 invalid_argument" "StreamInput: a second start is invalid_argument"
is "$(get huge_length)" "200 invalid_argument" "StreamInput: an envelope of 4 GiB is refused from its header"
kill -0 "$daemon" 2>/dev/null && ok "the daemon is still running" || { not_ok "the daemon is still running"; tail -n 30 "$LOG"; }
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error" "$LOG" >/dev/null &&
    { not_ok "no sanitizer report"; grep -A5 Sanitizer "$LOG" | head -30; } || ok "no sanitizer report"
done_testing
