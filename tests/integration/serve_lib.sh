# Shared by the tests of `hutch serve` (sourced after lib.sh): a daemon of the test's own on a free
# loopback port, with its own API key and log, and the helpers every such test uses.
#   serve_setup NAME         KEY, PORT, U (the base URL), daemon, made (ids to kill at the end),
#                            LOG (in $scratch if use_scratch came first, else /tmp/hutch-NAME-log.*);
#                            serve_cleanup on EXIT
#   start_daemon [VAR=VALUE...]  starts it with those variables set; 1 if /health never answers
#   daemon_answers [VAR=VALUE...]  start_daemon as a check: the test ends, with the log, if not
#   serve_cleanup            kills the sandboxes in made, then the daemon; removes LOG (or the
#                            scratch directory) and the test's private dirs. A test's own cleanup
#                            calls it last.
#   api ARGS...              curl with the key: the body, then the status on a line of its own
#   status_of R, body_of R   the two parts of api's answer
#   jget JSON EXPR           EXPR in Python over the parsed JSON as d; empty when it fails

serve_setup() {
    KEY=test-key-$$-$RANDOM
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    U=http://127.0.0.1:$PORT
    if [ -n "${scratch:-}" ]; then
        LOG=$scratch/daemon.log
    else
        LOG=$(mktemp "/tmp/hutch-$1-log.XXXXXX")
    fi
    daemon=
    made=()
    trap serve_cleanup EXIT
}

start_daemon() {
    env HUTCH_API_KEY="$KEY" "$@" "$HUTCH" serve --listen "127.0.0.1:$PORT" >>"$LOG" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "$U/health" && return 0
        sleep 0.1
    done
    return 1
}

daemon_answers() {
    start_daemon "$@" && { ok "the daemon answers"; return 0; }
    not_ok "the daemon answers"
    cat "$LOG"
    done_testing
    exit
}

serve_cleanup() {
    local id
    for id in "${made[@]}"; do curl -s -o /dev/null -m 10 -X DELETE -H "X-API-KEY: $KEY" "$U/sandboxes/$id"; done
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    if [ -n "${scratch:-}" ]; then
        lib_cleanup
    else
        rm -f "$LOG"
        [ -n "${HUTCH_TEST_TMP:-}" ] && rm -rf "$HUTCH_TEST_TMP"
    fi
    return 0
}

api() { curl -s -H "X-API-KEY: $KEY" -w '\n%{http_code}' "$@"; }
status_of() { tail -n1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
