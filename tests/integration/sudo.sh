#!/usr/bin/env bash
# sudo inside sandboxes of hutch serve (src/init/README.md, "sudo"): as the user, `sudo CMD` runs
# CMD as the sandbox's root (or as the user with -u), with the caller's stdio, exit code and
# signals; what it changes stays in its sandbox; init's sudo socket takes hostile clients
# (tests/probe/sudo_client.c) and goes on serving; one sandbox's socket is not another's; hutch
# run has no sudo.
. "$(dirname "$0")/lib.sh"
require_probes sudo_client

. "$(dirname "$0")/serve_lib.sh"
serve_setup sudo
start_daemon
api() { curl -s -H "X-API-KEY: $KEY" "$@"; } # the body only
# run ID TOKEN USER SCRIPT: /bin/sh -c SCRIPT as USER; prints stdout, then "exit=N" (or
# "signal=..." or the error) on a last line of its own.
run() {
    python3 - "$U" "$1" "$2" "$3" "$4" <<'PY'
import sys, json, struct, base64, urllib.request
u, sid, tok, user, script = sys.argv[1:]
body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", script]}, "user": user, "stdin": False}).encode()
req = urllib.request.Request(u + "/process.Process/Start", data=b"\0" + struct.pack(">I", len(body)) + body,
    headers={"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "X-Access-Token": tok,
             **json.loads(__import__("os").environ.get("ENVD_HEADERS", "{}"))})
raw = urllib.request.urlopen(req, timeout=60).read()
out, end = b"", "no end"
while raw:
    flags, n = raw[0], struct.unpack(">I", raw[1:5])[0]
    frame = json.loads(raw[5:5 + n] or b"{}"); raw = raw[5 + n:]
    if flags & 2:
        continue
    e = frame.get("event", {})
    if "data" in e:
        out += base64.b64decode(e["data"].get("stdout", "")) + base64.b64decode(e["data"].get("stderr", ""))
    if "end" in e:
        end = "exit=%s" % e["end"].get("exitCode", 0) if e["end"].get("exited") else "end=" + json.dumps(e["end"])
sys.stdout.write(out.decode(errors="replace"))
print(("\n" if out and not out.endswith(b"\n") else "") + end)
PY
}
new_sandbox() {
    local r
    r=$(api -X POST -d '{"templateID":"base","timeout":300}' "$U/v2/sandboxes")
    SB=$(jget "$r" 'd["sandboxID"]')
    TK=$(jget "$r" 'd["envdAccessToken"]')
    [ -n "$SB" ] && made+=("$SB")
}
new_sandbox; A=$SB; TA=$TK
new_sandbox; B=$SB; TB=$TK
[ -n "$A" ] && [ -n "$B" ] && ok "two sandboxes" || { not_ok "two sandboxes"; cat "$LOG"; done_testing; exit; }
upload() { # ID TOKEN FILE PATH
    curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $1" -H "X-Access-Token: $2" \
        -H 'Content-Type: application/octet-stream' --data-binary @"$3" "$U/files?path=$4"
}

