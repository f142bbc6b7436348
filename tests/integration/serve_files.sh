#!/usr/bin/env bash
# envd's /files and the filesystem details the SDK relies on, over plain HTTP (curl) and through
# the real SDK (npm e2b, when /work/sdk or NODE_PATH has it): signed download and upload URLs
# (routed by Host or by the signature alone, checked, expired, for another path, user or
# sandbox), X-Metadata-* kept as user.e2b.* xattrs and returned as metadata, Range downloads, gzip bodies both
# ways (a bomb and a truncated stream refused, nothing half-written left), the owner of what is
# written, and symlinkTarget as an absolute path.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-files
WORK=$(mktemp -d /tmp/hutch-serve-files.XXXXXX)
trap 'rm -rf "$WORK"; serve_cleanup' EXIT
daemon_answers
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
r=$(curl -s -w '\n%{http_code}' -X POST -F "file=@/etc/hostname" "$U/files?path=/home/user/s.txt&signature=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$S")")
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
# (a signature is base64: its '+' and '/' must be escaped in a URL, as URLSearchParams does)
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
r=$(curl -s -w '\n%{http_code}' -F "file=@-;filename=x" "$U/files?path=up.txt&username=user&signature=$(enc "$SW")" <<<"uploaded")
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

# --- 3. gzip bodies ---
head -c 300000 /dev/urandom | base64 >"$WORK/plain"
gzip -c "$WORK/plain" >"$WORK/plain.gz"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary @"$WORK/plain.gz" "$U/files?path=/home/user/gz/raw.txt")
is "$(status_of "$r")" 200 "a raw upload with Content-Encoding: gzip"
fenv "$A" "$TA" -o "$WORK/back" "$U/files?path=/home/user/gz/raw.txt" >/dev/null
cmp -s "$WORK/plain" "$WORK/back" && ok "... is stored decoded" || not_ok "... is stored decoded"
# multipart, the whole body gzipped (as envd decodes it before it reads the parts)
python3 - "$WORK" <<'PY'
import gzip, sys
w = sys.argv[1]; data = open(w + "/plain", "rb").read()
b = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/gz/one.txt\"\r\n\r\n" + data + \
    b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/gz/two.txt\"\r\n\r\nsecond\r\n--XyZ--\r\n"
open(w + "/mp.gz", "wb").write(gzip.compress(b))
PY
r=$(fenv "$A" "$TA" -H 'Content-Type: multipart/form-data; boundary=XyZ' -H 'Content-Encoding: gzip' \
    --data-binary @"$WORK/mp.gz" "$U/files")
is "$(status_of "$r")/$(jget "$(body_of "$r")" '",".join(e["path"] for e in d)')" "200//home/user/gz/one.txt,/home/user/gz/two.txt" \
    "a gzipped multipart body with two files"
