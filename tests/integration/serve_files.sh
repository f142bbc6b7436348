#!/usr/bin/env bash
# envd's /files and the filesystem details the SDK relies on, over plain HTTP (curl) and through
# the real SDK (npm e2b, when /work/sdk or NODE_PATH has it): signed download and upload URLs
# (routed by Host or by the signature alone, checked, expired, for another path, user or
# sandbox), X-Metadata-* kept as user.e2b.* xattrs and returned as metadata, gzip bodies both
# ways (a bomb and a truncated stream refused, nothing half-written left), the owner of what is
# written, and symlinkTarget as an absolute path.
. "$(dirname "$0")/lib.sh"

KEY=test-key-$$-$RANDOM
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT
LOG=$(mktemp /tmp/hutch-serve-files-log.XXXXXX)
WORK=$(mktemp -d /tmp/hutch-serve-files.XXXXXX)
daemon=
made=()
cleanup() {
    for id in "${made[@]}"; do curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    rm -rf "$LOG" "$WORK"
    [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"
}
trap cleanup EXIT
HUTCH_API_KEY=$KEY "$HUTCH" serve --listen 127.0.0.1:$PORT >>"$LOG" 2>&1 &
daemon=$!
for _ in $(seq 100); do curl -s -o /dev/null "$U/health" && break; sleep 0.1; done
curl -s -o /dev/null "$U/health" && ok "the daemon answers /health" ||
    { not_ok "the daemon answers /health"; cat "$LOG"; done_testing; exit; }

api() { curl -s -H "X-API-KEY: $KEY" -w '\n%{http_code}' "$@"; } # body, then the status
status_of() { tail -n1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# sig PATH OPERATION USER TOKEN [EXPIRATION]: the signature the SDK puts in a file URL
sig() {
    python3 - "$@" <<'EOF'
import base64, hashlib, sys
a = sys.argv[1:]
print("v1_" + base64.b64encode(hashlib.sha256(":".join(a).encode()).digest()).decode().rstrip("="))
EOF
}
# fenv ID TOKEN CURL-ARGS...: an envd /files call with the sandbox's headers; body, then status
fenv() { local id=$1 tok=$2; shift 2; curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $tok" "$@"; }
# rpc ID TOKEN METHOD JSON [USER]: a filesystem call over Connect JSON
rpc() {
    local auth=()
    [ -n "${5:-}" ] && auth=(-H "Authorization: Basic $(printf '%s:' "$5" | base64)")
    curl -s -X POST -H 'Content-Type: application/json' -H "E2b-Sandbox-Id: $1" -H "X-Access-Token: $2" \
        "${auth[@]}" -d "$4" "$U/filesystem.Filesystem/$3"
}
# sh_in ID TOKEN CMD [USER]: a command's stdout (base64 frames decoded)
sh_in() {
    local auth=()
    [ -n "${4:-}" ] && auth=(-H "Authorization: Basic $(printf '%s:' "$4" | base64)")
    local body
    body=$(python3 -c 'import json,sys; print(json.dumps({"process":{"cmd":"/bin/sh","args":["-c",sys.argv[1]]},"stdin":False}))' "$3")
    python3 -c 'import sys,struct; d=sys.argv[1].encode(); sys.stdout.buffer.write(b"\0"+struct.pack(">I",len(d))+d)' "$body" |
        curl -s -X POST -H 'Content-Type: application/connect+json' -H "E2b-Sandbox-Id: $1" -H "X-Access-Token: $2" \
            "${auth[@]}" --data-binary @- "$U/process.Process/Start" | python3 -c '
import sys, json, struct, base64
raw = sys.stdin.buffer.read(); out = b""
while raw:
    n = struct.unpack(">I", raw[1:5])[0]; f = json.loads(raw[5:5 + n] or b"{}"); raw = raw[5 + n:]
    d = f.get("event", {}).get("data", {})
    if "stdout" in d: out += base64.b64decode(d["stdout"])
sys.stdout.write(out.decode(errors="replace"))'
}

r=$(api -X POST -d '{"templateID":"base","timeout":300}' "$U/v2/sandboxes")
A=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TA=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$A")
r=$(api -X POST -d '{"templateID":"base","timeout":300}' "$U/v2/sandboxes")
B=$(jget "$(body_of "$r")" 'd["sandboxID"]')
TB=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
made+=("$B")
[ -n "$A" ] && [ -n "$TA" ] && [ -n "$B" ] && ok "two sandboxes" || { not_ok "two sandboxes"; cat "$LOG"; done_testing; exit; }
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary 'signed body' "$U/files?path=/home/user/s.txt")
is "$(status_of "$r")" 200 "a file to fetch by signed URL"

# --- 1. signed URLs ---
S=$(sig /home/user/s.txt read "" "$TA")
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$S" "$U/files")
is "$(body_of "$r")/$(status_of "$r")" "signed body/200" "a signed download URL with no sandbox header: the signature finds its sandbox"
r=$(curl -s -w '\n%{http_code}' -H "Host: 49983-$A.hutch.test" --get --data-urlencode path=/home/user/s.txt \
    --data-urlencode "signature=$S" "$U/files")
is "$(body_of "$r")/$(status_of "$r")" "signed body/200" "... and with the sandbox in the Host (49983-ID.DOMAIN)"
r=$(curl -s -w '\n%{http_code}' -H "Host: 49983-$B.hutch.test" --get --data-urlencode path=/home/user/s.txt \
    --data-urlencode "signature=$S" "$U/files")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["message"]')" "401/invalid signature" "A's signature on a URL for B (Host): 401"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $B" --get --data-urlencode path=/home/user/s.txt \
    --data-urlencode "signature=$S" "$U/files")
is "$(status_of "$r")" 401 "A's signature with E2b-Sandbox-Id of B: 401"
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/other.txt --data-urlencode "signature=$S" "$U/files")
is "$(status_of "$r")" 401 "the signature of one path on another: 401"
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode username=root \
    --data-urlencode "signature=$S" "$U/files")
