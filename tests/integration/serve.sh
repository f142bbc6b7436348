#!/usr/bin/env bash
# hutch serve over plain HTTP (curl): the API key, the control plane, envd's process and file
# calls, bad input of several kinds, a kill -9 of the daemon and its restart, deadlines, and
# that nothing is left behind. The SDK's own view is tests/e2e (npm e2b).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve

start_daemon && ok "the daemon answers /health" || { not_ok "the daemon answers /health"; cat "$LOG"; done_testing; exit; }
[ "$(stat -c %a "$HUTCH_STATE_DIR/api-key")" = 600 ] && ok "its first key is in STATE/api-key, mode 0600" ||
    not_ok "its first key is in STATE/api-key, mode 0600"

# --- the API key ---
r=$(curl -s -w '\n%{http_code}' "$U/v2/sandboxes")
is "$(status_of "$r")" 401 "no X-API-KEY: 401"
r=$(curl -s -w '\n%{http_code}' -H "X-API-KEY: wrong" "$U/v2/sandboxes")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" 401/401 "a wrong key: 401, in E2B's error shape"
r=$(curl -s -w '\n%{http_code}' -H "X-API-KEY: $(cat "$HUTCH_STATE_DIR/api-key")" "$U/v2/sandboxes")
is "$(status_of "$r")" 200 "the key from the key file is accepted"

# --- create, get, list ---
r=$(api -X POST -d '{"templateID":"base","metadata":{"suite":"serve"},"envVars":{"FOO":"bar"},"timeout":900}' "$U/v2/sandboxes")
is "$(status_of "$r")" 201 "create: 201"
A=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TA=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$A")
[ -n "$A" ] && [ -n "$TA" ] && ok "create gives an id and an envd token" || not_ok "create gives an id and an envd token"
r=$(api "$U/sandboxes/$A")
is "$(jget "$(body_of "$r")" 'd["state"]+" "+d["metadata"]["suite"]')" "running serve" "get: running, with its metadata"
r=$(api -X POST -d '{"templateID":"code-interpreter-v1","timeout":900}' "$U/sandboxes")
B=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TB=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$B")
is "$(status_of "$r")" 201 "create through the v1 path, with the code-interpreter alias"
r=$(api "$U/v2/sandboxes?metadata=suite%3Dserve")
is "$(jget "$(body_of "$r")" '",".join(s["sandboxID"] for s in d)')" "$A" "list filtered by metadata: only the one that has it"
r=$(curl -s -D - -o /dev/null -H "X-API-KEY: $KEY" "$U/v2/sandboxes?limit=1")
next=$(grep -i '^x-next-token:' <<<"$r" | tr -d '\r' | awk '{print $2}')
r=$(api "$U/v2/sandboxes?limit=1&nextToken=$next")
is "$next/$(jget "$(body_of "$r")" 'd[0]["sandboxID"]')" "$B/$A" "paging: newest first, the next page after X-Next-Token"

