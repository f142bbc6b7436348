#!/usr/bin/env bash
# What a restarted daemon knows of the commands that ran on while it was gone (kill -9, and a
# clean stop by SIGTERM): the
# output it had read before (replayed by Connect, in order, the last of a long one as a
# contiguous tail), what List shows (argv, cwd), a command's lifetime (Connect-Timeout-Ms on
# Start) still counted from its start (and not while the sandbox was paused), code contexts kept
# with their state, the metrics sampled before, and no record left once commands and sandbox
# are gone.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-restart
start_daemon
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"base","timeout":900}' "$U/v2/sandboxes")
sbx=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sandboxID"])' "$r" 2>/dev/null)
[ -n "$sbx" ] && made+=("$sbx")
tok=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["envdAccessToken"])' "$r" 2>/dev/null)
[ -n "$sbx" ] && ok "a sandbox is created" || { not_ok "a sandbox is created"; diag "$r"; done_testing; exit; }

CLIENT=$(mktemp /tmp/hutch-restart-client.XXXXXX.py)
trap 'rm -f "$CLIENT" "$CLIENT.tail"; serve_cleanup' EXIT
cat >"$CLIENT" <<'EOF'
import base64, http.client, json, struct, sys, time
port, sid, tok, what = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
H = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": tok}
def env(o):
    b = json.dumps(o).encode()
    return b"\0" + struct.pack(">I", len(b)) + b
