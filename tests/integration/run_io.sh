# hutch run: what goes in (environment, files, stdin, code for --lang, arguments) and what comes
# out (stdout and stderr as valid JSON, artifacts from /output, read as hostile), and runs side
# by side without cross-talk, each in its own uid range.
. "$(dirname "$0")/lib.sh"

use_scratch io
# words: stdin with runs of whitespace made single spaces, no trailing newline.
words() { echo $(cat); }

# --- environment --------------------------------------------------------------------------

out=$(hjson --env A=B --env 'X=a=b c' -- sh -c 'echo "$A|$X"'); rc=$?
is "$(jfield "$out" stdout)/$rc" "B|a=b c/0" "--env A=B and a value with = and a space"
out=$(HUTCH_HOST_ONLY=leak hjson -- env); rc=$?
env_in=$(jfield "$out" stdout)
is "$(grep -E '^(HOME|USER|LOGNAME|PATH|LANG)=' <<<"$env_in" | sort | words)" \
    "HOME=/home/user LANG=C.UTF-8 LOGNAME=user PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin USER=user" \
    "default environment: HOME, USER, LOGNAME, PATH, LANG"
is "$(grep -c -E '^(HUTCH_HOST_ONLY|HUTCH_STATE_DIR|ASAN_OPTIONS)=' <<<"$env_in")" 0 \
    "no host variable reaches the sandbox"
out=$(hjson --env PATH=/custom/bin:/bin -- /bin/sh -c 'echo "$PATH"; env | grep -c "^PATH="'); rc=$?
is "$(jfield "$out" stdout | words)/$rc" "/custom/bin:/bin 1/0" "--env PATH=... replaces PATH (once)"
out=$(hjson --env PATH=/nowhere -- sh -c true); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" exit_code)" "RE/127" "--env PATH=/nowhere: the command is looked up in it"
out=$(hjson --env HOME=/tmp -- sh -c 'echo "$HOME"'); rc=$?
is "$(jfield "$out" stdout)" "/tmp" "--env overrides HOME too"
out=$(hjson --root -- sh -c 'echo "$HOME $USER $(id -u) $(id -g)"; grep ^CapEff /proc/self/status'); rc=$?
is "$(jfield "$out" stdout | words)/$rc" "/root root 0 0 CapEff: 0000000000000000/0" \
    "--root: uid and gid 0, HOME=/root, no capabilities"
out=$(hjson -- sh -c 'echo "$(id -u) $(id -g) $(id -un) $(pwd)"'); rc=$?
is "$(jfield "$out" stdout)" "1000 1000 user /home/user" "default: uid 1000 (user), cwd /home/user"
out=$(hjson --cwd /tmp -- pwd); rc=$?
is "$(jfield "$out" stdout)/$rc" "/tmp/0" "--cwd /tmp"
out=$(hjson --cwd /no/such/dir -- pwd); rc=$?
like "$(jfield "$out" message)/$rc" "/no/such/dir.*/2$" "--cwd to a missing directory: fails (exit 2), naming it"

# --- files --------------------------------------------------------------------------------