# --- bad input ---
r=$(api -X POST -d '{"templateID":' "$U/v2/sandboxes")
is "$(status_of "$r")" 400 "malformed JSON: 400"
r=$(api -X POST -d '{"templateID":"nope"}' "$U/v2/sandboxes")
is "$(status_of "$r")" 404 "an unknown template: 404"
r=$(head -c 3000000 /dev/zero | tr '\0' 'a' | api -X POST --data-binary @- "$U/v2/sandboxes")
is "$(status_of "$r")" 413 "a 3 MB body: 413"
r=$(api "$U/sandboxes/doesnotexist")
is "$(status_of "$r")" 404 "an unknown sandbox: 404"
r=$(api "$U/sandboxes/..%2f..%2fetc")
[ "$(status_of "$r")" -ge 400 ] && [ "$(status_of "$r")" -lt 500 ] && ok "an id with dots and slashes: 4xx" || not_ok "an id with dots and slashes: 4xx ($(status_of "$r"))"
r=$(api -X PUT "$U/sandboxes")
is "$(status_of "$r")" 405 "a method the path does not take: 405"
out=$(printf 'GARBAGE\r\n\r\n' | timeout 5 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(sys.stdin.buffer.read())
print(s.recv(100).decode(errors="replace").split("\r\n")[0])' "$PORT")
like "$out" "^HTTP/1.1 400" "malformed HTTP: 400"

# cpuCount is enforced: the sandbox's group has that many CPUs' worth of bandwidth
cpus=$(jget "$(body_of "$(api "$U/sandboxes/$A")")" 'd["cpuCount"]')
q=$(cat /sys/fs/cgroup/cpu/hutch/$A/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/hutch/$A/cpu.max 2>/dev/null)
is "$q" "$((cpus * 100000))" "its cpuCount of $cpus is enforced (CPU quota $((cpus * 100000)) us per 100 ms)"

# --- envd: commands ---
out=$(envd_stream "$A" wrong-token Start '{"process":{"cmd":"/bin/true"}}' 2>&1)
like "$out" "401" "envd without the sandbox's token: 401"
out=$(run_in "$A" "$TA" 'echo hi; echo $FOO; id -u; pwd' | stdout_of)
is "$out" "$(printf 'hi\nbar\n1000\n/home/user')" "a command: its output, the sandbox's env var, as user in the home"
out=$(run_in "$A" "$TA" 'exit 7')
like "$out" '"exitCode": *7' "its exit code comes in the end event"
out=$(envd_stream "$B" "$TB" Start '{"process":{"cmd":"/bin/sh","args":["-c","id -u"]}}' | stdout_of)
is "$out" 1000 "the second sandbox runs commands too"
out=$(envd_stream "$B" "$TA" Start '{"process":{"cmd":"/bin/true"}}' 2>&1)
like "$out" "401" "one sandbox's token does not open another"

# The system's files as root and through sudo. Where the host's /usr cannot be idmapped (the test
# guest's, over 9p) the daemon said so once, and its files are then nobody's inside: root reads and
# runs them but cannot change them (src/jail/idmap.h); elsewhere they are root's, and root's
# changes go to the sandbox's own layer.
as_root='{"Authorization":"Basic cm9vdDo="}' # root:
out=$(ENVD_HEADERS=$as_root run_in "$A" "$TA" 'id -u; stat -c %u /usr/bin/ls; echo x > /usr/share/hutch-probe && cat /usr/share/hutch-probe' 2>&1 | stdout_of)
if grep -q "/usr, /var/lib/dpkg: the filesystem cannot be idmapped" "$LOG"; then
    is "$out" "$(printf '0\n65534')" "root inside: /usr is nobody's (the daemon said its filesystem cannot be idmapped), and root may not write there"
else
    is "$out" "$(printf '0\n0\nx')" "root inside: /usr is root's, and root writes there"
    is "$(grep -c 'cannot be idmapped' "$LOG")" 0 "... and the daemon said nothing about idmaps"
fi
[ -e /usr/share/hutch-probe ] && not_ok "root's write stayed in the sandbox" || ok "root's write stayed in the sandbox"
out=$(run_in "$A" "$TA" 'sudo id -u; sudo -u user id -u; sudo touch /etc/hutch-sudo && stat -c %u /etc/hutch-sudo' | stdout_of)
is "$out" "$(printf '0\n1000\n0')" "sudo as the user: root's id, another user's, a file of root's made in /etc"

out=$(ENVD_HEADERS='{"Keepalive-Ping-Interval":"1"}' run_in "$A" "$TA" 'sleep 2.5; echo late')
[ "$(grep -c '"keepalive"' <<<"$out")" -ge 2 ] && ok "Keepalive-Ping-Interval 1: keepalive events while a command is quiet" ||
    not_ok "Keepalive-Ping-Interval 1: keepalive events while a command is quiet ($out)"
t0=$(date +%s%N)
out=$(ENVD_HEADERS='{"Connect-Timeout-Ms":"1000"}' run_in "$A" "$TA" 'echo started; sleep 30')
t1=$(date +%s%N)
[ $(((t1 - t0) / 1000000)) -lt 5000 ] && grep -q '^EOS {"error":{"code":"deadline_exceeded"' <<<"$out" && ! grep -q '"end"' <<<"$out" &&
    ok "Connect-Timeout-Ms 1000 on Start: the stream ends at it with deadline_exceeded (the SDK's TimeoutError)" ||
    not_ok "Connect-Timeout-Ms 1000 on Start: the stream ends at it with deadline_exceeded ($(((t1 - t0) / 1000000)) ms: $out)"
left=
for _ in $(seq 50); do
    left=$(run_in "$A" "$TA" 'pgrep -c -x sleep || true' | stdout_of)
    [ "$left" = 0 ] && break
    sleep 0.1
done
is "$left" 0 "... and the command is killed at it"
bg=$(bg_start "$A" "$TA" 'sleep 20')
out=$(ENVD_HEADERS='{"Connect-Timeout-Ms":"800"}' envd_stream "$A" "$TA" Connect "{\"process\":{\"pid\":$bg}}")
like "$out" 'EOS.*deadline_exceeded' "Connect-Timeout-Ms on Connect ends the stream with deadline_exceeded"
r=$(curl -s -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -d '{}' "$U/process.Process/List")
like "$r" "\"pid\": *$bg" "... and the command it followed runs on"
out=$(ENVD_HEADERS='{"Connect-Timeout-Ms":"12x"}' run_in "$A" "$TA" 'echo no' 2>&1)
like "$out" 'HTTP 400.*invalid_argument' "a Connect-Timeout-Ms that is not a number: invalid_argument"
# SIGTERM reaches the default user's command (init signals it, and answers once it has) and ends it
r=$(curl -s -w ' %{http_code}' -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" \
    -d "{\"process\":{\"pid\":$bg},\"signal\":\"SIGNAL_SIGTERM\"}" "$U/process.Process/SendSignal")
is "$r" "{} 200" "SendSignal SIGTERM: 200 {} once init has sent it"
gone=no
for _ in $(seq 50); do
    r=$(curl -s -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -d '{}' "$U/process.Process/List")
    [[ $r =~ \"pid\":\ *$bg[,}] ]] || { gone=yes; break; }
    sleep 0.1
done
is "$gone" yes "SendSignal SIGTERM ends a command of the default user within 5 s (init may signal uid 1000)"
curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" \
    -d "{\"process\":{\"pid\":$bg},\"signal\":\"SIGNAL_SIGKILL\"}" "$U/process.Process/SendSignal"

# --- envd: files ---
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -H 'Content-Type: application/octet-stream' \
    --data-binary 'file body' "$U/files?path=/tmp/serve/a.txt")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd[0]["path"]')" "200//tmp/serve/a.txt" "upload: the written file's path"
r=$(curl -s -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" "$U/files?path=/tmp/serve/a.txt")
is "$r" "file body" "download: the same bytes"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $B" -H "X-Access-Token: $TB" "$U/files?path=/tmp/serve/a.txt")
is "$(status_of "$r")" 404 "the other sandbox does not have it"
secret=$(head -c 40 /etc/shadow 2>/dev/null)
for p in /etc/shadow ../../../../etc/shadow /proc/1/root/etc/shadow; do
    r=$(curl -s -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" --get --data-urlencode "path=$p" "$U/files")
    case $r in *"$secret"*) not_ok "download of $p does not give the host's file" ;; *) ok "download of $p does not give the host's file" ;; esac
done

# --- pause, connect, timeout ---
r=$(api -X POST "$U/sandboxes/$A/pause")
is "$(status_of "$r")" 204 "pause: 204"
r=$(api -X POST "$U/sandboxes/$A/pause")
is "$(status_of "$r")" 409 "pause again: 409"
is "$(jget "$(body_of "$(api "$U/sandboxes/$A")")" 'd["state"]')" paused "get: paused"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" "$U/health")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"],d["sandboxId"]')" "502/(502, '$A')" \
    "envd of a paused sandbox: 502 with its id, as E2B's proxy answers (the SDK's isRunning: false)"
out=$(run_in "$A" "$TA" 'echo woke' 2>&1)
like "$out" "502" "a command on a paused sandbox without autoResume: 502, it stays paused"
r=$(api -X POST -d '{"timeout":900}' "$U/sandboxes/$A/connect")
is "$(status_of "$r")" 201 "connect to the paused one: 201 (resumed)"
r=$(api -X POST -d '{"timeout":900}' "$U/v2/sandboxes/$A/connect")
is "$(status_of "$r")" 200 "connect to the running one: 200"
end_before=$(jget "$(body_of "$(api "$U/sandboxes/$A")")" 'd["endAt"]')
r=$(api -X POST -d '{"timeout":5}' "$U/sandboxes/$A/connect")
is "$(status_of "$r")/$(jget "$(body_of "$(api "$U/sandboxes/$A")")" 'd["endAt"]')" "200/$end_before" \
    "connect with a shorter timeout does not shorten the deadline"
r=$(api -X POST -d '{"templateID":"base","timeout":120,"autoResume":{"enabled":true}}' "$U/v2/sandboxes")
D=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TD=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$D")
is "$(status_of "$(api -X POST "$U/sandboxes/$D/pause")")" 204 "autoResume: pause"
out=$(run_in "$D" "$TD" 'echo woke' | stdout_of)
is "$out/$(jget "$(body_of "$(api "$U/sandboxes/$D")")" 'd["state"]')" woke/running \
    "autoResume: a command on the paused sandbox resumes it and runs"
out=$(run_in "$D" wrong-token 'echo no' 2>&1)
like "$out" '"code": *"unauthenticated"' "envd RPC with a wrong token: Connect's unauthenticated"
is "$(status_of "$(api -X DELETE "$U/sandboxes/$D")")" 204 "autoResume sandbox killed"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $D" -H "X-Access-Token: $TD" "$U/health")
is "$(status_of "$r")" 502 "envd of a killed sandbox: 502"
r=$(api -X POST -d '{"timeout":"x"}' "$U/sandboxes/$A/timeout")
is "$(status_of "$r")" 400 "a timeout that is not a number: 400"

# --- floods of bad requests leak no fd ---
fds_before=$(daemon_fds)
for i in $(seq 100); do
    curl -s -o /dev/null -X POST -H "X-API-KEY: $KEY" -d '{bad' "$U/v2/sandboxes"
    curl -s -o /dev/null "$U/sandboxes/x$i"
done
sleep 0.3
fds_after=$(daemon_fds)
is "$fds_after" "$fds_before" "200 bad requests later the daemon holds as many fds as before ($fds_before)"

# --- kill -9 of the daemon, restart ---
run_in "$A" "$TA" 'echo persisted > /home/user/state.txt' >/dev/null
# a background command: its stream is left after the start event, as the SDK's background does
bg_pid=$(bg_start "$A" "$TA" 'for i in $(seq 1 80); do echo n$i; sleep 0.1; done')
sleep 0.5
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon && ok "the daemon restarts after kill -9" || not_ok "the daemon restarts after kill -9"
like "$(grep "sandboxes reopened" "$LOG" | tail -n1)" "2 sandboxes reopened" "... and reopens both sandboxes"
is "$(jget "$(body_of "$(api "$U/sandboxes/$A")")" 'd["state"]')" running "the first is running after the restart"
out=$(run_in "$A" "$TA" 'cat /home/user/state.txt' | stdout_of)
is "$out" persisted "its files and a new command work after the restart"
# followed to its end (its 80 lines take 8 s here, more in the test guest); the timeout only
# bounds a hang
out=$(ENVD_HEADERS='{"Connect-Timeout-Ms":"60000"}' envd_stream "$A" "$TA" Connect "{\"process\":{\"pid\":$bg_pid}}" | stdout_of)
is "$(head -n1 <<<"$out") $(tail -n1 <<<"$out") $(wc -l <<<"$out")" "n1 n80 80" \
    "a background command started before the kill -9 is connected to again: all its output, to its end"

# --- deadline, kill, nothing left ---
r=$(api -X POST -d '{"templateID":"base","timeout":1}' "$U/v2/sandboxes")
C=$(jget "$(body_of "$r")" 'd["sandboxID"]')
made+=("$C")
sleep 2.5
is "$(status_of "$(api "$U/sandboxes/$C")")" 404 "a sandbox past its deadline is gone"
for id in "$A" "$B"; do
    is "$(status_of "$(api -X DELETE "$U/sandboxes/$id")")" 204 "kill: 204"
done
is "$(status_of "$(api -X DELETE "$U/sandboxes/$A")")" 404 "kill again: 404"
left=$(for d in /sys/fs/cgroup/*/hutch/{$A,$B,$C} /sys/fs/cgroup/hutch/{$A,$B,$C}; do [ -d "$d" ] && echo "$d"; done)
is "$left" "" "no cgroup of theirs is left"
is "$(ls "$HUTCH_RUN_DIR" | grep -v '^hutch\.sock$' | grep -c -e '\.sock$' -e '\.sandbox$')" "0" "no record or init socket is left"
kill "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon cleanly"
daemon=
grep -q "ERROR: AddressSanitizer\|runtime error" "$LOG" && { not_ok "the sanitizers found nothing in the daemon"; cat "$LOG"; } ||
    ok "the sanitizers found nothing in the daemon"
made=()
done_testing
