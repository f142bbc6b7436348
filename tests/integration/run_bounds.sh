#!/usr/bin/env bash
# hutch run at the edges of what it is given: values out of range are refused, never wrapped;
# the command line arrives whole; --json stays valid and agrees with the exit status whatever
# bytes the messages hold; and --output-limit bounds the JSON and hutch's own memory.
. "$(dirname "$0")/lib.sh"

use_scratch bounds
# jf FILE EXPR: a Python expression over the JSON object o in FILE (too big for jpy's argv)
jf() { python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); print(v if isinstance(v,str) else json.dumps(v))' "$1" "$2"; }
# strict: the bytes must be UTF-8 (jfield's argv round trip would hide bad bytes)
strict() { python3 -c 'import json,sys; o=json.loads(sys.stdin.buffer.read().decode("utf-8", "strict")); print(ascii(o[sys.argv[1]]))' "$1"; }

# --- values out of range --------------------------------------------------------------------

# 18446744074 s is 2^64 ns and a bit: converted to ns it wrapped to 0.3 s.
for opt in --timeout --cpu-time; do
    err=$(hrun "$opt" 18446744074 -- true 2>&1); rc=$?
    like "$err/$rc" "^hutch run: $opt 18446744074: expected a positive duration, at most 365 days.*/2$" \
        "$opt 18446744074 (584 years): refused, exit 2"
    err=$(hrun "$opt" 31536001 -- true 2>&1); rc=$?
    like "$err/$rc" "at most 365 days.*/2$" "$opt one second past a year: refused"
done
for opt in --memory --disk --artifacts-limit; do
    err=$(hrun "$opt" 17T -- true 2>&1); rc=$?
    like "$err/$rc" "^hutch run: $opt 17T: expected a size .*16 TiB/2$" "$opt 17T: refused, exit 2"
done
err=$(hrun --output-limit 2G -- true 2>&1); rc=$?
like "$err/$rc" "up to 1 GiB/2$" "--output-limit 2G: refused"
t0=$(now_ms)
out=$(hjson --timeout 31536000 --cpu-time 31536000 -- sleep 1); rc=$?
t1=$(now_ms)
is "$(jfield "$out" status)/$rc" "OK/0" "control: --timeout and --cpu-time of exactly a year are taken"
if [ $((t1 - t0)) -ge 1000 ]; then ok "... and a 1 s sleep runs its second ($((t1 - t0)) ms)"
else not_ok "... and a 1 s sleep runs its second ($((t1 - t0)) ms)"; fi
out=$(hjson --timeout 10 -- sleep 1); rc=$?
is "$(jfield "$out" status)/$rc" "OK/0" "control: a 10-second --timeout allows a 1 s sleep"
out=$(hjson --timeout 0.3 -- sleep 5); rc=$?
is "$(jfield "$out" status)/$rc" "TO/1" "control: a 0.3 s --timeout stops a 5 s sleep"

# --- the command line arrives whole -----------------------------------------------------------

count_args='import sys; print(len(sys.argv) - 1, sys.argv[-1])'
out=$(hjson -- python3 -c "$count_args" $(seq 500)); rc=$?
is "$(jfield "$out" stdout)/$rc" "500 500/0" "500 arguments arrive, all of them"
out=$(hjson --lang python --code "$count_args" -- $(seq 500)); rc=$?
is "$(jfield "$out" stdout)/$rc" "500 500/0" "500 arguments after --lang python arrive too"
out=$(hjson -- python3 -c "$count_args" $(seq 10000)); rc=$?
is "$(jfield "$out" stdout)/$rc" "10000 10000/0" "10000 arguments arrive"
out=$(hjson --lang bash --code 'echo $#' -- a b); rc=$?
is "$(jfield "$out" stdout)/$rc" "2/0" "control: 2 arguments are 2"
big=$(head -c 102400 /dev/zero | tr '\0' a)
out=$(hjson --env "A=$big" -- sh -c 'echo ${#A}'); rc=$?
is "$(jfield "$out" stdout)/$rc" "102400/0" "an --env value of 100 KiB arrives whole"

done_testing