# --- the basics ---
is "$(run "$A" "$TA" user 'id -u; sudo id -u')" "$(printf '1000\n0\nexit=0')" "as user, sudo id -u is 0"
is "$(run "$A" "$TA" user 'sudo sh -c "exit 7"')" "exit=7" "sudo sh -c 'exit 7' exits 7"
is "$(run "$A" "$TA" user 'echo x | sudo cat')" "$(printf 'x\nexit=0')" "echo x | sudo cat: stdin reaches the command"
is "$(run "$A" "$TA" user 'sudo -u user id -u')" "$(printf '1000\nexit=0')" "sudo -u user id -u is 1000"
is "$(run "$A" "$TA" user 'sudo -u root id -un')" "$(printf 'root\nexit=0')" "sudo -u root: root"
is "$(run "$A" "$TA" user 'sudo -n true')" "exit=0" "sudo -n true exits 0"
is "$(run "$A" "$TA" user 'sudo true')" "exit=0" "sudo true exits 0"
is "$(run "$A" "$TA" user 'sudo -- id -u')" "$(printf '0\nexit=0')" "sudo -- id -u"
is "$(run "$A" "$TA" user 'sudo false')" "exit=1" "sudo false exits 1"
out=$(run "$A" "$TA" user 'sudo -x true')
like "$out" "invalid option -- 'x'.*exit=1" "an unknown option: a clear error, exit 1"
out=$(run "$A" "$TA" user 'sudo no-such-command-here')
like "$out" "no-such-command-here: command not found.*exit=1" "an unknown command: command not found, exit 1"
is "$(run "$A" "$TA" user 'cd /tmp && sudo pwd')" "$(printf '/tmp\nexit=0')" "the command runs in the caller's directory"
is "$(run "$A" "$TA" user 'sudo -i pwd')" "$(printf '/root\nexit=0')" "sudo -i runs in root's home"
is "$(run "$A" "$TA" user 'sudo sh -c "echo \$HOME \$USER \$SUDO_USER \$SUDO_UID"')" "$(printf '/root root user 1000\nexit=0')" \
    "env: HOME and USER are root's, SUDO_USER and SUDO_UID the caller's"
is "$(run "$A" "$TA" user 'export FOO=bar; sudo sh -c "echo [\$FOO]"; sudo -E sh -c "echo [\$FOO]"')" "$(printf '[]\n[bar]\nexit=0')" \
    "the environment is reset, and -E keeps it"
is "$(run "$A" "$TA" user 'sudo FOO=baz sh -c "echo \$FOO"')" "$(printf 'baz\nexit=0')" "sudo VAR=value cmd"
is "$(run "$A" "$TA" user 'sudo sh -c "echo out; echo err >&2"' | sort)" "$(printf 'err\nexit=0\nout')" "stdout and stderr are the caller's"
is "$(run "$A" "$TA" root 'sudo id -u')" "$(printf '0\nexit=0')" "root may sudo too"

# --- writes as root stay in the sandbox ---
mark=sudo-mark-$$-$RANDOM
is "$(run "$A" "$TA" user "echo $mark | sudo tee /etc/$mark >/dev/null; cat /etc/$mark; stat -c %u /etc/$mark")" \
    "$(printf '%s\n0\nexit=0' "$mark")" "sudo writes to /etc/ in this sandbox, as root"
is "$(run "$B" "$TB" user "cat /etc/$mark 2>/dev/null || echo none")" "$(printf 'none\nexit=0')" "... not seen in another sandbox"
[ ! -e "/etc/$mark" ] && ok "... nor on the host" || not_ok "... nor on the host"
is "$(run "$A" "$TA" user "sudo rm /etc/$mark && echo removed")" "$(printf 'removed\nexit=0')" "... and sudo removes it again"

# --- the command is in the caller's command cgroup, and dies with it ---
run "$A" "$TA" user 'sudo sleep 4242 </dev/null >/dev/null 2>&1 & sleep 3; echo started' >/dev/null &
bg_run=$!
for _ in $(seq 50); do pgrep -f '^sleep 4242$' >/dev/null && break; sleep 0.1; done
sleeper=$(pgrep -f '^sleep 4242$' | head -n1)
caller=$(pgrep -f 'sudo sleep 4242$' | head -n1)
if [ -n "$sleeper" ] && [ -n "$caller" ]; then
    is "$(cat /proc/$sleeper/cgroup)" "$(cat /proc/$caller/cgroup)" "the sudo command is in the cgroup of the command that asked"
    like "$(grep -m1 /hutch/ /proc/$sleeper/cgroup)" "/hutch/$A/c[0-9]+\$" "... a command group of its own sandbox"
    su=$(awk '/^Uid:/ {print $2}' /proc/$sleeper/status)
    cu=$(awk '/^Uid:/ {print $2}' /proc/$caller/status)
    [ "$su" -eq $((cu - 1000)) ] && [ "$su" -ne 0 ] && ok "... as the sandbox's root: host uid $su (the caller's is $cu), never the host's root" ||
        not_ok "... as the sandbox's root (host uid $su, the caller's $cu)"