fenv "$A" "$TA" -o "$WORK/back" "$U/files?path=/home/user/gz/one.txt" >/dev/null
is "$(cmp -s "$WORK/plain" "$WORK/back" && echo same)/$(body_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/two.txt")")" "same/second" "... both decoded"
# downloads: Accept-Encoding gzip gets a gzip body (the SDK's fetch asks for it), identity does not
h=$(curl -s -D - -o "$WORK/dl.gz" -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -H 'Accept-Encoding: gzip' "$U/files?path=/home/user/gz/raw.txt")
like "$(tr -d '\r' <<<"$h")" $'\n[Cc]ontent-[Ee]ncoding: gzip' "a download with Accept-Encoding: gzip says Content-Encoding: gzip"
gzip -dc "$WORK/dl.gz" 2>/dev/null | cmp -s - "$WORK/plain" && ok "... and its body gunzips to the file" || not_ok "... and its body gunzips to the file"
h=$(curl -s -D - -o "$WORK/dl" -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -H 'Accept-Encoding: gzip;q=0, identity' "$U/files?path=/home/user/gz/raw.txt")
case $h in *[Cc]ontent-[Ee]ncoding*) not_ok "gzip;q=0: a plain answer" ;; *) cmp -s "$WORK/dl" "$WORK/plain" && ok "gzip;q=0: a plain answer" || not_ok "gzip;q=0: a plain answer" ;; esac
# Range: one range gets a 206 with its part (never gzipped), an unsatisfiable one a 416, several
# ranges or an If-Range the whole file
size=$(stat -c %s "$WORK/plain")
rng() { : >"$WORK/rb"; curl -s -D "$WORK/rh" -o "$WORK/rb" -w '%{http_code}' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" "$@" "$U/files?path=/home/user/gz/raw.txt"; }
hdr() { tr -d '\r' <"$WORK/rh" | grep -i "^$1:" | cut -d' ' -f2-; }
st=$(rng -H 'Range: bytes=10-19')
is "$st/$(hdr content-range)/$(cmp -s "$WORK/rb" <(tail -c +11 "$WORK/plain" | head -c 10) && echo same)" "206/bytes 10-19/$size/same" \
    "Range bytes=10-19: 206, its Content-Range, those 10 bytes"
st=$(rng -H 'Range: bytes=-7' -H 'Accept-Encoding: gzip')
is "$st/$(hdr content-range)/$(hdr content-encoding)/$(cmp -s "$WORK/rb" <(tail -c 7 "$WORK/plain") && echo same)" \
    "206/bytes $((size - 7))-$((size - 1))/$size//same" "a suffix range with Accept-Encoding gzip: the last 7 bytes, not gzipped"
st=$(rng -H "Range: bytes=$((size - 3))-99999999999")
is "$st/$(stat -c %s "$WORK/rb")" "206/3" "a range past the end is cut to it"
st=$(rng -H "Range: bytes=$size-")
is "$st/$(hdr content-range)" "416/bytes */$size" "a range that starts at the end: 416, Content-Range bytes */size"
st=$(rng -H 'Range: bytes=0-1,5-6')
is "$st/$(cmp -s "$WORK/rb" "$WORK/plain" && echo same)" "200/same" "several ranges: the whole file, 200"
st=$(rng -H 'Range: bytes=0-1' -H 'If-Range: "x"')
is "$st/$(cmp -s "$WORK/rb" "$WORK/plain" && echo same)" "200/same" "Range with an If-Range of another tag: the whole file, 200"
st=$(rng)
is "$st/$(hdr accept-ranges)" "200/bytes" "a whole download says Accept-Ranges: bytes"
# conditional downloads (RFC 9110, 13): its ETag and Last-Modified, 304 when they still hold, 412
# for a failed If-Match, If-Range with the current tag honoured; a change makes a new tag
etag=$(hdr etag)
lastmod=$(hdr last-modified)
like "$etag" '^"[0-9a-f]+-[0-9a-f]+"$' "a download carries an ETag ($etag)"
like "$lastmod" '^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:]{8} GMT$' "... in IMF-fixdate ($lastmod)"
st=$(rng -H "If-None-Match: $etag")
is "$st/$(stat -c %s "$WORK/rb")/$(hdr etag)" "304/0/$etag" "If-None-Match with it: 304, no body, the ETag again"
st=$(rng -H "If-Modified-Since: $lastmod")
is "$st/$(stat -c %s "$WORK/rb")" "304/0" "If-Modified-Since its Last-Modified: 304"
is "$(rng -H 'If-None-Match: "other"')/$(cmp -s "$WORK/rb" "$WORK/plain" && echo same)" "200/same" "If-None-Match with another tag: the file"
is "$(rng -H 'If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT')" 200 "If-Modified-Since long before: the file"
is "$(rng -H 'If-Match: "other"')/$(jget "$(cat "$WORK/rb")" 'd["code"]')" "412/412" "If-Match with another tag: 412 in envd's shape"
is "$(rng -H "If-Match: $etag")" 200 "If-Match with its tag: the file"
is "$(rng -H 'If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT')" 412 "If-Unmodified-Since long before: 412"
st=$(rng -H 'Range: bytes=10-19' -H "If-Range: $etag")
is "$st/$(hdr content-range)" "206/bytes 10-19/$size" "Range with If-Range of its tag: 206"
st=$(rng -H 'Range: bytes=10-19' -H "If-Range: $lastmod")
is "$st" 206 "Range with If-Range of its Last-Modified: 206"
is "$(rng -H 'If-None-Match: garbage' -H 'If-Modified-Since: not a date')" 200 "preconditions that do not parse are ignored: the file"
cond() { : >"$WORK/rb"; curl -s -D "$WORK/rh" -o "$WORK/rb" -w '%{http_code}' -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" "$@" "$U/files?path=/home/user/gz/cond.txt"; }
fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary 'one' "$U/files?path=/home/user/gz/cond.txt" >/dev/null
cond >/dev/null
etag1=$(hdr etag)
sleep 0.05 # past the filesystem's timestamp tick (ext4's is a jiffy): the tag is mtime and size
fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary 'two' "$U/files?path=/home/user/gz/cond.txt" >/dev/null
st=$(cond -H "If-None-Match: $etag1")
is "$st/$(cat "$WORK/rb")" "200/two" "once a file changed (same size), If-None-Match with its old tag: the new file"
[ -n "$etag1" ] && [ "$(hdr etag)" != "$etag1" ] && ok "... under a new ETag ($(hdr etag))" || not_ok "... under a new ETag ($etag1, $(hdr etag))"
fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary '' "$U/files?path=/home/user/gz/empty" >/dev/null
out=$(curl -s -H "E2b-Sandbox-Id: $A" -H "X-Access-Token: $TA" -H 'Accept-Encoding: gzip' "$U/files?path=/home/user/gz/empty" | gzip -dc | wc -c)
is "$out" 0 "an empty file gzipped: a valid empty gzip stream"
# hostile: corrupt, truncated, a bomb, unknown encodings; nothing half-written stays
head -c 200000 "$WORK/plain.gz" >"$WORK/trunc.gz"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary @"$WORK/trunc.gz" "$U/files?path=/home/user/gz/trunc.txt")
is "$(status_of "$r")/$(jget "$(body_of "$r")" '"truncated" in d["message"]')" "400/True" "a truncated gzip body: 400, says truncated"
is "$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/trunc.txt")")" 404 "... and nothing half-written is left"
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); m=len(d)//2; sys.stdout.buffer.write(d[:m]+bytes([d[m]^0xff])+d[m+1:])' "$WORK/plain.gz" >"$WORK/bad.gz"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary @"$WORK/bad.gz" "$U/files?path=/home/user/gz/raw.txt")
is "$(status_of "$r")" 400 "a corrupt gzip body over an existing file: 400"
is "$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/raw.txt")")" 404 "... and the half-written file is gone"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary 'not gzip at all' "$U/files?path=/home/user/gz/notgz.txt")
is "$(status_of "$r")/$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/notgz.txt")")" "400/404" "a body that is no gzip: 400, no file"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary '' "$U/files?path=/home/user/gz/nogz.txt")
is "$(status_of "$r")" 400 "an empty gzip body: 400 (no gzip header, as envd's reader says)"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: br' \
    --data-binary 'x' "$U/files?path=/home/user/gz/br.txt")
