#!/usr/bin/env bash
# hutch serve's lifecycle extras over plain HTTP (curl):
#   - metrics (GET /sandboxes/ID/metrics, GET /sandboxes/metrics): a sample within two seconds
#     of creation with sane figures (cpuCount, memory under its limit, the disk layer's size), CPU
#     and memory that follow what a command does, start/end filters, 404, bad queries;
#   - pause without memory ({"memory": false}): every process gone, the files and env vars kept,
#     paused in get and list, a kill -9 and restart of the daemon meanwhile, the boot on connect
#     (201, same id and token, a new boot id), twice; a kill of a cold-paused sandbox removes
#     everything;
#   - the boot id: the host's is never seen, two sandboxes differ;
#   - hostile bodies and queries.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-lifecycle
list_pids() {
    curl -s -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $1" -H "X-Access-Token: $2" \
        -d '{}' "$U/process.Process/List" | python3 -c '
import sys, json
print(" ".join(str(p["pid"]) for p in json.load(sys.stdin).get("processes", [])))'
}
metrics() { body_of "$(api "$U/sandboxes/$1/metrics${2:+?$2}")"; }
count() { jget "$1" 'len(d)'; }
now() { date +%s; }
host_boot=$(cat /proc/sys/kernel/random/boot_id)

start_daemon && ok "the daemon answers /health" || { not_ok "the daemon answers /health"; cat "$LOG"; done_testing; exit; }

# --- metrics: the first sample, within two seconds ---
created_s=$(now)
r=$(api -X POST -d '{"templateID":"base","envVars":{"FOO":"bar"},"timeout":1800}' "$U/v2/sandboxes")
t0=$(date +%s.%N) # the sandbox exists from its 201 on
# the id without python, whose start-up (a pyenv shim) takes seconds on a loaded host
A=$(grep -o '"sandboxID": *"[a-z0-9]*"' <<<"$r" | sed 's/.*"\([a-z0-9]*\)"$/\1/')
made+=("$A")
m=[]
for _ in $(seq 100); do # a cheap check in the loop: python's start-up is slow on a loaded host
    m=$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$A/metrics")
    [[ $m == *timestampUnix* ]] && break
    sleep 0.05
done
t1=$(date +%s.%N)
took=$(python3 -c "print(round($t1 - $t0, 2))")
is "$(status_of "$r")" 201 "create A: 201"
TA=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
[ "$(count "$m")" -ge 1 ] 2>/dev/null && python3 -c "exit(0 if $took <= 2.5 else 1)" &&
    ok "a sample within ~2 s of the create's answer ($took s)" || not_ok "a sample within ~2 s of the create's answer ($took s, $m)"
first=$(jget "$m" 'json.dumps(d[0])')
is "$(jget "$first" '" ".join(sorted(d))')" \
    "cpuCount cpuUsedPct diskTotal diskUsed memCache memTotal memUsed timestamp timestampUnix" \
    "a sample has the fields of E2B's SandboxMetric"
is "$(jget "$first" 'd["cpuCount"]')" 2 "cpuCount: the sandbox's 2"
is "$(jget "$first" 'd["memTotal"]')" $((512 << 20)) "memTotal: its 512 MiB limit"
is "$(jget "$first" '0 < d["memUsed"] < d["memTotal"] and 0 <= d["memCache"] < d["memTotal"]')" True \
    "0 < memUsed < memTotal ($(jget "$first" 'd["memUsed"]')), memCache too"
is "$(jget "$first" '900 << 20 < d["diskTotal"] <= 1 << 30 and 0 < d["diskUsed"] < d["diskTotal"]')" True \
    "diskTotal is its 1 GiB disk layer, less ext4's own ($(jget "$first" 'd["diskTotal"]')); 0 < diskUsed < it"
is "$(jget "$first" '0 <= d["cpuUsedPct"] <= 100')" True "0 <= cpuUsedPct <= 100"
is "$(jget "$first" ''"$created_s"' - 2 <= d["timestampUnix"] <= '"$(now)")" True "timestampUnix is between the create and now"
is "$(jget "$first" '__import__("datetime").datetime.fromisoformat(d["timestamp"].replace("Z","+00:00")).timestamp() // 1 == d["timestampUnix"]')" True \
    "timestamp (RFC 3339) is the same second"
