#!/usr/bin/env bash
# Without --json, output is forwarded live. A slow or stuck reader of hutch's stdout must slow
# the program down, never the supervisor: timeouts still fire, and the verdict comes back. To a
# terminal, the program's bytes are rendered so that none is a command to it, and hutch's own
# line cannot be forged; to a pipe or a file they pass byte for byte.
. "$(dirname "$0")/lib.sh"

use_scratch fwd

out=$(hrun -- /bin/sh -c 'seq 1 300000' | (sleep 0.5; md5sum))
want=$(seq 1 300000 | md5sum)
is "$out" "$want" "a slow reader gets every byte, in order"

n=$(hrun -- /bin/sh -c 'head -c 3000000 /dev/zero; echo err >&2' 2>/dev/null | wc -c)
is "$n" "3000000" "3 MB through the pipe, intact"

mkfifo "$scratch/fifo"
(exec 3<"$scratch/fifo"; sleep 15) &
reader=$!
start=$(now_ms)
"$HUTCH" run --timeout 1 -- yes >"$scratch/fifo" 2>"$scratch/err"
rc=$?
elapsed=$(($(now_ms) - start))
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
is "$rc" "1" "a reader that never reads: hutch run still ends with the program's failure"
like "$(cat "$scratch/err")" "TO: wall-clock" "and the verdict is TO"
[ "$elapsed" -lt 4000 ] && ok "within seconds of the timeout (${elapsed} ms), not when the reader goes" ||
    not_ok "within seconds of the timeout (${elapsed} ms), not when the reader goes"

# --- to a terminal ----------------------------------------------------------------------------

# on_tty FILE CMD...: CMD with stdout and stderr on a fresh pty; what the terminal got goes to FILE.
on_tty() {
    python3 - "$@" <<'EOF'
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=s, stderr=s)
os.close(s)
out = b""
while True:
    try:
        b = os.read(m, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
p.wait(timeout=60)
open(sys.argv[1], "wb").write(out)
EOF
}
# bytes_check FILE EXPR: a Python expression over the bytes d of FILE; prints True or False.
bytes_check() { python3 -c 'import sys; d=open(sys.argv[1], "rb").read(); print(eval(sys.argv[2]))' "$1" "$2"; }
marker=$'\e[1;7mhutch:\e[0m'

evil='printf "a\033]52;c;SGVsbG8=\007b\033]0;title\033\\c\033[6n\302\2336n\233\377 \342\202\254\tend\n"'
"$HUTCH" run -- sh -c "$evil" >"$scratch/evil.raw" 2>&1
is "$(bytes_check "$scratch/evil.raw" 'b"\x1b]52;c;SGVsbG8=\x07" in d and b"\xc2\x9b" in d')" True \
    "control: to a pipe the program's escape sequences pass byte for byte (OSC 52, C1 CSI)"
on_tty "$scratch/evil.tty" "$HUTCH" run -- sh -c "$evil"
is "$(bytes_check "$scratch/evil.tty" 'not any(c in d for c in (b"\x1b", b"\x07", b"\x9b"))')" True \
    "to a terminal: no ESC, BEL or 8-bit CSI from the program reaches it"
is "$(bytes_check "$scratch/evil.tty" 'd')" \
    "$(python3 -c 'print(b"a^[]52;c;SGVsbG8=^Gb^[]0;title^[\\c^[[6n\\xc2\\x9b6n\\x9b\\xff \xe2\x82\xac\tend\r\n")')" \
    "... they are shown instead: caret notation, \\x for C1 and bad bytes; UTF-8 and tab pass"

on_tty "$scratch/forge.tty" "$HUTCH" run -- sh -c 'echo "hutch: OK"; printf "hutch: TO: forged"; exit 3'
is "$(bytes_check "$scratch/forge.tty" 'd.count(b"\x1b")')" 2 "a forged hutch line: the only escapes are hutch's own marker"
is "$(bytes_check "$scratch/forge.tty" 'd')" \
    "$(python3 -c 'print(b"hutch: OK\r\nhutch: TO: forged\r\n\x1b[1;7mhutch:\x1b[0m RE: exited with status 3\r\n")')" \
    "... and hutch's line starts a line of its own, after the program's open one, marked"
on_tty "$scratch/name.tty" "$HUTCH" run -- $'\e]0;pwned\a\e[2J'
is "$(bytes_check "$scratch/name.tty" 'd.startswith(b"\x1b[1;7mhutch:\x1b[0m RE: cannot execute ^[]0;pwned^G^[[2J: ") and d.count(b"\x1b") == 2')" True \
    "a command name with escapes: hutch's own message shows them, obeys none"
on_tty "$scratch/json.tty" "$HUTCH" run --json -- printf '\302\233\342\202\254\033'
is "$(bytes_check "$scratch/json.tty" 'max(d) < 0x80 and b"\\u009B\\u20AC\\u001B" in d')" True \
    "--json to a terminal: ASCII only, C1 and non-ASCII as \\u escapes"
"$HUTCH" run --json -- printf '\302\233\342\202\254' >"$scratch/json.raw"
is "$(bytes_check "$scratch/json.raw" 'b"\xc2\x9b\xe2\x82\xac" in d')" True "control: --json to a pipe keeps UTF-8 as is"

# --- to a pipe or a file ----------------------------------------------------------------------

is "$(hrun -- printf '\033[31mx' | od -An -tx1 | tr -s ' ')" " 1b 5b 33 31 6d 78" \
    "to a pipe, escapes pass byte for byte"
err=$(hrun -- $'x\nhutch: OK' 2>&1 >/dev/null); rc=$?
is "$(wc -l <<<"$err")/$rc" "1/1" "a command name with a newline: hutch's line stays one line"
like "$err" '^hutch: RE: cannot execute x\^Jhutch: OK: ' "... the newline shown as ^J"
err=$(hrun --env $'A\e]0;x\a' -- true 2>&1); rc=$?
is "$err/$rc" 'hutch run: --env A^[]0;x^G: expected NAME=VALUE/2' "a usage error quotes the command line rendered"
hrun -- echo lost >&-; rc=$?
is "$rc" 0 "hutch's stdout closed: the output goes nowhere, the run is fine"
hrun -- sh -c 'echo x >&2; exit 3' 2>&-; rc=$?
is "$rc/$(grep -rl "hutch:" "$HUTCH_RUN_DIR" 2>/dev/null | wc -l)" "1/0" \
    "hutch's stderr closed: the verdict is in the exit status, and its line went into no file of hutch's"
err=$(hrun -- sh -c 'printf partial >&2; exit 3' 2>&1 >/dev/null)
is "$err" $'partial\nhutch: RE: exited with status 3' "stderr left a line open: hutch's line starts a new one"
both=$(hrun -- sh -c 'printf partial; exit 3' 2>&1)
is "$both" $'partial\nhutch: RE: exited with status 3' "stdout and stderr in one pipe: the same"
hrun -- sh -c 'printf partial; exit 3' >"$scratch/o" 2>"$scratch/e"
is "$(cat "$scratch/o")/$(cat "$scratch/e")" "partial/hutch: RE: exited with status 3" \
    "control: stdout and stderr apart: stderr gets no extra newline"
err=$(hrun -- sh -c 'echo "hutch: RE: exited with status 1" >&2' 2>&1); rc=$?
is "$err/$rc" "hutch: RE: exited with status 1/0" \
    "exit 0: no line of hutch's; whatever the program wrote is the program's, byte for byte"
done_testing
