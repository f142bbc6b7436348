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

# --- --json holds together whatever bytes its messages hold ---------------------------------

hjson -- "$(printf 'bad\377cmd')" >"$scratch/cmd.json"; rc=$?
is "$(strict status <"$scratch/cmd.json")/$(strict exit_code <"$scratch/cmd.json")/$rc" "'RE'/127/1" \
    "a command name that is not UTF-8: RE, exit_code 127, and hutch exits 1 to match"
like "$(strict message <"$scratch/cmd.json")" "cannot execute bad\\\\ufffdcmd" \
    "... the message names it, the bad byte as U+FFFD"
hjson -- sh -c 'echo kept; exec "$(printf "x\377\376")"' >"$scratch/exec.json"; rc=$?
is "$(strict stdout <"$scratch/exec.json")/$(strict exit_code <"$scratch/exec.json")/$rc" "'kept\\n'/127/1" \
    "an exec of a non-UTF-8 name from inside: the stdout and exit code are kept"
hjson --cwd "$(printf '/tmp/\377\300')" -- pwd >"$scratch/cwd.json"; rc=$?
is "$(strict status <"$scratch/cwd.json")/$rc" "'XX'/2" "a --cwd that is not UTF-8 (and missing): XX, exit 2"
like "$(strict message <"$scratch/cwd.json")" "/tmp/\\\\ufffd\\\\ufffd" "... the message names it"
echo x >"$scratch/f"
hjson --file "$scratch/f:/etc/$(printf 'n\377')" -- true >"$scratch/setup.json"; rc=$?
is "$(strict status <"$scratch/setup.json")/$rc" "'XX'/2" \
    "a setup error from inside whose text is not UTF-8: XX, exit 2"
like "$(strict message <"$scratch/setup.json")" "/etc/n\\\\ufffd" "... its text, sanitised"
hjson --artifacts "$scratch/art" -- sh -c 'echo a > "/output/$(printf "\377\033[31m")"; exit 3' \
    >"$scratch/art.json"; rc=$?
is "$(strict status <"$scratch/art.json")/$(strict exit_code <"$scratch/art.json")/$rc" "'RE'/3/1" \
    "an artifact name that is not UTF-8: the exit code and status are kept"
is "$(jf "$scratch/art.json" 'ascii([a["path"] for a in o["artifacts"]])')" \
    "['\\ufffd\\x1b[31m']" "... and the artifact is reported"

# --- --json is bounded by --output-limit ------------------------------------------------------

# \x01 becomes \u0001 in JSON, 6 bytes for 1: the limit counts the 6.
hjson --output-limit 1M -- sh -c 'head -c 10000000 /dev/zero | tr "\0" "\1"' >"$scratch/ones.json"; rc=$?
is "$(jf "$scratch/ones.json" 'o["status"]')/$(jf "$scratch/ones.json" 'o["stdout_truncated"]')/$rc" \
    "OL/true/1" "10 MB of \\x01 under --output-limit 1M: OL, stdout_truncated"
enc=$(jf "$scratch/ones.json" 'len(json.dumps(o["stdout"]).encode()) - 2')
if [ "$enc" -le 1048576 ] && [ "$enc" -gt $((1048576 - 6)) ]; then
    ok "the JSON's stdout takes $enc bytes encoded: the limit, to within one character"
else not_ok "the JSON's stdout takes $enc bytes encoded, want <= 1048576"; fi
size=$(stat -c %s "$scratch/ones.json")
if [ "$size" -le $((1048576 + 4096)) ]; then ok "the whole JSON is $size bytes"
else not_ok "the whole JSON is $size bytes, want about 1 MiB"; fi
hjson --output-limit 1M -- sh -c 'head -c 150000 /dev/zero | tr "\0" "\1"' >"$scratch/few.json"; rc=$?
is "$(jf "$scratch/few.json" 'o["status"]')/$(jf "$scratch/few.json" 'len(o["stdout"])')/$rc" \
    "OK/150000/0" "control: 150000 \\x01 (900000 bytes of JSON) under 1M: OK, kept whole"

# hutch's own memory: what it keeps is bounded by the limit, whatever the program writes. Measured
# on the build without sanitizers (theirs is not hutch's); the base is a run that writes nothing.
maxrss_kb() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$ROOT/build/hutch" run --json "$@"
}
if [ -x "$ROOT/build/hutch" ]; then
    base=$(maxrss_kb --output-limit 32M -- true)
    ones=$(maxrss_kb --output-limit 32M -- sh -c 'head -c 100000000 /dev/zero | tr "\0" "\1"')
    text=$(maxrss_kb --output-limit 32M -- sh -c 'head -c 100000000 /dev/zero | tr "\0" a')
    if [ $((ones - base)) -lt $((32 * 1024)) ]; then
        ok "100 MB of \\x01 under --output-limit 32M: hutch grows by $(((ones - base) / 1024)) MiB (< 32)"
    else not_ok "100 MB of \\x01 under --output-limit 32M: hutch grows by $(((ones - base) / 1024)) MiB (< 32)"; fi
    if [ $((text - base)) -lt $((80 * 1024)) ]; then
        ok "100 MB of text under --output-limit 32M: hutch grows by $(((text - base) / 1024)) MiB (< 80)"
    else not_ok "100 MB of text under --output-limit 32M: hutch grows by $(((text - base) / 1024)) MiB (< 80)"; fi
else
    skip "hutch's memory under --output-limit" "build/hutch is not built"
    skip "hutch's memory under --output-limit, text" "build/hutch is not built"
fi

done_testing