r=$(api "$U/sandboxes/metrics?sandbox_ids=$A,nosuchsandbox1234567")
is "$(status_of "$r")/$(jget "$(body_of "$r")" '",".join(d["sandboxes"])')" "200/$A" \
    "list metrics: the latest sample of each live sandbox asked for, the unknown one left out"

# --- metrics follow what a command does: two spinners and 200 MiB for 8 s ---
before=$(now)
sh_out "$A" "$TA" 'for i in 1 2; do timeout 8 sh -c \"while :; do :; done\" & done; python3 -c \"import time; b = b\\\"x\\\" * (200 << 20); time.sleep(8)\"; wait' >/dev/null
after=$(now)
m=$(metrics "$A" "start=$before&end=$after")
is "$(jget "$m" 'all('"$before"' <= s["timestampUnix"] <= '"$after"' for s in d) and len(d) >= 1')" True \
    "start/end: only samples within the window ($(count "$m"))"
all=$(metrics "$A")
# (the 2 cores of the test machine are shared: two spinners get far less than both under load)
is "$(jget "$all" 'max(s["cpuUsedPct"] for s in d) >= 10')" True \
    "two spinners show in cpuUsedPct (max $(jget "$all" 'round(max(s["cpuUsedPct"] for s in d))') of 100)"
is "$(jget "$all" 'max(s["memUsed"] for s in d) - min(s["memUsed"] for s in d) >= 150 << 20')" True \
    "200 MiB held by a command shows in memUsed (from $(jget "$all" 'min(s["memUsed"] for s in d) >> 20') to $(jget "$all" 'max(s["memUsed"] for s in d) >> 20') MiB)"
is "$(count "$(metrics "$A" "start=$(($(now) + 100))")")" 0 "a window after now: []"
is "$(count "$(metrics "$A" "end=$((created_s - 100))")")" 0 "a window before the sandbox existed: []"
ts=$(jget "$all" 'd[0]["timestampUnix"]')
is "$(jget "$(metrics "$A" "start=$ts&end=$ts")" 'set(s["timestampUnix"] for s in d) == {'"$ts"'}')" True \
    "start = end: the samples of that second"

# --- metrics: bad queries and unknown sandboxes ---
for q in start=abc start=-1 start=1e3 start=1.5 end=99999999999999999999 "start=20&end=10" \
    "start=1&start=2" start= "start=%00" "end=1%20" "start=$(printf 'a%.0s' $(seq 100))"; do
    r=$(api "$U/sandboxes/$A/metrics?$q")
    is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 400/400 "metrics?$q: 400 in E2B's shape"
done
like "$(body_of "$(api "$U/sandboxes/$A/metrics?start=20&end=10")")" "Invalid time range" "start after end says so"
r=$(api "$U/sandboxes/nosuchsandbox1234567/metrics")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 404/404 "metrics of an unknown sandbox: 404"
r=$(api "$U/sandboxes/metrics")
is "$(status_of "$r")" 400 "list metrics without sandbox_ids: 400"
r=$(api "$U/sandboxes/metrics?sandbox_ids=$(python3 -c 'print(",".join("s%d" % i for i in range(101)))')")
is "$(status_of "$r")" 400 "list metrics of 101 sandboxes: 400 (E2B's maximum is 100)"
r=$(api "$U/sandboxes/metrics?sandbox_ids=a,,b")
is "$(status_of "$r")" 400 "list metrics with an empty id: 400"

# --- pause without memory ---
r=$(api -X POST -d '{"templateID":"base","envVars":{"FOO":"bar"},"timeout":1800}' "$U/v2/sandboxes")
B=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TB=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$B")
is "$(sh_out "$B" "$TB" 'echo kept > /home/user/keep.txt && cat /home/user/keep.txt')" kept "B: a file written"
boot1=$(sh_out "$B" "$TB" 'cat /proc/sys/kernel/random/boot_id')
bootA=$(sh_out "$A" "$TA" 'cat /proc/sys/kernel/random/boot_id')
like "$boot1" '^[0-9a-f-]{36}$' "B's boot id is a uuid"
[ -n "$boot1" ] && [ "$boot1" != "$host_boot" ] && [ "$bootA" != "$host_boot" ] &&
    ok "neither sandbox sees the host's boot id" || not_ok "neither sandbox sees the host's boot id"