is "$(status_of "$r")/$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/br.txt")")" "400/404" "Content-Encoding: br: 400, nothing written"
free=$(sh_in "$A" "$TA" 'df -k --output=avail /home/user | tail -1')
python3 - "$WORK/bomb.gz" $(( (free + 65536) / 1024 )) <<'PY'
import sys, zlib
c = zlib.compressobj(9, zlib.DEFLATED, 31); z = bytes(1 << 20)
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])): f.write(c.compress(z))
    f.write(c.flush())
PY
diag "a bomb of $(stat -c %s "$WORK/bomb.gz") bytes decoding to $(( (free + 65536) / 1024 )) MiB; $free KiB free"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
    --data-binary @"$WORK/bomb.gz" "$U/files?path=/home/user/gz/bomb")
is "$(status_of "$r")/$(jget "$(body_of "$r")" '"free disk space" in d["message"]')" "400/True" "a gzip bomb larger than the sandbox's free disk: 400"
is "$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/bomb")")" 404 "... and what it wrote is removed"
after=$(sh_in "$A" "$TA" 'df -k --output=avail /home/user | tail -1')
[ $((free - after)) -lt 10240 ] && ok "... its space is free again ($free KiB before, $after after)" || not_ok "... its space is free again ($free KiB before, $after after)"
r=$(fenv "$A" "$TA" "$U/files?path=/home/user/gz/two.txt")
is "$(body_of "$r")" second "the sandbox's files still answer after all that"

