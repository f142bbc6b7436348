#!/usr/bin/env bash
# The spare kernels of javascript and typescript (src/interp/README.md, "The spare kernel"; the
# python one is in serve_host_zygote.sh): after a sandbox's first create of a context of that
# language, a kernel is started ahead for the next create with the default cwd, which takes it.
# It must be a kernel started before that create, yet sharing nothing with the other contexts,
# with the sandbox's env vars, the default cwd and a first count of 1, hidden from the list until
# taken. A daemon after a kill -9 tells the spares it gave away (contexts, listed, with their
# state) from the ones it did not (hidden, and taken by the next create). A spare that never gets
# ready is killed after HUTCH_KERNEL_READY_TIMEOUT, as a create's kernel would be.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-spare
daemon_answers HUTCH_POOL=0

r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"base","timeout":300,"envVars":{"SBX_VAR":"from-create"}}' "$U/v2/sandboxes")
S=$(jfield "$r" sandboxID)
S_TOKEN=$(jfield "$r" envdAccessToken)
[ -n "$S" ] && made+=("$S")
s_call() { curl -s -m 60 -H "E2b-Sandbox-Id: $S" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $S_TOKEN" "$@"; }
# s_exec CODE CONTEXT: an execute's lines; s_ctx BODY: a new context's id
s_exec() { s_call -d "$(python3 -c 'import json,sys; print(json.dumps({"code": sys.argv[1], "context_id": sys.argv[2]}))' "$1" "$2")" "$U/execute"; }
s_ctx() { jfield "$(s_call -d "$1" "$U/contexts")" id; }
s_ids() { s_call "$U/contexts" | python3 -c 'import json,sys; print(" ".join(sorted(c["id"] for c in json.load(sys.stdin) if c["language"] == sys.argv[1])))' "$1"; }
# (its kernel's age, another context's variable seen, the env var, the cwd)
FACTS='[Math.round(process.uptime() * 100) / 100, typeof secret_of_first, process.env.SBX_VAR, process.cwd()].join(" ")'
# spare_check LANGUAGE: the next create takes the spare; MADE the contexts made
spare_check() {
    local lang=$1 c1 c2 c3 t0 since out facts
    c1=$(s_ctx "{\"language\":\"$lang\"}")
    s_exec 'var secret_of_first = 1' "$c1" >/dev/null
    sleep 3 # the spare: started after c1's create, ready (and warmed up) by now
    t0=$(now_ms)
    c2=$(s_ctx "{\"language\":\"$lang\"}")
    since=$(($(now_ms) - t0))
    out=$(s_exec "$FACTS" "$c2")
    facts=$(s_text <<<"$out")
    python3 -c 'import sys; sys.exit(not (float(sys.argv[1].split()[0]) > float(sys.argv[2]) / 1000 + 1))' "$facts" "$since" &&
        ok "$lang: the next create takes the spare: its kernel started before that create ($facts; the create ${since} ms ago)" ||
        not_ok "$lang: the next create takes the spare: its kernel started before that create (got '$facts', the create ${since} ms ago)"
    like "$facts" "^[0-9.]+ undefined from-create /home/user$" "... with none of another context's variables, the sandbox's env vars, the default cwd"
    like "$out" '"execution_count":1[,}]' "... its first execution counted 1"
    c3=$(s_ctx "{\"language\":\"$lang\",\"cwd\":\"/tmp\"}") # a cwd of its own: a kernel of its own
    facts=$(s_exec "$FACTS" "$c3" | s_text)
    like "$facts" '^0\.[0-9]+ undefined from-create /tmp$' "... a create with a cwd of its own gets a kernel of its own, started now ($facts)"
    MADE="$c1 $c2 $c3"
}
spare_check javascript
JS=$MADE
spare_check typescript
TS=$MADE
is "$(s_exec 'let n: number = 40; n + 2' "${TS##* }" | s_text)" 42 "typescript: its contexts transpile"
want_ts=$(printf '%s\n' $TS | sort | tr '\n' ' ' | sed 's/ $//')
# js_listed: the javascript contexts listed but the default one (its id is made again by a new
# daemon while its kernel never ran), and how many defaults
js_listed() {
    local ids
    ids=$(s_ids javascript)
    echo "$(printf '%s\n' $ids | grep -xF -f <(printf '%s\n' $JS) | sort | tr '\n' ' ' | sed 's/ $//')" \
        "+$(($(wc -w <<<"$ids") - 3))"
}
want_js="$(printf '%s\n' $JS | sort | tr '\n' ' ' | sed 's/ $//') +1"
is "$(js_listed)" "$want_js" "the list shows the created javascript contexts and the default one, no spare"
is "$(s_ids typescript)" "$want_ts" "... and the typescript ones, no spare"
c2=$(cut -d' ' -f2 <<<"$JS")
s_exec 'var kept = 9' "$c2" >/dev/null
sleep 3 # spares again, ready
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon HUTCH_POOL=0
is "$(js_listed)" "$want_js" "after a kill -9 and a new daemon: the same javascript contexts listed, no spare"
is "$(s_ids typescript)" "$want_ts" "... the same typescript ones, no spare"
is "$(s_exec 'kept' "$c2" | s_text)" 9 "... a context that was a spare has its state"
for lang in javascript typescript; do
    t0=$(now_ms)
    c=$(s_ctx "{\"language\":\"$lang\"}")
    since=$(($(now_ms) - t0))
    facts=$(s_exec "$FACTS" "$c" | s_text)
    python3 -c 'import sys; sys.exit(not (float(sys.argv[1].split()[0]) > float(sys.argv[2]) / 1000 + 1))' "$facts" "$since" &&
        ok "... $lang: the spare it found hidden is taken by the next create ($facts)" ||
        not_ok "... $lang: the spare it found hidden is taken by the next create (got '$facts', the create ${since} ms ago)"
done
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$S"
made=()

# A spare whose kernel never gets ready (node loads NODE_OPTIONS' --require first, and this one
# sleeps once /tmp/hang exists) is killed when a create's would be: no create waits for it, and
# it would hold its processes for good, hidden.
kill "$daemon"
wait "$daemon"
start_daemon HUTCH_POOL=0 HUTCH_KERNEL_READY_TIMEOUT=4
r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"base","timeout":300,"envVars":{"NODE_OPTIONS":"--require /tmp/early.js"}}' "$U/v2/sandboxes")
S=$(jfield "$r" sandboxID)
S_TOKEN=$(jfield "$r" envdAccessToken)
[ -n "$S" ] && made+=("$S")
# (sh_out puts its script in a JSON string as it is: the file goes in base64)
early='if (require("fs").existsSync("/tmp/hang")) require("child_process").execSync("exec sleep 3600")'
sh_out "$S" "$S_TOKEN" "echo $(base64 -w0 <<<"$early") | base64 -d > /tmp/early.js" >/dev/null
c1=$(s_ctx '{"language":"javascript"}')
is "$(s_exec '1 + 1' "$c1" | s_text)" 2 "a javascript context, its startup file harmless yet"
sleep 3 # its spare, ready
sh_out "$S" "$S_TOKEN" 'touch /tmp/hang' >/dev/null
c2=$(s_ctx '{"language":"javascript"}') # takes the spare; the next one hangs in its startup
is "$(s_exec '2 + 2' "$c2" | s_text)" 4 "... the next create takes the spare, started before the startup file hangs"
# (sh_out puts its script in a JSON string as it is: this one goes in base64)
sleeping() {
    local count='for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done | grep -c "^sleep 3600"'
    sh_out "$S" "$S_TOKEN" "echo $(base64 -w0 <<<"$count") | base64 -d | sh"
}
is "$(sleeping)" 1 "... the spare started after it hangs in its startup"
left=
for _ in $(seq 100); do
    left=$(sleeping)
    [ "$left" = 0 ] && break
    sleep 0.2
done
is "$left" 0 "... and is killed once a create's kernel would be (HUTCH_KERNEL_READY_TIMEOUT), its tree too"
grep -q "its spare javascript kernel did not get ready: killed" "$LOG" && ok "... the daemon's log says so" ||
    not_ok "... the daemon's log says so"
sh_out "$S" "$S_TOKEN" 'rm /tmp/hang' >/dev/null
c3=$(s_ctx '{"language":"javascript"}')
is "$(s_exec '3 + 3' "$c3" | s_text)" 6 "... a create after it gets a kernel of its own"
is "$(s_ids javascript | wc -w)" 4 "... the list: the default context and the 3 created, no spare"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$S"
made=()
kill "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon=
done_testing