else
    not_ok "the sudo command runs (sleeper '$sleeper', caller '$caller')"
fi
wait $bg_run
for _ in $(seq 50); do pgrep -f '^sleep 4242$' >/dev/null || break; sleep 0.1; done
pgrep -f '^sleep 4242$' >/dev/null && not_ok "the command's end kills what sudo started in its group" ||
    ok "the command's end kills what sudo started in its group"
like "$(run "$A" "$TA" user 'sudo sleep 4243 & p=$!; sleep 0.5; kill -TERM $p; wait $p; echo rc=$?; sleep 0.3; pgrep -f "^sleep 4243" || echo gone')" \
    "rc=143.gone.exit=0\$" "SIGTERM to sudo reaches the command (which dies of it, and so does sudo)"
is "$(run "$A" "$TA" user 'python3 -c "
import subprocess, signal, time
p = subprocess.Popen([\"sudo\", \"sleep\", \"4248\"]); time.sleep(0.5); p.send_signal(signal.SIGINT); print(p.wait())
"; pgrep -f "^sleep 4248" || echo gone')" "$(printf -- '-2\ngone\nexit=0')" "SIGINT too: the command dies of it, and sudo of the same signal"
is "$(run "$A" "$TA" user 'sudo sleep 4244 & p=$!; sleep 0.5; kill -KILL $p; sleep 0.5; pgrep -f "^sleep 4244" || echo gone')" \
    "$(printf 'gone\nexit=0')" "sudo killed by SIGKILL: its command gets SIGHUP and dies too"
is "$(run "$A" "$TA" user 'sudo sh -c "trap \"\" HUP; sleep 4246" & p=$!; sleep 0.5; kill -KILL $p; sleep 3; pgrep -f "^sleep 4246" || echo gone')" \
    "$(printf 'gone\nexit=0')" "... and SIGKILL a little later if it ignores SIGHUP"
ENVD_HEADERS='{"Connect-Timeout-Ms":"1500"}' run "$A" "$TA" user 'sudo sleep 4247' >/dev/null
sleep 0.5
pgrep -f '^sleep 4247$' >/dev/null && not_ok "a command killed by the daemon takes its sudo command with it" ||
    ok "a command killed by the daemon takes its sudo command with it"

# --- hostile clients of the socket ---
[ "$(upload "$A" "$TA" "$PROBES/sudo_client" /tmp/sudo_client)" = 200 ] && ok "the probe is uploaded" || not_ok "the probe is uploaded"
for mode in garbage huge fds host die idle; do
    out=$(run "$A" "$TA" user "chmod +x /tmp/sudo_client && /tmp/sudo_client $mode")
    like "$out" "exit=0\$" "hostile client ($mode) is answered or dropped"
    diag "$(head -n 8 <<<"$out")"
done
out=$(run "$A" "$TA" user '/tmp/sudo_client flood 100')
like "$out" "100 of 100 concurrent clients ran true.*exit=0" "100 concurrent clients are all served"
is "$(run "$A" "$TA" user 'sudo id -u')" "$(printf '0\nexit=0')" "init keeps serving sudo after all of that"
is "$(run "$A" "$TA" user 'id -u')" "$(printf '1000\nexit=0')" "... and the host's commands"
for _ in $(seq 50); do pgrep -f '^sleep 4245$' >/dev/null || break; sleep 0.1; done
pgrep -f '^sleep 4245$' >/dev/null && not_ok "the commands of clients that died are gone" || ok "the commands of clients that died are gone"
init_pid=$(pgrep -f "hutch-init" | while read -r p; do grep -q "/hutch/$A/init" /proc/$p/cgroup 2>/dev/null && echo $p; done | head -n1)
if [ -n "$init_pid" ]; then
    n=$(ls /proc/$init_pid/fd | wc -l)
    [ "$n" -lt 40 ] && ok "init holds $n fds after the hostile clients (none leaked)" || not_ok "init holds $n fds after the hostile clients"
else
    skip "init's fds" "init's pid not found"
fi

# --- one sandbox's socket is not another's ---
ia=$(run "$A" "$TA" user 'stat -c %d:%i /run/hutch/sudo')
ib=$(run "$B" "$TB" user 'stat -c %d:%i /run/hutch/sudo')
[ "$ia" != "$ib" ] && ok "each sandbox has its own socket" || not_ok "each sandbox has its own socket ($ia, $ib)"
is "$(run "$B" "$TB" user 'sudo hostname >/dev/null; sudo cat /etc/'"$mark"'-b 2>/dev/null || echo none')" "$(printf 'none\nexit=0')" \
    "sudo in the other sandbox runs there"
out=$(run "$B" "$TB" user 'ls /proc/*/root/run/hutch/ 2>/dev/null | sort -u | grep -c sudo')
like "$out" "^[01]" "no other sandbox's socket is in reach through /proc"
[ -z "$(ls /run/hutch/sudo 2>/dev/null)" ] && ok "the host has no sudo socket of a sandbox's at its own /run/hutch" ||
    not_ok "the host has no sudo socket at /run/hutch"

# --- hutch run has none: its init only reaps (no agent, no spawner) ---
out=$(hrun -- /bin/sh -c 'command -v sudo; [ -S /run/hutch/sudo ] && echo socket; echo end' 2>&1)
case $out in *"/usr/local/bin/sudo"* | *socket*) not_ok "hutch run has no hutch sudo and no socket ($out)" ;;
*end) ok "hutch run has no hutch sudo and no socket" ;; *) not_ok "hutch run has no hutch sudo ($out)" ;; esac