# --- 2. X-Metadata-* ---
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H 'X-Metadata-Owner: alice' -H 'x-metadata-Stage: draft two' \
    --data-binary 'meta' "$U/files?path=/home/user/m/a.txt")
is "$(status_of "$r")/$(jget "$(body_of "$r")" 'sorted(d[0]["metadata"].items())')" "200/[('owner', 'alice'), ('stage', 'draft two')]" \
    "an upload with X-Metadata-*: its answer has the metadata, keys lowercased as envd"
# xattrs seen inside the sandbox: python3's os.listxattr (no attr package needed)
xattrs_in() { sh_in "$A" "$TA" "python3 -c 'import os,sys
for p in sys.argv[1:]:
    print(\" \".join(sorted(n+\"=\"+os.getxattr(p,n).decode(errors=\"replace\") for n in os.listxattr(p) if n.startswith(\"user.\"))))' $*" root; }
is "$(xattrs_in /home/user/m/a.txt)" 'user.e2b.owner=alice user.e2b.stage=draft two' "... kept as user.e2b.* extended attributes on the file"
r=$(rpc "$A" "$TA" Stat '{"path":"/home/user/m/a.txt"}')
is "$(jget "$r" 'sorted(d["entry"]["metadata"].items())')" "[('owner', 'alice'), ('stage', 'draft two')]" "Stat returns them"
r=$(rpc "$A" "$TA" ListDir '{"path":"/home/user/m","depth":1}')
is "$(jget "$r" 'd["entries"][0]["metadata"]["owner"]')" alice "ListDir returns them"
r=$(fenv "$A" "$TA" -F 'file=@-;filename=/home/user/m/b.txt' -H 'X-Metadata-k: v' "$U/files" <<<"multi")
is "$(jget "$(body_of "$r")" 'd[0]["metadata"]')" "{'k': 'v'}" "a multipart upload takes them too"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary 'again' "$U/files?path=/home/user/m/a.txt")
is "$(jget "$(body_of "$r")" '"metadata" in d[0]')/$(jget "$(rpc "$A" "$TA" Stat '{"path":"/home/user/m/a.txt"}')" '"metadata" in d["entry"]')" \
    "False/False" "an overwrite without metadata clears it (envd)"
sh_in "$A" "$TA" "python3 -c 'import os; p=\"/home/user/m/b.txt\"; os.setxattr(p,\"user.e2b.bad\",b\"\\x01x\"); os.setxattr(p,\"user.other\",b\"x\"); os.setxattr(p,\"user.e2b.good\",b\"ok\"); os.setxattr(p,\"user.e2b.a=b\",b\"x\")'" >/dev/null
is "$(jget "$(rpc "$A" "$TA" Stat '{"path":"/home/user/m/b.txt"}')" 'sorted(d["entry"]["metadata"].items())')" "[('good', 'ok'), ('k', 'v')]" \
    "attributes set inside the sandbox: a value out of printable ASCII, a key with '=', another namespace: left out"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H $'X-Metadata-k: caf\xc3\xa9' --data-binary x "$U/files?path=/home/user/m/c.txt")
