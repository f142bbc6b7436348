#!/usr/bin/env bash
# The warm pool of base (src/serve/pool.h), with curl: the first create of base makes one ahead,
# hidden from list, get and envd; the next create takes it (its id, the create's env vars,
# metadata, times, nothing of the pool's marks) and a successor is made; a create with its own
# sizes makes its own; a restart kills the pool's half-made sandbox, the stop kills the one it
# holds; HUTCH_POOL=0 makes none and a bad value falls back to 1.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-pool
daemon_answers HUTCH_POOL=1

records() { ls "$HUTCH_RUN_DIR" 2>/dev/null | grep '\.sandbox$' | sed 's/\.sandbox$//' | sort; }
n_records() { records | grep -c .; }
# wait_records N: until N sandbox records are in the run directory (at most 10 s)
wait_records() { for _ in $(seq 100); do [ "$(n_records)" = "$1" ] && return 0; sleep 0.1; done; return 1; }
# create JSON: STATUS the create's status, CREATED its id, TOKEN its envd token
create() {
    local r
    r=$(api -X POST -d "$1" "$U/v2/sandboxes")
    STATUS=$(status_of "$r")
    CREATED=$(jget "$(body_of "$r")" 'd["sandboxID"]')
    TOKEN=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
    [ -n "$CREATED" ] && made+=("$CREATED")
    return 0
}
# the pool's sandbox: the record of no sandbox this test was told of
pool_id() { records | grep -vxF -f <(printf '%s\n' "${made[@]}" none) | head -n1; }
listed() { curl -s -H "X-API-KEY: $KEY" "$U/v2/sandboxes" | python3 -c 'import json,sys; print(" ".join(sorted(s["sandboxID"] for s in json.load(sys.stdin))))'; }
logs_of() { curl -s -H "X-API-KEY: $KEY" "$U/sandboxes/$1/logs"; }

create '{"templateID":"base","timeout":300}'
is "$STATUS" 201 "the first create of base: 201"
A=$CREATED
TOKEN_A=$TOKEN
wait_records 2 && ok "... and the pool makes one ahead" || not_ok "... and the pool makes one ahead (records: $(records | tr '\n' ' '))"
P=$(pool_id)
[ -n "$P" ] && ok "the pool's sandbox has a record ($P)" || not_ok "the pool's sandbox has a record"
is "$(listed)" "$A" "the list shows the created one, not the pool's"
is "$(status_of "$(api "$U/sandboxes/$P")")" 404 "a get of the pool's id: 404"
is "$(status_of "$(api -X DELETE "$U/sandboxes/$P")")" 404 "a kill of the pool's id: 404"
is "$(envd_stream "$P" "" List '{}')" "$(envd_stream "$P"x "" List '{}' | sed "s/${P}x/$P/")" \
    "envd for the pool's id: as for an id that never was"
like "$(envd_stream "$P" "" List '{}')" "^HTTP 502 .*not found" "... (502, not found)"
sleep 1 # the pool's sandbox runs by now (a start takes 30 ms); a create before that makes its own

t0=$(date +%s)
create '{"templateID":"base","timeout":120,"envVars":{"POOLED":"yes"},"metadata":{"m":"2"}}'
is "$STATUS" 201 \
    "the second create: 201"
B=$CREATED
is "$B" "$P" "... it took the pool's sandbox"
grep -q '"event":"claimed"' <<<"$(logs_of "$B")" && ok "... its log says claimed" || not_ok "... its log says claimed"
info=$(body_of "$(api "$U/sandboxes/$B")")
is "$(jget "$info" 'd["metadata"]')" "{'m': '2'}" "... with the create's metadata only (no pool mark)"
is "$(jget "$info" 'd["templateID"]')" base "... of the template asked for"
python3 - "$info" "$t0" <<'PY' && ok "... started now, its end 120 s after" || not_ok "... started now, its end 120 s after ($info)"
import json, sys, datetime
d, t0 = json.loads(sys.argv[1]), int(sys.argv[2])
ts = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
started, end = ts(d["startedAt"]), ts(d["endAt"])
sys.exit(not (t0 - 2 <= started <= t0 + 5 and abs(end - started - 120) < 2))
PY
is "$(sh_out "$B" "$TOKEN" 'echo $POOLED; id -un')" "yes
user" "... its commands see the create's env vars, as user"
# what a command sees of the processes, /tmp and home: as in the fresh sandbox A
# (no command substitution nor pipe in the sandbox: a shell forked for one is named sh until its
# exec, so how many there are when cat reads depends on timing)
look='ls -A /tmp /home/user; cat /proc/[0-9]*/comm'
seen() { sh_out "$1" "$2" "$look" | sort | tr '\n' ' '; }
is "$(seen "$B" "$TOKEN")" "$(seen "$A" "$TOKEN_A")" \
    "... nothing ran in it before: its processes, /tmp and home as in a fresh one"