is "$(status_of "$r")" 401 "... for another user: 401"
r=$(curl -s -w '\n%{http_code}' -X POST -F "file=@/etc/hostname" "$U/files?path=/home/user/s.txt&signature=$S")
is "$(status_of "$r")" 401 "a read signature used for an upload: 401"
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=v1_AAAA" "$U/files")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["code"]')" "401/401" "a made-up signature: 401 in E2B's error shape"
case "$(body_of "$r")$(cat "$LOG")" in *"$TA"*) not_ok "no error and no log line shows the token" ;; *) ok "no error and no log line shows the token" ;; esac
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=" "$U/files")
is "$(status_of "$r")" 401 "an empty signature: 401"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" --get --data-urlencode path=/home/user/s.txt "$U/files")
is "$(status_of "$r")" 401 "neither token nor signature: 401"
r=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: wrong" --get --data-urlencode path=/home/user/s.txt \
    --data-urlencode "signature=$S" "$U/files")
is "$(status_of "$r")" 401 "a right signature with a wrong token: 401 (the token, when it comes, must be right)"
now=$(date +%s)
SE=$(sig /home/user/s.txt read "" "$TA" $((now + 120)))
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$SE" \
    --data-urlencode "signature_expiration=$((now + 120))" "$U/files")
is "$(body_of "$r")/$(status_of "$r")" "signed body/200" "a signature that expires in 2 minutes"
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$SE" \
    --data-urlencode "signature_expiration=$((now + 999))" "$U/files")
is "$(status_of "$r")" 401 "... with its expiration moved later: 401"
SX=$(sig /home/user/s.txt read "" "$TA" $((now - 5)))
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$SX" \
    --data-urlencode "signature_expiration=$((now - 5))" "$U/files")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd["message"]')" "401/signature is already expired" "an expired signature: 401, envd's message"
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$SE" \
    --data-urlencode "signature_expiration=1e9" "$U/files")
is "$(status_of "$r")" 401 "an expiration that is no integer: 401"
SW=$(sig up.txt write user "$TB")
r=$(curl -s -w '\n%{http_code}' -F "file=@-;filename=x" "$U/files?path=up.txt&username=user&signature=$SW" <<<"uploaded")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'd[0]["path"]')" "200//home/user/up.txt" "a signed upload URL (relative path, username=user) writes into its sandbox (B)"
r=$(fenv "$B" "$TB" "$U/files?path=/home/user/up.txt")
is "$(body_of "$r")" uploaded "... and the file is B's"
r=$(fenv "$A" "$TA" "$U/files?path=/home/user/up.txt")
is "$(status_of "$r")" 404 "... not A's"
SL=$(sig ../../../../../etc/shadow read "" "$TA")
r=$(curl -s -w '\n%{http_code}' --get --data-urlencode path=../../../../../etc/shadow --data-urlencode "signature=$SL" "$U/files")
secret=$(head -c 40 /etc/shadow 2>/dev/null)
case $r in *"$secret"*) not_ok "a signed URL for ../../etc/shadow does not give the host's file" ;;
*) ok "a signed URL for ../../etc/shadow does not give the host's file ($(status_of "$r"))" ;; esac
r=$(curl -s -w '\n%{http_code}' -X DELETE --get --data-urlencode path=/home/user/s.txt --data-urlencode "signature=$S" "$U/files")
[ "$(status_of "$r")" -ge 400 ] && ok "a signature on DELETE /files opens nothing ($(status_of "$r"))" || not_ok "a signature on DELETE /files opens nothing"
r=$(curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' -d '{"path":"/"}' \
    "$U/filesystem.Filesystem/ListDir?signature=$S")
[ "$(status_of "$r")" -ge 400 ] && ok "a signature opens no RPC ($(status_of "$r"))" || not_ok "a signature opens no RPC"

done_testing