is "$(status_of "$r")/$(status_of "$(fenv "$A" "$TA" "$U/files?path=/home/user/m/c.txt")")" "400/404" "a value that is not printable ASCII: 400, nothing written"
big=$(head -c 5000 /dev/zero | tr '\0' v)
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H "X-Metadata-big: $big" --data-binary x "$U/files?path=/home/user/m/c.txt")
is "$(status_of "$r")" 400 "metadata over 4096 bytes: 400"
hdrs=(); for i in $(seq 1 90); do hdrs+=(-H "X-Metadata-k$i: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"); done
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' "${hdrs[@]}" --data-binary x "$U/files?path=/home/user/m/c.txt")
is "$(status_of "$r")" 400 "90 small entries, over 4096 bytes as envd counts them: 400"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' -H "X-Metadata-$(head -c 250 /dev/zero | tr '\0' k): v" --data-binary x "$U/files?path=/home/user/m/c.txt")
is "$(status_of "$r")" 400 "a key longer than an xattr name can be: 400"
out=$(printf 'POST /files?path=/home/user/m/d.txt HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\nX-Access-Token: %s\r\nContent-Type: application/octet-stream\r\nX-Metadata-a=b/../c: v\r\nContent-Length: 1\r\n\r\nx' "$A" "$TA" |
    timeout 5 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(sys.stdin.buffer.read())
print(s.recv(200).decode(errors="replace").split("\r\n")[0])' "$PORT")
like "$out" "^HTTP/1.1 400" "a metadata name with '=' and '/' in it: 400"
is "$(sh_in "$A" "$TA" 'ls /home/user/m/c.txt /home/user/m/d.txt 2>/dev/null | wc -l')" 0 "... and no refused upload wrote a file"

# --- 5. symlinkTarget ---
sh_in "$A" "$TA" 'cd /home/user && mkdir -p ln/dir && echo t >ln/target.txt && ln -s target.txt ln/link && ln -s dir ln/dlink &&
    ln -s missing ln/dangling && ln -s ../../../../../../etc/hostname ln/climb && ln -s /proc/self/root/etc/hostname ln/magic &&
    ln -s loop ln/loop && ln -s link ln/chain && ln -s '"$HUTCH_STATE_DIR"' ln/host' >/dev/null
r=$(rpc "$A" "$TA" Stat '{"path":"/home/user/ln/link"}')
is "$(jget "$r" '(d["entry"]["symlinkTarget"], d["entry"]["type"], d["entry"]["mode"], d["entry"]["permissions"])')" \
    "('/home/user/ln/target.txt', 'FILE_TYPE_FILE', 420, 'Lrwxrwxrwx')" \
    "Stat of link -> target.txt: symlinkTarget absolute, the target's type and mode (envd)"
r=$(rpc "$A" "$TA" ListDir '{"path":"/home/user/ln","depth":1}')
tgt() { jget "$r" "[ (e['symlinkTarget'], e['type']) for e in d['entries'] if e['name']=='$1'][0]"; }
is "$(tgt chain)" "('/home/user/ln/target.txt', 'FILE_TYPE_FILE')" "ListDir: a chain of links resolves to its end"
is "$(tgt dlink)" "('/home/user/ln/dir', 'FILE_TYPE_DIRECTORY')" "ListDir: a link to a directory"
is "$(tgt dangling)" "('/home/user/ln/dangling', 'FILE_TYPE_UNSPECIFIED')" "a dangling link: its own path, no type (envd's EvalSymlinks fallback)"
is "$(tgt loop)" "('/home/user/ln/loop', 'FILE_TYPE_UNSPECIFIED')" "a link to itself: the same"
is "$(tgt climb)" "('/etc/hostname', 'FILE_TYPE_FILE')" "a link that climbs with ..: stops at the sandbox's root"
is "$(tgt magic)" "('/home/user/ln/magic', 'FILE_TYPE_UNSPECIFIED')" "a link through /proc/self/root: not followed (a magic link)"
is "$(tgt host)" "('/home/user/ln/host', 'FILE_TYPE_UNSPECIFIED')" "a link to the daemon's own state path: leads nowhere inside"
case "$r" in *"$HUTCH_STATE_DIR"*) not_ok "no host path appears in the listing" ;; *) ok "no host path appears in the listing" ;; esac