head -c 300000 /dev/urandom >"$scratch/blob"
want_sum=$(sha256sum <"$scratch/blob" | cut -d' ' -f1)
printf '#!/bin/sh\necho script-ran "$@"\n' >"$scratch/script.sh"
chmod 755 "$scratch/script.sh"
chmod 640 "$scratch/blob"
out=$(hjson --file "$scratch/blob:/data/blob.bin" --file "$scratch/blob:rel/dir/b" \
    --file "$scratch/script.sh:/tmp/s.sh" -- sh -c '
    sha256sum /data/blob.bin /home/user/rel/dir/b | cut -d" " -f1
    stat -c "%u:%g %a %n" /data/blob.bin /home/user/rel/dir/b /tmp/s.sh
    /tmp/s.sh x
    echo more >> /home/user/rel/dir/b && echo writable'); rc=$?
so=$(jfield "$out" stdout)
is "$(jfield "$out" status)/$rc" "OK/0" "--file: the run is OK"
is "$(sed -n 1,2p <<<"$so" | words)" "$want_sum $want_sum" "--file: 300 kB of random bytes arrive intact, absolute and relative"
is "$(sed -n 3,5p <<<"$so" | words)" \
    "1000:1000 640 /data/blob.bin 1000:1000 640 /home/user/rel/dir/b 1000:1000 755 /tmp/s.sh" \
    "--file: owned by the user, relative lands under /home/user, modes kept"
is "$(sed -n 6,7p <<<"$so" | words)" "script-ran x writable" "--file: an executable runs; the user can write its file"
is "$(sha256sum <"$scratch/blob" | cut -d' ' -f1)" "$want_sum" "--file: the host file is untouched"
out=$(hjson --file "$scratch/nope:/x" -- true); rc=$?
like "$(jfield "$out" status)/$rc/$(jfield "$out" message)" "^XX/2/.*nope: No such file" "--file of a missing host file: XX, names it"
out=$(hjson --file "$scratch:/x" -- true); rc=$?
like "$(jfield "$out" status)/$rc/$(jfield "$out" message)" "^XX/2/.*not a regular file" "--file of a directory: XX"
out=$(hjson --file "$scratch/blob:/etc/hostname" -- true); rc=$?
like "$(jfield "$out" status)/$rc/$(jfield "$out" message)" "^XX/2/.*create /etc/hostname: the base template's files .*copy into /tmp" \
    "--file over a file of the template: XX, says where files can go"
is "$(hrun --file "$scratch/blob:/etc/hutch-new" -- true 2>&1 >/dev/null | grep -c "copy into /tmp")" 1 \
    "--file into a directory of the template: the same advice"

# --- stdin --------------------------------------------------------------------------------

is "$(echo data | hrun -- cat)" "data" "stdin from a pipe reaches the program"
is "$(hrun -- sha256sum <"$scratch/blob" | cut -d' ' -f1)" "$want_sum" "a file as stdin: 300 kB intact"
big=$(head -c 3000000 /dev/zero | hrun -- wc -c)
is "$big" 3000000 "3 MB through a stdin pipe"
is "$(hrun -- cat </dev/null | wc -c)" 0 "stdin /dev/null: empty"
out=$(echo hidden | hjson -- sh -c 'exec 0<&-; echo closed'); rc=$?
is "$(jfield "$out" stdout)/$rc" "closed/0" "a program that closes stdin unread is fine"
out=$(yes | hjson -- head -n 2); rc=$?
is "$(jfield "$out" stdout | words)/$rc" "y y/0" "endless stdin, program reads 2 lines and exits: OK, no hang"

# A terminal is never handed in (TIOCSTI could type into the host's shell), nor a socket: the
# program gets a pipe that hutch feeds.
stdin_kind() {
    python3 - "$HUTCH" "$1" <<'EOF'
import os, pty, socket, subprocess, sys
cmd = [sys.argv[1], "run", "--", "sh", "-c",
       "test -t 0 && echo tty || echo notty; readlink /proc/self/fd/0 | cut -d: -f1; head -c 5; echo"]
if sys.argv[2] == "pty":
    ours, theirs = pty.openpty()
else:
    a, b = socket.socketpair()
    ours, theirs = a.detach(), b.detach()
p = subprocess.Popen(cmd, stdin=theirs, stdout=subprocess.PIPE)
os.close(theirs)
os.write(ours, b"hello\n")
out = p.communicate(timeout=20)[0]
print(out.decode(errors="replace").replace("\n", " ").strip(), p.returncode)
EOF
}
is "$(stdin_kind pty)" "notty pipe hello 0" "stdin a terminal: the program gets a pipe with the bytes, not the tty"
is "$(stdin_kind socket)" "notty pipe hello 0" "stdin a socket: the program gets a pipe with the bytes"

# Nor a file, a FIFO or /dev/null of the caller's: the program must never hold an open file
# description of the host's. It tries what one would allow (O_NONBLOCK, seeking, writing, the
# host path); the caller then looks at its own description. Each attempt is made without hutch
# too, as the control that the attempt itself works.
seq 1 2000 >"$scratch/lines"
cp "$scratch/lines" "$scratch/lines.orig"
mkfifo "$scratch/fifo-in"
stdin_attack() {
    python3 - "$1" "$scratch" "$@" <<'EOF'
import fcntl, os, subprocess, sys
kind, scratch, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
attack = r"""
import fcntl, os
r = []
fl = fcntl.fcntl(0, fcntl.F_GETFL)
fcntl.fcntl(0, fcntl.F_SETFL, fl | os.O_NONBLOCK)
r.append("nb=%d" % bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK))
r.append("path=" + os.readlink("/proc/self/fd/0").split(":")[0])
try:
    os.lseek(0, 10000, os.SEEK_SET); r.append("seek=ok")
except OSError as e:
    r.append("seek=" + e.strerror)
try:
    os.write(0, b"PWNED\n"); r.append("write=ok")
except OSError as e:
    r.append("write=" + e.strerror)
print(" ".join(r))
"""
if kind == "file":
    fd = os.open(scratch + "/lines", os.O_RDWR)      # 0<>file: readable and writable
elif kind == "fifo":
    w = os.open(scratch + "/fifo-in", os.O_RDWR)     # keeps the FIFO open for both ends
    fd = os.open(scratch + "/fifo-in", os.O_RDONLY)
    os.write(w, b"fifo data\n")
else:
    fd = os.open("/dev/null", os.O_RDWR)
out = subprocess.run(cmd + ["python3", "-c", attack], stdin=fd, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, timeout=60).stdout
after = "caller_nb=%d" % bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)
if kind == "file":
    after += " caller_offset=%d" % os.lseek(fd, 0, os.SEEK_CUR)
print(out.decode().strip(), after)
EOF
}
is "$(stdin_attack file)" \
    "nb=1 path=$scratch/lines seek=ok write=ok caller_nb=1 caller_offset=10006" \
    "control, without hutch: a 0<>file stdin can be made non-blocking, seeked, written, named"
