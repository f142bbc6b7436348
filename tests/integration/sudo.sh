#!/usr/bin/env bash
# sudo inside sandboxes of hutch serve (src/init/README.md, "sudo"): as the user, `sudo CMD` runs
# CMD as the sandbox's root (or as the user with -u), with the caller's stdio, exit code and
# signals; what it changes stays in its sandbox; init's sudo socket takes hostile clients
# (tests/probe/sudo_client.c) and goes on serving; one sandbox's socket is not another's.
. "$(dirname "$0")/lib.sh"
require_probes sudo_client

KEY=test-key-$$-$RANDOM
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT
LOG=$(mktemp /tmp/hutch-sudo-log.XXXXXX)
daemon=
made=()
cleanup() {
    for id in "${made[@]}"; do curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    rm -f "$LOG"
    [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"
}
trap cleanup EXIT
HUTCH_API_KEY=$KEY "$HUTCH" serve --listen 127.0.0.1:$PORT >>"$LOG" 2>&1 &
daemon=$!
for _ in $(seq 100); do curl -s -o /dev/null "$U/health" && break; sleep 0.1; done
api() { curl -s -H "X-API-KEY: $KEY" "$@"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# run ID TOKEN USER SCRIPT: /bin/sh -c SCRIPT as USER; prints stdout, then "exit=N" (or
# "signal=..." or the error) on a last line of its own.
run() {
    python3 - "$U" "$1" "$2" "$3" "$4" <<'PY'
import sys, json, struct, base64, urllib.request
u, sid, tok, user, script = sys.argv[1:]
body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", script]}, "user": user, "stdin": False}).encode()
req = urllib.request.Request(u + "/process.Process/Start", data=b"\0" + struct.pack(">I", len(body)) + body,
    headers={"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "X-Access-Token": tok})
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

done_testing
