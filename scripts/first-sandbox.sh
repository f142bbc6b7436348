#!/usr/bin/env bash
# Starts hutch serve on 127.0.0.1:3000 with its embedded defaults (unless one answers there
# already), makes a first sandbox, runs a command in it through envd's protocol, and says how to
# point the E2B SDK at it. The daemon keeps running; its log is STATE/serve.log. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
url=http://127.0.0.1:3000
state=${HUTCH_STATE_DIR:-/var/lib/hutch}
if ! curl -fs -o /dev/null "$url/health"; then
    mkdir -p "$state"
    setsid build/hutch serve >>"$state/serve.log" 2>&1 </dev/null &
    for _ in $(seq 100); do curl -fs -o /dev/null "$url/health" && break; sleep 0.1; done
    curl -fs -o /dev/null "$url/health" || { cat "$state/serve.log" >&2; exit 1; }
    echo "hutch serve is running (pid $!), log: $state/serve.log"
fi
key=${HUTCH_API_KEY:-$(cat "$state/api-key")}
created=$(curl -fsS -X POST -H "X-API-KEY: $key" -d '{"templateID":"base","timeout":300}' "$url/v2/sandboxes")
id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxID"])' <<<"$created")
token=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["envdAccessToken"])' <<<"$created")
echo "sandbox $id (killed after 300 s: curl -X DELETE -H \"X-API-KEY: \$E2B_API_KEY\" $url/sandboxes/$id)"
# envd's Start, as the SDK sends it: one Connect envelope; the answer is a stream of envelopes.
python3 - "$url" "$id" "$token" <<'PY'
import base64, json, struct, sys, urllib.request
url, sid, token = sys.argv[1:]
body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "echo hello from $(hostname), $(id -un) in $(pwd); uname -sr"]}}).encode()
req = urllib.request.Request(url + "/process.Process/Start", data=b"\0" + struct.pack(">I", len(body)) + body,
    headers={"Content-Type": "application/connect+json", "E2b-Sandbox-Id": sid, "X-Access-Token": token})
raw = urllib.request.urlopen(req, timeout=30).read()
while raw:
    flags, n = raw[0], struct.unpack(">I", raw[1:5])[0]
    event = json.loads(raw[5:5 + n]).get("event", {})
    if "stdout" in event.get("data", {}):
        sys.stdout.write(base64.b64decode(event["data"]["stdout"]).decode())
    raw = raw[5 + n:]
PY
cat <<EOT

The E2B SDK (npm install e2b) works against it:
  export E2B_API_KEY=\$(cat $state/api-key) E2B_API_URL=$url E2B_SANDBOX_URL=$url
  node -e "const {Sandbox}=require('e2b'); Sandbox.create().then(async s=>{console.log((await s.commands.run('uname -a')).stdout); await s.kill()})"
EOT