# --- 4. the owner of what is written ---
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary u "$U/files?path=/home/user/own/deep/u.txt")
is "$(sh_in "$A" "$TA" 'stat -c "%u:%g %a" /home/user/own /home/user/own/deep /home/user/own/deep/u.txt | tr "\n" " "')" "1000:1000 755 1000:1000 755 1000:1000 644 " \
    "written as user: the file and the parents it made are 1000:1000"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary r "$U/files?path=/home/user/rown/deep/r.txt&username=root")
is "$(sh_in "$A" "$TA" 'stat -c "%u:%g" /home/user/rown /home/user/rown/deep /home/user/rown/deep/r.txt | tr "\n" " "')" "0:0 0:0 0:0 " \
    "written as root: the file and its new parents are 0:0"
r=$(fenv "$A" "$TA" -H 'Authorization: Basic cm9vdDo=' -H 'Content-Type: application/octet-stream' --data-binary r2 "$U/files?path=/tmp/rootfile")
is "$(status_of "$r")/$(sh_in "$A" "$TA" 'stat -c "%u:%g" /tmp/rootfile')" "200/0:0" "root by Authorization: Basic too"
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary nope "$U/files?path=/home/user/rown/deep/r.txt")
is "$(status_of "$r")/$(sh_in "$A" "$TA" 'cat /home/user/rown/deep/r.txt')" "403/r" "user may not overwrite root's file in root's directory: 403, it stays"
fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary byroot "$U/files?path=/home/user/own/deep/u.txt&username=root" >/dev/null
is "$(sh_in "$A" "$TA" 'stat -c "%u:%g %a" /home/user/own/deep/u.txt; cat /home/user/own/deep/u.txt')" "$(printf '0:0 644\nbyroot')" \
    "root overwriting the user's file makes it root's, as envd's upload does (mode kept)"
sh_in "$A" "$TA" 'echo shared >/tmp/shared && chmod 666 /tmp/shared' root >/dev/null
r=$(fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary byuser "$U/files?path=/tmp/shared")
is "$(status_of "$r")/$(sh_in "$A" "$TA" 'stat -c "%u:%g"  /tmp/shared; cat /tmp/shared' | tr '\n' ' ')" "200/0:0 byuser" \
    "the user overwriting root's world-writable file: written, root's still (the user may not give files away)"
fenv "$A" "$TA" -H 'Content-Type: application/octet-stream' --data-binary u2 "$U/files?path=/home/user/own/deep/u2.txt" >/dev/null
jget "$(rpc "$A" "$TA" Stat '{"path":"/home/user/own/deep/u2.txt"}')" 'd["entry"]["owner"]+":"+d["entry"]["group"]' | grep -qx user:user &&
    ok "Stat shows owner and group user" || not_ok "Stat shows owner and group user"