cp "$scratch/lines.orig" "$scratch/lines"
is "$(stdin_attack file "$HUTCH" run --)" \
    "nb=1 path=pipe seek=Illegal seek write=Bad file descriptor caller_nb=0 caller_offset=0" \
    "a 0<>file stdin: the program gets a pipe; O_NONBLOCK, seek and write reach nothing of the caller's"
is "$(cmp "$scratch/lines" "$scratch/lines.orig" && echo same)" same "... and the file is unchanged"
is "$(stdin_attack fifo)" "nb=1 path=$scratch/fifo-in seek=Illegal seek write=Bad file descriptor caller_nb=1" \
    "control, without hutch: a FIFO stdin can be made non-blocking, and is named"
is "$(stdin_attack fifo "$HUTCH" run --)" \
    "nb=1 path=pipe seek=Illegal seek write=Bad file descriptor caller_nb=0" \
    "a FIFO stdin: the program gets a pipe of its own; the caller's stays blocking"
is "$(stdin_attack null)" "nb=1 path=/dev/null seek=ok write=ok caller_nb=1" \
    "control, without hutch: O_NONBLOCK on a shared /dev/null reaches the caller"
is "$(stdin_attack null "$HUTCH" run --)" \
    "nb=1 path=/dev/null seek=ok write=Bad file descriptor caller_nb=0" \
    "stdin /dev/null: the program gets a /dev/null of its own, read-only"

# hutch's stdin is consumed by what the program read, not by what hutch read ahead for it: a
# read loop over a file or a pipe sees every line, and the rest of the input is still there.
seq 1 12 >"$scratch/twelve"
loop=$(while read -r l; do "$HUTCH" run -- true || echo fail; echo "$l"; done <"$scratch/twelve")
is "$(echo $loop)" "$(echo $(seq 1 12))" "a read loop over a file with hutch run inside: every line"
loop=$(seq 1 12 | while read -r l; do "$HUTCH" run -- true || echo fail; echo "$l"; done)
is "$(echo $loop)" "$(echo $(seq 1 12))" "a read loop over a pipe with hutch run inside: every line"
read5='import os; os.write(1, os.read(0, 5))'
got=$({ "$HUTCH" run -- python3 -c "$read5"; head -c 4; } <"$scratch/lines.orig")
is "$(echo $got)" "1 2 3 4 5" "a file: the program reads 5 bytes, the caller reads on from there"
got=$(seq 1 5000 | { "$HUTCH" run -- python3 -c "$read5"; head -c 4; })
is "$(echo $got)" "1 2 3 4 5" "a pipe: the program reads 5 bytes, the caller reads on from there"
got=$(seq 1 100000 | { "$HUTCH" run -- sh -c 'head -n 2 >/dev/null; sleep 0.2'; wc -l; })
if [ "$got" -ge 90000 ] && [ "$got" -lt 100000 ]; then
    ok "a pipe: head -n 2 inside takes what it read, no more ($((100000 - got)) lines)"
else not_ok "a pipe: head -n 2 inside takes what it read, no more ($got lines left)"; fi

