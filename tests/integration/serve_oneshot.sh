#!/usr/bin/env bash
# hutch's one-shot runs (POST /run, docs/API.md) and the warm pool (src/serve/pool.h), with curl:
# a run's result and output, a sandbox of its own each time (no state, no file shared between
# runs) that is gone once the run ends or its client goes, bad bodies; a create of
# code-interpreter-v1 that takes a pool sandbox (its env vars and metadata, none of the pool's
# marks), the pool hidden from list and get, and killed by the daemon's stop.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-oneshot
daemon_answers HUTCH_POOL=1

records() { ls "$HUTCH_RUN_DIR" 2>/dev/null | grep -c '\.sandbox$'; }
# wait_records N: until N sandbox records are in the run directory (at most 10 s)
wait_records() { for _ in $(seq 100); do [ "$(records)" = "$1" ] && return 0; sleep 0.1; done; return 1; }
run() { curl -s -m "${2:-60}" -H "X-API-KEY: $KEY" -X POST "$U/run" -d "$1"; }
text_of() { python3 -c 'import json,sys
out = []
for l in sys.stdin:
    m = json.loads(l)
    if m["type"] == "result": out.append("result " + m.get("text", ""))
    if m["type"] == "stdout": out.append("stdout " + m["text"].strip())
    if m["type"] == "error": out.append("error " + m["name"])
    if m["type"] == "end_of_execution": out.append("end")
print(" | ".join(out))'; }

is "$(run '{"code":"print(\"hi\"); 6 * 7"}' | text_of)" "stdout hi | result 42 | end" "a run: its output, its value, its end"
wait_records 1 && ok "... and its sandbox is gone after it (the pool's is the one left)" ||
    not_ok "... and its sandbox is gone after it (records: $(records))"
run '{"code":"open(\"/tmp/left-by-run-1\", \"w\").write(\"x\"); shared = 1"}' >/dev/null
is "$(run '{"code":"import os; (os.path.exists(\"/tmp/left-by-run-1\"), \"shared\" in globals())"}' | text_of)" \
    "result (False, False) | end" "the next run sees neither the file nor the variable of the one before"
is "$(run '{"code":"import os; os.environ.get(\"RUN_VAR\")","env_vars":{"RUN_VAR":"set"}}' | text_of)" \
    "result set | end" "a run's env_vars"
is "$(run '{"code":"console.log(2); 40 + 2","language":"js"}' | text_of)" "stdout 2 | result 42 | end" "a javascript run"
is "$(run '{"code":"undefined_name"}' | text_of)" "error NameError | end" "a run's error"

t0=$(date +%s.%N)
run '{"code":"import time; time.sleep(300)"}' 2 >/dev/null
wait_records 1 && ok "a run whose client went is stopped: its sandbox is gone" ||
    not_ok "a run whose client went is stopped (records: $(records))"
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{exit !(b-a < 12)}' && ok "... within 10 s of it" || not_ok "... within 10 s of it"

code_of() { curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" -X POST "$U/run" "$@"; }
is "$(code_of -d '{"code":1}')" 400 "code not a string: 400"
is "$(code_of -d 'not json')" 400 "a body that is not JSON: 400"
is "$(code_of -d '{"code":"1","context_id":"x"}')" 400 "a context_id: 400 (a run has a fresh one)"
is "$(code_of -d '{"code":"1","language":"cobol"}')" 400 "an unknown language: 400"
is "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$U/run" -d '{"code":"1"}')" 401 "no API key: 401"
wait_records 1 && ok "bad runs leave no sandbox" || not_ok "bad runs leave no sandbox (records: $(records))"

# the warm pool: its one sandbox was made with the first run, hidden from the list
is "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes")" "[]" "the pool's sandbox is not listed"
# The runs' pool is not code-interpreter-v1's: the first create of that template makes a sandbox
# of its own, and the template's pool is made after it.
create_ci() {
    r=$(curl -s -H "X-API-KEY: $KEY" -X POST -d '{"templateID":"code-interpreter-v1","envVars":{"POOLED":"yes"},"metadata":{"m":"1"},"timeout":300}' "$U/v2/sandboxes")
    id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sandboxID"])' "$r" 2>/dev/null)
    tok=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["envdAccessToken"])' "$r" 2>/dev/null)
}
claimed() { grep -q '"event":"claimed"' <<<"$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$id/logs")"; }
create_ci
made+=("$id")
claimed && not_ok "the first create of code-interpreter-v1 takes nothing of the runs' pool" ||
    ok "the first create of code-interpreter-v1 takes nothing of the runs' pool"
wait_records 3 && ok "... and its template's pool is made after it (records: the runs' pool's, its, the create's)" ||
    not_ok "... and its template's pool is made after it (records: $(records))"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"
made=()
wait_records 2
# A create takes the pool's sandbox once its kernels are ready (the daemon tells no one when): a
# create that made a new one is killed, and tried again after a while.
for try in 1 2 3 4 5 6; do
    sleep 2
    create_ci
    claimed && break
    curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"
    wait_records 2
done
made+=("$id")
claimed && ok "a create of code-interpreter-v1 took the pool's sandbox (its log says claimed)" ||
    not_ok "a create of code-interpreter-v1 took the pool's sandbox (its log says claimed)"
info=$(curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$id")
like "$info" '"metadata":\{"m":"1"\}' "... with the create's metadata only"
is "$(curl -s -m 30 -H "E2b-Sandbox-Id: $id" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $tok" \
    -d '{"code":"import os, pandas; os.environ[\"POOLED\"]"}' "$U/execute" | text_of)" "result yes | end" \
    "... its kernels see the create's env vars, pandas imported"
is "$(curl -s -m 30 -H "E2b-Sandbox-Id: $id" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $tok" \
    -d '{"code":"process.env.POOLED","language":"js"}' "$U/execute" | text_of)" "result yes | end" \
    "... the javascript one too"
is "$(curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes" | python3 -c 'import json,sys; print([s["sandboxID"] for s in json.load(sys.stdin)])')" \
    "['$id']" "the list shows the taken one, not its successor in the pool"
wait_records 3 && ok "the pool makes a successor" || not_ok "the pool makes a successor (records: $(records))"
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"
made=()
wait_records 2 && ok "the taken one is killed as any other" || not_ok "the taken one is killed (records: $(records))"
kill "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon=
is "$(records)" 0 "its stop killed the pool's sandbox (no record left)"
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error" "$LOG" >/dev/null &&
    { not_ok "no sanitizer report"; grep -A5 Sanitizer "$LOG" | head -30; } || ok "no sanitizer report"
done_testing