[ -n "$bootA" ] && [ "$boot1" != "$bootA" ] && ok "two sandboxes have two boot ids" || not_ok "two sandboxes have two boot ids"
bg=$(bg_start "$B" "$TB" 'sleep 1000')
sleep 0.3
like " $(list_pids "$B" "$TB") " " $bg " "a background command runs (pid $bg)"
r=$(api -X POST -d '{"memory":"x"}' "$U/sandboxes/$B/pause")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 400/400 'pause {"memory":"x"}: 400'
r=$(api -X POST -d '{"memory":false,"memory":true}' "$U/sandboxes/$B/pause")
is "$(status_of "$r")" 400 "pause with memory given twice: 400"
r=$(api -X POST -d '{"memory":false' "$U/sandboxes/$B/pause")
is "$(status_of "$r")" 400 "pause with malformed JSON: 400"
r=$(api -X POST -d '{"memory":false}' "$U/sandboxes/nosuchsandbox1234567/pause")
is "$(status_of "$r")" 404 "pause without memory of an unknown sandbox: 404"
is "$(jget "$(body_of "$(api "$U/sandboxes/$B")")" 'd["state"]')" running "after the refusals B still runs"
r=$(api -X POST -d '{"memory":false}' "$U/sandboxes/$B/pause")
is "$(status_of "$r")" 204 'pause {"memory": false}: 204'
is "$(status_of "$(api -X POST -d '{"memory":false}' "$U/sandboxes/$B/pause")")" 409 "pause again: 409"
is "$(status_of "$(api -X POST "$U/sandboxes/$B/pause")")" 409 "a pause with memory of it: 409"
is "$(jget "$(body_of "$(api "$U/sandboxes/$B")")" 'd["state"]')" paused "get: paused"
is "$(jget "$(body_of "$(api "$U/v2/sandboxes?state=paused")")" '",".join(s["sandboxID"] for s in d)')" "$B" \
    "list state=paused: B"