# --- --lang -------------------------------------------------------------------------------

out=$(hjson --lang python --code 'print(6*7)'); rc=$?
is "$(jfield "$out" stdout)/$rc" "42/0" "--lang python --code"
out=$(hjson --lang node --code 'console.log(6*7)'); rc=$?
is "$(jfield "$out" stdout)/$rc" "42/0" "--lang node --code"
out=$(hjson --lang bash --code 'echo $((6*7))'); rc=$?
is "$(jfield "$out" stdout)/$rc" "42/0" "--lang bash --code"
printf 'import sys\nprint("file", sys.argv[1:])\n' >"$scratch/prog.py"
out=$(hjson --lang python --code-file "$scratch/prog.py" -- a 'b c'); rc=$?
is "$(jfield "$out" stdout)/$rc" "file ['a', 'b c']/0" "--lang python --code-file, extra args reach sys.argv"
is "$(echo 'print(6*7)' | hrun --lang python)" 42 "--lang python, code from stdin"
is "$(echo 'import sys; print(repr(sys.stdin.read()))' | hrun --lang python)" "''" \
    "code from stdin: the program's own stdin is empty"
is "$(hrun --lang python --code-file - -- x <"$scratch/prog.py")" "file ['x']" "--code-file - reads stdin"
out=$(hjson --lang node --code 'console.log(process.argv.slice(2).join(","))' -- p q); rc=$?
is "$(jfield "$out" stdout)" "p,q" "--lang node: extra args in process.argv"
out=$(hjson --lang bash --code 'echo "$0:$#:$1"' -- one two); rc=$?
is "$(jfield "$out" stdout)" "/tmp/main.sh:2:one" "--lang bash: extra args are \$1..."
out=$(hjson --lang python --code 'raise SystemExit(4)'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" exit_code)/$rc" "RE/4/1" "--lang python exit status is the verdict's"
out=$(hjson --lang python --code-file "$scratch/missing.py"); rc=$?
like "$(jfield "$out" status)/$rc/$(jfield "$out" message)" "^XX/2/.*missing.py" "--code-file missing: XX, names it"

# --- output as JSON -----------------------------------------------------------------------

# strict: the bytes must be UTF-8 (jfield's argv round trip would hide bad bytes)
strict_json() { python3 -c 'import json,sys; o=json.loads(sys.stdin.buffer.read().decode("utf-8", "strict")); print(ascii(o[sys.argv[1]]))' "$1"; }
hjson -- sh -c 'printf "ok\377\376abc\n"; printf "e\300\n" >&2' >"$scratch/bin.json"; rc=$?
is "$(strict_json stdout <"$scratch/bin.json")/$rc" "'ok\\ufffd\\ufffdabc\\n'/0" "non-UTF-8 stdout: valid JSON, bad bytes as U+FFFD"
is "$(strict_json stderr <"$scratch/bin.json")" "'e\\ufffd\\n'" "non-UTF-8 stderr: valid JSON"
hjson -- printf 'a\0b\n' >"$scratch/nul.json"
is "$(strict_json stdout <"$scratch/nul.json")" "'a\\x00b\\n'" "a NUL byte in the output survives as \\u0000"
is "$(hjson -- sh -c 'printf "\342\202\254 \360\237\230\200"' | strict_json stdout)" "'\u20ac \U0001f600'" \
    "valid multibyte UTF-8 passes unchanged"
is "$(hrun -- printf 'raw\377' | od -An -tx1 | words)" "72 61 77 ff" "without --json the bytes pass through raw"

# --- artifacts ----------------------------------------------------------------------------

art=$scratch/art
out=$(hjson --artifacts "$art" -- sh -c '
    echo hello > /output/a.txt
    mkdir -p /output/sub/deep && head -c 5000 /dev/zero > /output/sub/deep/b.bin
    : > /output/empty
    ln -s /etc/passwd /output/passwd-link
    ln -s /output/a.txt /output/a-link
    mkfifo /output/fifo
    mkdir /output/emptydir'); rc=$?
is "$(jfield "$out" status)/$rc" "OK/0" "--artifacts: OK"
is "$(jpy "$out" '" ".join("%s=%d" % (a["path"], a["size"]) for a in sorted(o["artifacts"], key=lambda a: a["path"]))')" \
    "a.txt=6 empty=0 sub/deep/b.bin=5000" "--artifacts: files and subdirectories reported with sizes; no links, no FIFO"
is "$(cat "$art/a.txt" 2>&1)/$(stat -c %s "$art/sub/deep/b.bin" 2>&1)" "hello/5000" "--artifacts: the contents arrived"
is "$(find "$art" -type l | wc -l)" 0 "--artifacts: no symlink created on the host"
if [ -e "$art/passwd-link" ] && cmp -s "$art/passwd-link" /etc/passwd; then
    not_ok "--artifacts: a symlink to /etc/passwd is not followed"
else ok "--artifacts: a symlink to /etc/passwd is not followed"; fi
is "$(find "$art" -type p | wc -l)/$(jfield "$out" artifacts_truncated)" "0/false" "--artifacts: a FIFO is skipped, not reported as truncation"
is "$(find "$art" -type d | sed "s|^$art||" | sort | words)" "/emptydir /sub /sub/deep" "--artifacts: directories kept, empty ones too"

t0=$(now_ms)
out=$(timeout 20 "$HUTCH" run --json --artifacts "$scratch/fifo" -- sh -c 'mkfifo /output/p; echo x > /output/after'); rc=$?
t1=$(now_ms)
is "$(jfield "$out" status)/$rc/$(cat "$scratch/fifo/after" 2>&1)" "OK/0/x" "--artifacts: a FIFO with no writer does not hang the copy"
if [ $((t1 - t0)) -lt 5000 ]; then ok "--artifacts with a FIFO: done in $((t1 - t0)) ms"
else not_ok "--artifacts with a FIFO: done in $((t1 - t0)) ms"; fi

# Each entry costs 4096 bytes of the limit, a file its bytes on top: of 150K (153600), the first
# file takes 4096 + 100000, the second 4096 + the 45408 bytes left, the third nothing.
out=$(hjson --artifacts "$scratch/cap" --artifacts-limit 150K -- sh -c \
    'for i in 1 2 3; do head -c 100000 /dev/urandom > /output/f$i; done'); rc=$?
copied=$(du -sb --apparent-size "$scratch/cap" | cut -f1); dirsize=$(stat -c %s "$scratch/cap")
copied=$((copied - dirsize))
is "$(jfield "$out" artifacts_truncated)/$rc" "true/0" "--artifacts-limit 150K with 300 kB: artifacts_truncated, still OK"
is "$copied/$(jpy "$out" 'sum(a["size"] for a in o["artifacts"])')/$(find "$scratch/cap" -type f | wc -l)" \
    "145408/145408/2" "--artifacts-limit: the 153600-byte cap is 2 entries of 4096 and 145408 bytes, copied and reported"
like "$(jfield "$out" message)" "artifacts beyond the limits" "--artifacts-limit: the message says so"

out=$(hjson --artifacts "$scratch/many" -- sh -c 'for i in $(seq 1005); do : > /output/n$i; done'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" artifacts_truncated)/$(jpy "$out" 'len(o["artifacts"])')" "OK/true/1000" \
    "1005 files: 1000 copied, artifacts_truncated"
is "$(find "$scratch/many" -type f | wc -l)" 1000 "1005 files: 1000 files on the host"
out=$(hjson --artifacts "$scratch/deep" -- sh -c '
    d=/output; for i in $(seq 20); do d=$d/d$i; [ $i = 16 ] && k=$d; done
    mkdir -p $d; echo deep > $d/f; echo kept > $k/ok'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" artifacts_truncated)/$(jpy "$out" '[a["path"] for a in o["artifacts"]]')" \
    "OK/true/[\"d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/d13/d14/d15/d16/ok\"]" \
    "20 levels: the file at depth 16 is copied, artifacts_truncated"
is "$(find "$scratch/deep" -name f | wc -l)/$(find "$scratch/deep" -name d17 | wc -l)" "0/0" "20 levels: nothing below depth 16"

# Every entry counts against both caps, not only files: empty directories cost the host inodes
# and blocks (a review landed 547,571 of them, 2.1 GB). 3000 directories under a 1K limit: not
# one fits its 4096 bytes; under 40K exactly 10 do (the control: directories do get copied).
out=$(hjson --artifacts "$scratch/dirs1k" --artifacts-limit 1K -- sh -c 'cd /output && mkdir $(seq 3000)'); rc=$?
is "$(jfield "$out" status)/$(jfield "$out" artifacts_truncated)/$(find "$scratch/dirs1k" -mindepth 1 | wc -l)" \
    "OK/true/0" "3000 directories, --artifacts-limit 1K: none lands, artifacts_truncated"
out=$(hjson --artifacts "$scratch/dirs40k" --artifacts-limit 40K -- sh -c 'cd /output && mkdir $(seq 3000)'); rc=$?
is "$(jfield "$out" artifacts_truncated)/$(find "$scratch/dirs40k" -mindepth 1 -type d | wc -l)" "true/10" \
    "3000 directories, --artifacts-limit 40K: exactly 10 land (4096 bytes each)"
t0=$(now_ms)
out=$(hjson --artifacts "$scratch/dirs20k" -- sh -c 'cd /output && seq 20000 | xargs mkdir && mkdir -p 1/a/b/c'); rc=$?
t1=$(now_ms)
is "$(jfield "$out" status)/$(jfield "$out" artifacts_truncated)/$(find "$scratch/dirs20k" -mindepth 1 | wc -l)" \
    "OK/true/1000" "20,000 empty directories, default limits: 1000 entries land, artifacts_truncated"
if [ $((t1 - t0)) -lt 10000 ]; then ok "20,000 empty directories: the run took $((t1 - t0)) ms"
else not_ok "20,000 empty directories: the run took $((t1 - t0)) ms"; fi
# Entries that are never copied count too: 1001 links and FIFOs reach the cap; 999 and a file
# do not (the control: the count is of entries, exactly).
out=$(hjson --artifacts "$scratch/links" -- sh -c 'cd /output && for i in $(seq 501); do ln -s /etc/passwd l$i; done
    mkfifo $(seq 500)'); rc=$?
is "$(jfield "$out" artifacts_truncated)/$(find "$scratch/links" -mindepth 1 | wc -l)" "true/0" \
    "1001 links and FIFOs: they count, artifacts_truncated, nothing lands"
out=$(hjson --artifacts "$scratch/links2" -- sh -c 'cd /output && for i in $(seq 500); do ln -s /etc/passwd l$i; done
    mkfifo $(seq 499); echo x > file'); rc=$?
is "$(jfield "$out" artifacts_truncated)/$(find "$scratch/links2" -mindepth 1 | words)" "false/$scratch/links2/file" \
    "999 links and FIFOs and a file: 1000 entries, the file lands, not truncated"

out=$(hjson --artifacts "$scratch/names" -- sh -c 'echo x > "/output/$(printf "bad\377name")"; echo y > "/output/new
line"'); rc=$?
is "$(jpy "$out" 'sorted(a["path"] for a in o["artifacts"])')" '["bad\ufffdname", "new\nline"]' \
    "artifact names that are not UTF-8 or hold a newline are still reported"
is "$(find "$scratch/names" -type f -printf . | wc -c)" 2 "both odd names copied"

# The host's artifact directory holds a symlink where the sandbox writes a file or a directory:
# hutch must not write through it, nor create the target of a dangling one.
mkdir -p "$scratch/trap" "$scratch/victim-dir"
echo victim >"$scratch/victim"
ln -s "$scratch/victim" "$scratch/trap/a.txt"
ln -s "$scratch/victim-dir" "$scratch/trap/sub"
ln -s "$scratch/dangling-target" "$scratch/trap/dangling"
out=$(hjson --artifacts "$scratch/trap" -- sh -c 'echo evil > /output/a.txt; mkdir /output/sub; echo evil > /output/sub/x
    echo evil > /output/dangling; echo fine > /output/fine'); rc=$?
is "$(cat "$scratch/victim")/$(ls "$scratch/victim-dir" | wc -l)/$(ls "$scratch/dangling-target" 2>&1 | grep -c 'No such')" "victim/0/1" \
    "a symlink planted in the host's artifact directory is not written through, a dangling one not created"
is "$(find "$scratch/trap" -type l | wc -l)/$(readlink "$scratch/trap/a.txt")" "3/$scratch/victim" "... the planted links are left as they were"
is "$(jfield "$out" status)/$rc/$(jfield "$out" artifacts_skipped_existing)/$(cat "$scratch/trap/fine")" "OK/0/3/fine" \
    "... the run is OK, says 3 were skipped as existing, and a new file next to them arrives"
like "$(jfield "$out" message)" "^3 artifacts not copied: the name already exists" "... and the message says so"

# --artifacts . in a repository: the caller's files are never replaced or modified, whatever the
# sandbox writes under their names; they keep their content, mode and inode. An existing real
# directory is merged into, with new names only.
repo=$scratch/repo
mkdir -p "$repo/.git/hooks"
printf '#!/bin/sh\necho build\n' >"$repo/build.sh"
printf '#!/bin/sh\nexit 0\n' >"$repo/.git/hooks/pre-commit"
chmod 755 "$repo/build.sh" "$repo/.git/hooks/pre-commit"
repo_state() { (cd "$repo" && stat -c '%n %i %a %s %Y' build.sh .git/hooks/pre-commit && sha256sum build.sh .git/hooks/pre-commit); }
before=$(repo_state)
out=$(hjson --artifacts "$repo" -- sh -c 'cd /output
    printf "#!/bin/sh\necho pwned\n" > build.sh; chmod 755 build.sh
    mkdir -p .git/hooks && echo pwned > .git/hooks/pre-commit && echo hook > .git/hooks/new-hook
    chmod 4755 .git/hooks/new-hook; echo new > new.sh; chmod 755 new.sh'); rc=$?
is "$(repo_state)" "$before" "--artifacts into a repository: build.sh and a git hook keep content, mode and inode"
is "$(jfield "$out" status)/$rc/$(jfield "$out" artifacts_skipped_existing)" "OK/0/2" "... the run is OK and says 2 were not copied"
is "$(stat -c '%a %s' "$repo/new.sh" "$repo/.git/hooks/new-hook" 2>&1 | words)" "644 4 644 5" \
    "... control: new names arrive, in the existing directory too, mode 0644 (not executable, not set-id)"
is "$(jpy "$out" 'sorted(a["path"] for a in o["artifacts"])')" '[".git/hooks/new-hook", "new.sh"]' "... and only those are reported"
# A host file where the sandbox has a directory, and a host directory where it has a file.
mkdir -p "$scratch/mixed/docs"
echo data >"$scratch/mixed/data"
mixed_state() { (cd "$scratch/mixed" && stat -c '%n %i %a %s %Y' data docs && cat data && ls -A docs); }
before=$(mixed_state)
out=$(hjson --artifacts "$scratch/mixed" -- sh -c 'cd /output; mkdir data && echo pwned > data/x; echo pwned > docs'); rc=$?
is "$(mixed_state)/$(jfield "$out" status)/$(jfield "$out" artifacts_skipped_existing)" "$before/OK/2" \
    "a file where the sandbox has a directory, a directory where it has a file: both left alone, 2 not copied"

# --- 20 at once ---------------------------------------------------------------------------

t0=$(now_ms)
for i in $(seq 20); do
    "$HUTCH" run --json -- sh -c "echo token-$i; cat /proc/self/uid_map; sleep 1" \
        >"$scratch/c$i.json" 2>"$scratch/c$i.err" &
    bg_pids+=($!)
    eval "cpid$i=$!"
done
rcs=""
for i in $(seq 20); do
    p=cpid$i
    wait "${!p}"; rcs="$rcs$?"
done
t1=$(now_ms)
is "$rcs" "$(printf '0%.0s' $(seq 20))" "20 concurrent runs: each exits 0"
bad=0 bases=""
for i in $(seq 20); do
    o=$(cat "$scratch/c$i.json")
    so=$(jfield "$o" stdout 2>/dev/null)
    first=$(head -n 1 <<<"$so")
    if [ "$(jfield "$o" status 2>/dev/null)" != OK ] || [ "$first" != "token-$i" ] ||
        [ "$(grep -c token <<<"$so")" != 1 ] || [ -s "$scratch/c$i.err" ]; then
        bad=$((bad + 1)); diag "run $i: $(head -c 300 "$scratch/c$i.json") $(head -c 300 "$scratch/c$i.err")"
    fi
    bases="$bases $(sed -n 2p <<<"$so" | awk '{print $2}')"
done
is "$bad" 0 "20 concurrent runs: each OK with its own token only"
is "$(echo $bases | tr ' ' '\n' | grep -c .)/$(echo $bases | tr ' ' '\n' | sort -u | grep -c .)" "20/20" \
    "20 concurrent runs: 20 different host uid ranges"
if [ $((t1 - t0)) -lt 10000 ]; then ok "20 concurrent runs of 1 s took $((t1 - t0)) ms"
else not_ok "20 concurrent runs of 1 s took $((t1 - t0)) ms"; fi

done_testing