# --- the end: sandboxes killed, nothing left, the daemon clean ---
for id in "$A" "$B"; do
    is "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id")" 204 "sandbox killed"
done
made=()
left=$(ls -d /sys/fs/cgroup/hutch/"$A" /sys/fs/cgroup/*/hutch/"$A" /sys/fs/cgroup/hutch/"$B" /sys/fs/cgroup/*/hutch/"$B" 2>/dev/null)
is "$left" "" "no cgroup of theirs is left"
kill "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon cleanly"
daemon=
grep -q "ERROR: AddressSanitizer\|runtime error" "$LOG" && { not_ok "the sanitizers found nothing in the daemon"; cat "$LOG"; } ||
    ok "the sanitizers found nothing in the daemon"

# --- a hutch-sudo that sandboxes cannot reach: no sudo, and sandboxes still start ---
private=$(mktemp -d /tmp/hutch-sudo-private.XXXXXX) # 0700
cp "$ROOT/build/hutch-sudo" "$private/"
start_daemon HUTCH_SUDO="$private/hutch-sudo"
new_sandbox
if [ -n "$SB" ]; then
    is "$(run "$SB" "$TK" user 'id -u; command -v sudo || echo none')" "$(printf '1000\nnone\nexit=0')" \
        "an unreachable hutch-sudo: the sandbox starts, without sudo"
    api -o /dev/null -X DELETE "$U/sandboxes/$SB"
    made=()
else
    not_ok "an unreachable hutch-sudo: the sandbox starts, without sudo"
fi
grep -q "no sudo in sandboxes: $private/hutch-sudo is not readable" "$LOG" && ok "... and the daemon says why" ||
    not_ok "... and the daemon says why"
kill "$daemon"
wait "$daemon"
daemon=
rm -rf "$private"

done_testing