def stream(method, body, timeout_ms=None, first_only=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {**H, "Content-Type": "application/connect+json"}
    if timeout_ms:
        h["Connect-Timeout-Ms"] = str(timeout_ms)
    c.request("POST", "/process.Process/" + method, env(body), h)
    r = c.getresponse()
    out, pid = b"", None
    while True:
        head = r.read(5)
        if len(head) < 5:
            break
        f = json.loads(r.read(struct.unpack(">I", head[1:5])[0]) or b"{}")
        if head[0] & 2:
            break
        e = f.get("event", {})
        if "start" in e:
            pid = e["start"]["pid"]
            if first_only:
                c.close()
                return pid, b""  # the client goes: a background command runs on
        if "data" in e and "stdout" in e["data"]:
            out += base64.b64decode(e["data"]["stdout"])
    return pid, out
if what == "starts":  # stdin: a line "LIFETIME_MS SCRIPT" a command (0: none); prints "PID MS"
    # a line each, MS (the wall clock in ms, as now_ms) taken before its Start. One process for them all: the test
    # guest takes over a second to start python3.
    for line in sys.stdin:
        ms, script = line.rstrip("\n").split(" ", 1)
        t = time.time()
        pid = stream("Start", {"process": {"cmd": "/bin/sh", "args": ["-c", script], "cwd": "/tmp"}, "stdin": False},
                     timeout_ms=int(ms) or None, first_only=True)[0]
        print(pid, int(t * 1000), flush=True)
elif what == "replay":  # ARGS: pid: its output as Connect replays it, for 1.5 s
    sys.stdout.buffer.write(stream("Connect", {"process": {"pid": int(sys.argv[5])}}, timeout_ms=1500)[1])
elif what == "list":
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/process.Process/List", "{}", {**H, "Content-Type": "application/json"})
    for p in json.loads(c.getresponse().read()).get("processes", []):
        cfg = p.get("config", {})
        print(p["pid"], cfg.get("cmd"), json.dumps(cfg.get("args")), cfg.get("cwd"))
EOF
client() { python3 "$CLIENT" "$PORT" "$sbx" "$tok" "$@"; }

# Times are checked against what the test measured, not assumed: the test guest (TCG) runs some
# steps 10-30x slower than the host, and a check that came too late to tell says so, failing.
# All times in ms (now_ms).
late() { (($(now_ms) > $1)); } # late LIMIT: now is past LIMIT
sleep_until() { # sleep_until MS
    local d=$(($1 - $(now_ms)))
    ((d > 0)) && sleep "$((d / 1000)).$(printf %03d $((d % 1000)))"
    return 0
}
wait_for() { # wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 if it never did
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do late "$deadline" && return 1; sleep 0.1; done
}
records() { ls "$HUTCH_RUN_DIR/$sbx.cmds" 2>/dev/null | grep -c '\.json$'; }

# Five that end at once first: the running ones' groups (named by request ids) come after
# theirs. A prints 60 lines and waits; L prints 1.3 MB (past the 1 MiB kept); T has a 20 s
# lifetime (A's lines take up to 10 s in the test guest); E ends at once. A and L run until the
# sandbox is killed at the end.
LIFE=20
started=$(client starts <<EOF
0 true
0 true
0 true
0 true
0 true
0 for i in \$(seq 1 60); do echo line\$i; sleep 0.02; done; sleep 3600
0 seq 1 200000; sleep 3600
${LIFE}000 sleep 3600
0 sleep 0.5
EOF
)
read -r pa _ < <(sed -n 6p <<<"$started")
read -r pl _ < <(sed -n 7p <<<"$started")
read -r pt t_start < <(sed -n 8p <<<"$started")
is "$(grep -cE '^[0-9]+ ' <<<"$started")" 9 "nine commands start"
# each running command's record, the ended one's gone, and all of A's output read
has_a_all() { [ "$(records)" = 3 ] && grep -qa line60 "$HUTCH_RUN_DIR/$sbx.cmds/"*.out.* 2>/dev/null; }
wait_for 30 has_a_all
is "$(records)" 3 "each running command has its record in RUN/ID.cmds (the ended one's is gone)"
stamps() { curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$sbx/metrics" |
    python3 -c 'import json,sys; print(" ".join(str(m["timestampUnix"]) for m in json.load(sys.stdin)))' 2>/dev/null; }
metrics_before=$(stamps)
# the restart at least 4 s after T's start, so that a lifetime counted from the restart would
# run out at least 4 s after the one counted from its start
sleep_until $((t_start + 4000))
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
t_restart=$(now_ms)
((t_restart > t_start + (LIFE - 2) * 1000)) &&
    not_ok "the daemon was killed within $((LIFE - 2)) s of T's start (later, T's lifetime cannot be told)"
start_daemon && ok "the daemon restarts after kill -9" || not_ok "the daemon restarts after kill -9"
# T's lifetime ends LIFE s after its start, not after the restart: looked at 1.5 s after the
# first, and before the second
sleep_until $((t_start + LIFE * 1000 + 1500))
list=$(client list)
if late $((t_restart + LIFE * 1000)); then
    not_ok "the adopted command's lifetime ran out on time (looked at too late to tell)"
else
    grep -q "^$pt " <<<"$list" && not_ok "the adopted command's lifetime ran out on time ($LIFE s after its start)" ||
        ok "the adopted command's lifetime ran out on time ($LIFE s after its start)"
fi
grep -q "^$pa " <<<"$list" && ok "the command without a lifetime runs on" || not_ok "the command without a lifetime runs on"
metrics_after=$(stamps)
[ -n "$metrics_before" ] && [[ "$metrics_after" == "$metrics_before"* ]] &&
    ok "getMetrics after the restart still has the samples from before it ($metrics_before)" ||
    { not_ok "getMetrics after the restart still has the samples from before it ('$metrics_before' -> '$metrics_after')"
      diag "$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$sbx/metrics")"; }

# new commands get groups of their own: those of the commands that ran on keep their names
# (the daemon before numbered them from 1 too: 30 reach past theirs)
fresh=$(for _ in $(seq 30); do echo "0 sleep 0.2"; done | client starts | grep -cE '^[0-9]+ ')
is "$fresh" 30 "30 new commands start after the restart (no group clashes with an adopted one's)"
want=$(seq 1 60 | sed 's/^/line/')
is "$(client replay "$pa")" "$want" "Connect after the restart replays all the output read before it, in order"
client replay "$pl" >"$CLIENT.tail"
python3 - "$CLIENT.tail" <<'EOF' && ok "a long output replays as a contiguous tail of at least 512 KiB, up to its end" || not_ok "a long output replays as a contiguous tail of at least 512 KiB, up to its end"
import sys
t = open(sys.argv[1]).read()
lines = t.split("\n")[1:]  # the first may be cut
nums = [int(x) for x in lines if x]
ok = len(t) >= 512 * 1024 and nums[-1] == 200000 and nums == list(range(nums[0], 200001))
if not ok:
    print("# %d bytes, first %s, last %s" % (len(t), nums[:1], nums[-1:]))
sys.exit(0 if ok else 1)
EOF
list=$(client list)
like "$(grep "^$pa " <<<"$list")" "^$pa /bin/sh \[\"-c\", \"for i in .*\"\] /tmp$" "List after the restart shows the adopted command's cmd, args and cwd"

# a clean stop (SIGTERM) leaves every command running too (it is not the sandbox's end)
kill -TERM "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon with status 0"
start_daemon && ok "... and it starts again" || not_ok "... and it starts again"
grep -q "^$pa " <<<"$(client list)" && ok "a command runs on through a SIGTERM stop of the daemon" ||
    not_ok "a command runs on through a SIGTERM stop of the daemon"
is "$(client replay "$pa")" "$want" "... and Connect replays its output after it"

# A lifetime does not count while the sandbox is paused (E2B's paused VM has no clock
# running): P's 10 s run out in 11 s of pause, and it is still there after the resume, as long
# as it ran under 10 s in all (the time before the pause's answer and after the resume's
# request: over 4 s in the test guest).
read -r pp t_pp < <(echo "10000 sleep 3600" | client starts)
curl -s -o /dev/null -X POST -H "X-API-KEY: $KEY" "$U/sandboxes/$sbx/pause"
t_paused=$(now_ms)
sleep 11
t_resume=$(now_ms)
curl -s -o /dev/null -X POST -H "X-API-KEY: $KEY" -d '{"timeout":900}' "$U/sandboxes/$sbx/connect"
list=$(client list)
ran=$((t_paused - t_pp + $(now_ms) - t_resume))
if ((ran > 9500)); then
    not_ok "a command whose 10 s lifetime passed while paused runs on after the resume (it ran $ran ms: too long to tell)"
else
    grep -q "^$pp " <<<"$list" && ok "a command whose 10 s lifetime passed while paused runs on after the resume" ||
        not_ok "a command whose 10 s lifetime passed while paused runs on after the resume"
fi
sleep 11.5
grep -q "^$pp " <<<"$(client list)" && not_ok "... and its lifetime's rest runs out after the resume" ||
    ok "... and its lifetime's rest runs out after the resume"

# code contexts (the code interpreter, port 49999) survive a kill -9 with their state: the
# default one and a created one, forked from the zygote, whose interrupt still works after
ci() { curl -s -m "${2:-30}" -H "E2b-Sandbox-Id: $sbx" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $tok" "$U$1" "${@:3}"; }
text_of() { python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("type") == "result": print(m.get("text")); break
    if m.get("type") == "error": print("error", m.get("name"), m.get("value")); break'; }
count_of() { python3 -c 'import json,sys
print([json.loads(l).get("execution_count") for l in sys.stdin if "number_of_executions" in l][:1])' | tr -d '[]'; }
is "$(ci /execute 60 -d '{"code":"kept = 41; kept"}' | text_of)" 41 "a variable in the default python context"
sleep 1.5 # the zygote (started with that first context) imports IPython
ctx=$(ci /contexts 60 -d '{"cwd":"/tmp"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
is "$(ci /execute 30 -d "{\"code\":\"mine = 'c'; mine\",\"context_id\":\"$ctx\"}" | text_of)" c "a variable in a created context"
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon
out=$(ci /execute 30 -d '{"code":"kept + 1"}')
is "$(text_of <<<"$out")" 42 "after a kill -9 of the daemon the default context has its variable"
is "$(count_of <<<"$out")" 2 "... and counts on from its execution count (2: one before the restart)"
out=$(ci /execute 30 -d "{\"code\":\"import os; (mine, os.getcwd())\",\"context_id\":\"$ctx\"}")
is "$(text_of <<<"$out")" "('c', '/tmp')" "... and the created one its variable and cwd"
is "$(count_of <<<"$out")" 2 "... and its count"
ci /contexts 10 | grep -q "$ctx" && ok "... and it is listed" || not_ok "... and it is listed"
ci /execute 2 -d "{\"code\":\"import time; time.sleep(300)\",\"context_id\":\"$ctx\"}" >/dev/null
t0=$(date +%s.%N)
is "$(ci /execute 20 -d "{\"code\":\"mine\",\"context_id\":\"$ctx\"}" | text_of)" c "a client gone from a long cell interrupts it after the restart too, state kept"
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{exit !(b-a < 5)}' && ok "... within 5 s" || not_ok "... within 5 s"
kill -TERM "$daemon"
wait "$daemon"
start_daemon
is "$(ci /execute 30 -d '{"code":"kept + 2"}' | text_of)" 43 "after a SIGTERM stop of the daemon the default context has its variable"
is "$(ci /execute 30 -d "{\"code\":\"mine\",\"context_id\":\"$ctx\"}" | text_of)" c "... and the created one"

curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$sbx"
sbx_gone=$sbx
sbx=
[ -e "$HUTCH_RUN_DIR/$sbx_gone.cmds" ] && not_ok "no record is left once the sandbox is killed" ||
    ok "no record is left once the sandbox is killed"
# --- more live sandboxes than the daemon reopens before it listens (SBX_REOPEN_FIRST, 64): the
# rest come back from the loop, and one asked for first comes back at once ---
# (on the host only: the test guest runs 3-5x slower, and this is no cgroup v2 path)
reopen_from_the_loop() {
    many=()
    for _ in $(seq 70); do
        r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"base","timeout":600}' "$U/v2/sandboxes")
        e=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["sandboxID"], d["envdAccessToken"])' "$r" 2>/dev/null)
        [ -n "$e" ] && many+=("$e") && made+=("${e%% *}")
    done
    is "${#many[@]}" 70 "70 sandboxes are made"
    list_status() {
        curl -s -o /dev/null -w '%{http_code}' -m 30 -X POST -H 'Content-Type: application/json' \
            -H "E2b-Sandbox-Id: $1" -H "X-Access-Token: $2" -d '{}' "$U/process.Process/List"
    }
    kill -9 "$daemon"
    wait "$daemon" 2>/dev/null
    start_daemon && ok "the daemon restarts with 70 live" || not_ok "the daemon restarts with 70 live"
    newest=${many[69]} second=${many[68]} # reopened last: the rows come oldest first
    is "$(list_status "${newest%% *}" "${newest#* }")" 200 "the newest answers at once (reopened for the request)"
    is "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/${second%% *}")" 204 \
        "the next newest is killed at once (reopened for the kill)"
    n=0
    for e in "${many[@]:0:68}" "$newest"; do [ "$(list_status "${e%% *}" "${e#* }")" = 200 ] && n=$((n + 1)); done
    is "$n" 69 "all 69 others answer List"
    is "$(list_status "${second%% *}" "${second#* }")" 502 "the killed one does not"
    for _ in $(seq 100); do grep -q "more sandboxes reopened from the loop" "$LOG" && break; sleep 0.1; done
    like "$(grep 'sandboxes reopened\|reopened from the loop' "$LOG" | tail -n3 | tr '\n' ' ')" \
        "6 more live sandboxes are reopened from the loop.*; 64 sandboxes reopened.* 6 more sandboxes reopened from the loop" \
        "64 reopened before it listened, the other 6 after"
    for e in "${many[@]}"; do curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/${e%% *}"; done
    left=$(for e in "${many[@]}"; do for d in /sys/fs/cgroup/*/hutch/"${e%% *}" /sys/fs/cgroup/hutch/"${e%% *}"; do [ -d "$d" ] && echo "$d"; done; done)
    is "$left" "" "all 70 are gone when killed"
}
if [ "${HUTCH_TEST_GUEST:-0}" = 1 ]; then
    skip "70 live sandboxes through a restart" "the slow test guest leaves it to the host"
else
    reopen_from_the_loop
fi

grep -E "ERROR: (Address|Leak)Sanitizer|runtime error" "$LOG" >/dev/null &&
    { not_ok "no sanitizer report"; grep -A5 Sanitizer "$LOG" | head -30; } || ok "no sanitizer report"
done_testing