# --- the real SDK (npm e2b) builds its own URLs, headers and bodies ---
sdk_path=${NODE_PATH:-/work/sdk/node_modules}
if command -v node >/dev/null && [ -d "$sdk_path/e2b" ]; then
    out=$(cd "$WORK" && NODE_PATH=$sdk_path E2B_API_KEY=$KEY E2B_API_URL=$U E2B_SANDBOX_URL=$U timeout 120 node - 2>&1 <<'JS'
const { Sandbox } = require('e2b');
(async () => {
  const say = (name, good, got) => console.log((good ? 'PASS ' : 'FAIL ') + name + (good ? '' : ' got: ' + JSON.stringify(got)));
  const sbx = await Sandbox.create({ timeoutMs: 120000 });
  try {
    const w = await sbx.files.write('/home/user/sdk.txt', 'via sdk', { metadata: { Team: 'blue', note: 'x y' } });
    say('write with metadata returns it', w.metadata && w.metadata.team === 'blue' && w.metadata.note === 'x y', w);
    const info = await sbx.files.getInfo('/home/user/sdk.txt');
    say('getInfo: metadata, owner user', info.metadata && info.metadata.team === 'blue' && info.owner === 'user' && info.group === 'user', info);
    const list = await sbx.files.list('/home/user');
    const e = list.find((x) => x.name === 'sdk.txt');
    say('list: metadata', e && e.metadata && e.metadata.note === 'x y', e);
    let r = await fetch(await sbx.downloadUrl('/home/user/sdk.txt'));
    say('downloadUrl', r.status === 200 && (await r.text()) === 'via sdk', r.status);
    r = await fetch(await sbx.downloadUrl('sdk.txt', { useSignatureExpiration: 60 }));
    say('downloadUrl, relative, expiring in 60 s', r.status === 200 && (await r.text()) === 'via sdk', r.status);
    r = await fetch(await sbx.downloadUrl('/home/user/sdk.txt', { useSignatureExpiration: -10 }));
    const body = await r.json().catch(() => ({}));
    say('downloadUrl already expired: 401', r.status === 401 && /expired/.test(body.message), [r.status, body]);
    r = await fetch(await sbx.downloadUrl('/root/x', { user: 'root' }));
    say('downloadUrl as root of a missing file: 404 (signed for root)', r.status === 404, r.status);
    const fd = new FormData();
    fd.append('file', new Blob(['uploaded by url']), 'ignored');
    r = await fetch(await sbx.uploadUrl('/home/user/upurl.txt'), { method: 'POST', body: fd });
    say('uploadUrl', r.status === 200 && (await sbx.files.read('/home/user/upurl.txt')) === 'uploaded by url', r.status);
    const big = 'zipped '.repeat(20000);
    await sbx.files.write('/home/user/gz.txt', big, { gzip: true });
    say('write with gzip: true', (await sbx.files.read('/home/user/gz.txt')) === big, null);
    say('read with gzip: true', (await sbx.files.read('/home/user/gz.txt', { gzip: true })) === big, null);
    await sbx.commands.run('ln -s sdk.txt /home/user/sdklink && ln -s gone /home/user/sdkdangling');
    const li = await sbx.files.getInfo('/home/user/sdklink');
    say('symlinkTarget absolute', li.symlinkTarget === '/home/user/sdk.txt' && li.type === 'file', li);
    const names = (await sbx.files.list('/home/user')).map((x) => x.name);
    say('a dangling link is dropped from list, as envd\'s unknown type is', names.includes('sdklink') && !names.includes('sdkdangling'), names);
    const rw = await sbx.files.write('/tmp/rootowned/f.txt', 'r', { user: 'root' });
    const ri = await sbx.files.getInfo('/tmp/rootowned', { user: 'root' });
    say('written as root: parent owned by root', ri.owner === 'root' && rw.path === '/tmp/rootowned/f.txt', ri);
  } finally {
    await sbx.kill();
  }
})().catch((e) => { console.log('FAIL exception ' + e); });
JS
)
    while IFS= read -r line; do
        case $line in PASS\ *) ok "SDK: ${line#PASS }" ;; FAIL\ *) not_ok "SDK: ${line#FAIL }" ;; *) diag "$line" ;; esac
    done <<<"$out"
    grep -q '^PASS' <<<"$out" || not_ok "SDK: the script ran"
else
    skip "SDK checks" "node or the e2b package is not installed"
fi

done_testing