like "$(run_in "$B" "$TB" 'true')" "HTTP 502" "envd of a cold-paused sandbox: 502"
is "$(status_of "$(api "$U/sandboxes/$B/metrics")")" 200 "metrics of a paused sandbox: 200, what was sampled before"
left=$(for d in /sys/fs/cgroup/*/hutch/$B /sys/fs/cgroup/hutch/$B; do [ -d "$d" ] && echo "$d"; done)
is "$left" "" "no cgroup of B is left: every process is gone"
[ ! -e "$HUTCH_RUN_DIR/$B.sock" ] && [ ! -e "$HUTCH_RUN_DIR/$B.sandbox" ] && ok "its init's socket and record are gone" ||
    not_ok "its init's socket and record are gone"
[ -f "$HUTCH_STATE_DIR/sandboxes/$B/disk.img" ] && ok "its disk layer is kept" || not_ok "its disk layer is kept"

# --- kill -9 of the daemon while B is cold-paused ---
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon && ok "the daemon restarts after kill -9" || not_ok "the daemon restarts after kill -9"
like "$(tail -n1 "$LOG")" "2 sandboxes reopened" "... and reopens both, the cold-paused one too"
is "$(jget "$(body_of "$(api "$U/sandboxes/$B")")" 'd["state"]')" paused "B is still paused after the restart (not failed)"
booting=$(now)
r=$(api -X POST -d '{"timeout":120}' "$U/v2/sandboxes/$B/connect")
is "$(status_of "$r")" 201 "connect: 201, booted again"
is "$(jget "$(body_of "$r")" 'd["sandboxID"]+" "+d["envdAccessToken"]')" "$B $TB" "the same id and token"
is "$(jget "$(body_of "$(api "$U/sandboxes/$B")")" 'd["state"]')" running "get: running"
is "$(sh_out "$B" "$TB" 'cat /home/user/keep.txt')" kept "the file written before the pause is there"
is "$(sh_out "$B" "$TB" 'echo $FOO')" bar "its env vars too"
boot2=$(sh_out "$B" "$TB" 'cat /proc/sys/kernel/random/boot_id')
like "$boot2" '^[0-9a-f-]{36}$' "a boot id after the boot"
[ "$boot2" != "$boot1" ] && [ "$boot2" != "$host_boot" ] && ok "it is a new one, and not the host's" || not_ok "it is a new one, and not the host's"
is "$(list_pids "$B" "$TB")" "" "the background command is gone"
is "$(sh_out "$B" "$TB" 'ps -eo comm= | grep -c ^sleep || true')" 0 "no sleep runs inside"
is "$(status_of "$(api -X POST -d '{}' "$U/v2/sandboxes/$B/connect")")" 200 "connect to it now: 200 (running)"
is "$(jget "$(metrics "$B" "start=$booting")" 'len(d) >= 1')" True "metrics are sampled again after the boot"

# a second round: pause without memory, boot (the polls of the first boot's init made anew)
is "$(status_of "$(api -X POST -d '{"memory":false}' "$U/sandboxes/$B/pause")")" 204 "a second cold pause: 204"
r=$(api -X POST -d '{}' "$U/sandboxes/$B/connect")
is "$(status_of "$r")" 201 "a second boot, through the v1 connect path: 201"
is "$(sh_out "$B" "$TB" 'cat /home/user/keep.txt')" kept "the file is still there"
boot3=$(sh_out "$B" "$TB" 'cat /proc/sys/kernel/random/boot_id')
[ -n "$boot3" ] && [ "$boot3" != "$boot2" ] && ok "a third boot id" || not_ok "a third boot id"

# --- a kill of a cold-paused sandbox removes everything ---
r=$(api -X POST -d '{"templateID":"base","timeout":1800}' "$U/v2/sandboxes")
C=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TC=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$C")
sh_out "$C" "$TC" 'echo x > /home/user/x' >/dev/null
is "$(status_of "$(api -X POST -d '{"memory":false}' "$U/sandboxes/$C/pause")")" 204 "C: a cold pause"
is "$(status_of "$(api -X DELETE "$U/sandboxes/$C")")" 204 "kill of the cold-paused C: 204"
is "$(status_of "$(api "$U/sandboxes/$C")")" 404 "get: 404"
is "$(status_of "$(api -X POST -d '{}' "$U/v2/sandboxes/$C/connect")")" 404 "connect: 404"
[ ! -e "$HUTCH_STATE_DIR/sandboxes/$C" ] && ok "its disk layer is removed" || not_ok "its disk layer is removed"
# and a kill while its boot is under way (connect, then kill at once)
r=$(api -X POST -d '{"templateID":"base","timeout":1800}' "$U/v2/sandboxes")
D=$(jget "$(body_of "$r")" 'd["sandboxID"]')
made+=("$D")
is "$(status_of "$(api -X POST -d '{"memory":false}' "$U/sandboxes/$D/pause")")" 204 "D: a cold pause"
api -X POST -d '{}' "$U/v2/sandboxes/$D/connect" >/dev/null &
conn=$!
sleep 0.02
is "$(status_of "$(api -X DELETE "$U/sandboxes/$D")")" 204 "kill of D while it may be booting: 204"
wait "$conn"
is "$(status_of "$(api "$U/sandboxes/$D")")" 404 "D is gone"
[ ! -e "$HUTCH_STATE_DIR/sandboxes/$D" ] && ok "D's disk layer is removed" || not_ok "D's disk layer is removed"

# --- an idle sandbox's CPU reads low (A, long after its spinners ended) ---
m=$(metrics "$A" "start=$((after + 6))")
[ "$(count "$m")" -ge 1 ] 2>/dev/null && is "$(jget "$m" 'min(s["cpuUsedPct"] for s in d) < 5')" True \
    "an idle sandbox's cpuUsedPct is low ($(jget "$m" 'round(min(s["cpuUsedPct"] for s in d), 1)'))" ||
    ok "# SKIP no idle sample of A yet"

# --- the end: nothing left ---
for id in "$A" "$B"; do
    is "$(status_of "$(api -X DELETE "$U/sandboxes/$id")")" 204 "kill: 204"
done
left=$(for id in "$A" "$B" "$C" "$D"; do for d in /sys/fs/cgroup/*/hutch/$id /sys/fs/cgroup/hutch/$id; do [ -d "$d" ] && echo "$d"; done; done)
is "$left" "" "no cgroup of theirs is left"
is "$(ls "$HUTCH_RUN_DIR" | grep -v '^hutch\.sock$' | grep -c -e '\.sock$' -e '\.sandbox$')" "0" "no record or init socket is left"
is "$(ls "$HUTCH_STATE_DIR/sandboxes" 2>/dev/null | wc -l)" 0 "no disk layer is left"
kill "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon cleanly"
daemon=
grep -q "ERROR: AddressSanitizer\|runtime error\|LeakSanitizer" "$LOG" && { not_ok "the sanitizers found nothing in the daemon"; cat "$LOG"; } ||
    ok "the sanitizers found nothing in the daemon"
made=()
done_testing