is "$(listed)" "$(printf '%s\n' "$A" "$B" | sort | tr '\n' ' ' | sed 's/ $//')" "the list shows both"
wait_records 3 && ok "the pool makes a successor" || not_ok "the pool makes a successor (records: $(records | tr '\n' ' '))"
S=$(pool_id)
sleep 1
create '{"templateID":"base","timeout":300,"memoryMB":256}'
is "$STATUS" 201 "a create with its own memory size: 201"
C=$CREATED
[ -n "$C" ] && [ "$C" != "$S" ] && ok "... makes its own (not the pool's $S)" || not_ok "... makes its own ($C, pool's $S)"
is "$(pool_id)" "$S" "... and the pool's stays in the pool"

# a restart: the pool's sandbox is half made in the store, so the new daemon kills it
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
daemon=
start_daemon HUTCH_POOL=1 && ok "the daemon restarts after kill -9" || not_ok "the daemon restarts after kill -9"
wait_records 3 && ok "... the pool's sandbox is gone, the 3 created live" ||
    not_ok "... the pool's sandbox is gone (records: $(records | tr '\n' ' '))"
is "$(pool_id)" "" "... and no pool is made before a create asks for one"
is "$(status_of "$(api "$U/sandboxes/$S")")" 404 "... the pool's id is unknown"
is "$(listed)" "$(printf '%s\n' "$A" "$B" "$C" | sort | tr '\n' ' ' | sed 's/ $//')" "... the list shows the 3"
for id in "${made[@]}"; do api -X DELETE "$U/sandboxes/$id" >/dev/null; done
made=()
create '{"templateID":"base"}'
is "$STATUS" 201 "a create after the restart: 201"
wait_records 2 && ok "... the pool is made again" || not_ok "... the pool is made again (records: $(records | tr '\n' ' '))"
api -X DELETE "$U/sandboxes/$CREATED" >/dev/null
made=()
kill "$daemon"
wait "$daemon"
is "$?" 0 "the daemon stops on SIGTERM with status 0"
daemon=
is "$(n_records)" 0 "its stop killed the pool's sandbox (no record left)"

start_daemon HUTCH_POOL=0 && ok "the daemon starts with HUTCH_POOL=0" || not_ok "the daemon starts with HUTCH_POOL=0"
create '{"templateID":"base"}'
is "$STATUS" 201 "... a create: 201"
create '{"templateID":"base"}' >/dev/null
sleep 1
is "$(n_records)" 2 "... makes no pool (2 records for 2 creates)"
for id in "${made[@]}"; do api -X DELETE "$U/sandboxes/$id" >/dev/null; done
made=()
kill "$daemon"
wait "$daemon"
daemon=
start_daemon HUTCH_POOL=many && ok "the daemon starts with HUTCH_POOL=many" || not_ok "the daemon starts with HUTCH_POOL=many"
create '{"templateID":"base"}' >/dev/null
grep -q "HUTCH_POOL=many is not 0 to 64: 1 a template" "$LOG" && ok "... and says it takes 1" || not_ok "... and says it takes 1"
wait_records 2 && ok "... and keeps 1" || not_ok "... and keeps 1 (records: $(records | tr '\n' ' '))"
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error" "$LOG" >/dev/null &&
    { not_ok "no sanitizer report"; grep -A5 Sanitizer "$LOG" | head -30; } || ok "no sanitizer report"
done_testing
