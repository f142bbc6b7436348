# What of the caller's reaches the sandbox: its descriptors, and paths resolved through them
# (the runc CVE-2024-21626 pattern: `--cwd /proc/self/fd/N` once landed the program on the host's
# filesystem through a cgroup directory fd of the supervisor's, issue 3), the targets of
# --ro-bind and --file, its command line, its session keyring.
# A world-readable token file and a token-printing script on the host: a sandbox that reads or
# runs either has escaped.
. "$(dirname "$0")/lib.sh"
require_probes ids
use_scratch caller

chmod 755 "$scratch"
tok=hutch-caller-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
echo "$tok" >"$scratch/token" && chmod 644 "$scratch/token"
# A static program, not a script: a script's interpreter would fail to open a path through a
# descriptor closed at exec, and hide that the kernel had run a host file.
cp "$PROBES/ids" "$scratch/ids" && chmod 755 "$scratch/ids"
echo data >"$scratch/in.txt"
mkdir -m 777 "$scratch/open" && chmod 777 "$scratch/open"
# The caller's own descriptors, left open without close-on-exec as a careless caller would:
# 7 on the token, 8 on a world-writable host directory. Every run below gets them.
hutch_leaky() { "$HUTCH" run "$@" 7<"$scratch/token" 8<"$scratch/open"; }
climb=../../../../../../../../../..
# Every way to get more fds of the supervisor's open: --file, --ro-bind, and plain.
variants=("" "--file=$scratch/in.txt:/tmp/in.txt" "--ro-bind=$scratch:/mnt/ro")
leaked() { grep -c -- "$tok" <<<"$1"; }
ran() { grep -- "^ids ruid=" <<<"$1"; }

# --- the working directory ------------------------------------------------------------------

for v in "${variants[@]}"; do
    name=${v%%=*}; name=${name:-plain}
    hits=0 runs=0
    for cwd in /proc/self/fd/{0..20} /proc/1/cwd /proc/1/root /proc/self/root/.. /dev/fd/3 /dev/stdin; do
        out=$(hutch_leaky $v --cwd "$cwd" -- sh -c "cat $climb$scratch/token ./token; ls -a $climb" 2>&1)
        runs=$((runs + 1))
        [ "$(leaked "$out")" -eq 0 ] || { hits=$((hits + 1)); diag "--cwd $cwd: $out"; }
    done
    is "$hits" 0 "$name: --cwd through /proc/self/fd, /proc/1/{cwd,root} and /dev/fd never reaches the host ($runs tries)"
done
out=$("$HUTCH" run --ro-bind "$scratch:/mnt/ro" --cwd /mnt/ro -- cat token 2>&1)
is "$out" "$tok" "control: --cwd into a bound directory reads the token there"
out=$("$HUTCH" run --cwd /proc/self/fd/12 -- true 2>&1); rc=$?
like "$rc/$out" "^2/hutch: XX: .*working directory /proc/self/fd/12" "--cwd /proc/self/fd/12: XX that names the working directory"

# --- argv[0] ----------------------------------------------------------------------------------

for v in "${variants[@]}"; do
    name=${v%%=*}; name=${name:-plain}
    hits=0 runs=0
    for n in {3..20}; do
        out=$(hutch_leaky $v -- "/proc/self/fd/$n/$climb$scratch/ids" 2>&1)
        [ "$n" = 8 ] && out+=$(hutch_leaky $v -- "/proc/self/fd/8/../ids" 2>&1)
        runs=$((runs + 1))
        [ -z "$(ran "$out")" ] || { hits=$((hits + 1)); diag "fd $n: $out"; }
    done
    out=$(hutch_leaky $v -- "/proc/1/root$scratch/ids" 2>&1)
    [ -z "$(ran "$out")" ] || { hits=$((hits + 1)); diag "/proc/1/root: $out"; }
    is "$hits" 0 "$name: argv[0] through /proc/self/fd/N or /proc/1/root never runs a host file ($runs tries)"
done
out=$("$HUTCH" run --ro-bind "$scratch:/mnt/ro" -- /mnt/ro/ids 2>&1)
like "$out" "^ids ruid=1000" "control: the same program, bound in, runs"
out=$("$HUTCH" run -- /proc/self/fd/3/x 2>&1); rc=$?
like "$rc/$out" "^1/.*cannot execute /proc/self/fd/3/x" "argv[0] through a magic link: RE 127, cannot execute"

# --- what is open at exec, and in the sandbox's processes -----------------------------------

for v in "${variants[@]}"; do
    name=${v%%=*}; name=${name:-plain}
    out=$(hutch_leaky $v -- sh -c 'for f in /proc/self/fd/*; do echo "${f##*/} $(readlink $f)"; done' 2>&1 </dev/null)
    extra=$(grep -vE '^[012] (pipe:|/dev/null)|^[0-9]+ (/proc/[0-9]+/fd)?$' <<<"$out")
    is "$extra" "" "$name: the program starts with stdio only (pipes or /dev/null), nothing of the caller's"
done
# Even a file the caller opens before exec'ing hutch, without close-on-exec, stays outside.
out=$(hutch_leaky -- sh -c 'cat /proc/self/fd/7; ls /proc/self/fd/8/' 2>&1)
is "$(leaked "$out")" 0 "fds the caller leaked into hutch (a file, a directory) do not reach the sandbox"

# --- --ro-bind and --file targets resolve inside the sandbox's root --------------------------

before=$(find "$scratch" | sort)
for target in /dev/fd/8/x /dev/fd/3/x /dev/fd/5/x /dev/stdin/x /proc/self/fd/8/y /proc/self/root/tmp/x; do
    out=$(hutch_leaky --json --ro-bind "$scratch/in.txt:$target" -- true 2>&1)
    st=$(jfield "$out" status)
    [ "$target" = /proc/self/root/tmp/x ] && [ "$st" = OK ] && continue # inside after all
    is "$st" XX "--ro-bind onto $target: refused (XX)"
done
is "$(find "$scratch" | sort)" "$before" "--ro-bind targets through magic links made nothing on the host"
for target in /proc/self/fd/8/z /proc/self/fd/1 /proc/1/oom_score_adj /dev/pts/x /usr/x; do
    out=$(hutch_leaky --json --file "$scratch/in.txt:$target" -- true 2>&1)
    is "$(jfield "$out" status)" XX "--file to $target: refused (XX)"
done
out=$("$HUTCH" run --json --file "$scratch/in.txt:/proc/self/fd/1" -- true 2>&1)
like "$(jfield "$out" message)" "only the sandbox's own filesystem takes files" "--file into /proc: the message says where files can go"
out=$("$HUTCH" run --file "$scratch/in.txt:/tmp/a/b/c.txt" --file "$scratch/in.txt:/dev/shm/d.txt" \
    --ro-bind "$scratch:/mnt/x/y" -- sh -c 'cat /tmp/a/b/c.txt /dev/shm/d.txt /mnt/x/y/in.txt' 2>&1)
is "$(echo $out)" "data data data" "control: --file into new directories and /dev/shm, --ro-bind onto a new path"

# --- the caller's command line and session keyring --------------------------------------------

long=$(printf 'x%.0s' $(seq 2000))
# (init is exec'd beside the program's start: while that exec is under way, /proc/1/cmdline
# reads empty; the program waits for it, at most 2 s)
out=$("$HUTCH" run --env "LONG=$long" -- sh -c 'for i in $(seq 200); do
    [ -n "$(tr -d "\0" </proc/1/cmdline)" ] && break; sleep 0.01; done
    od -An -c /proc/1/cmdline | tr -d " \n"' 2>&1)
is "$out" 'hutch-init\0' "/proc/1/cmdline is 'hutch-init', not padded to the caller's command line"
out=$("$HUTCH" run --root -- cat /proc/keys 2>&1)
like "$out" "keyring +_ses" "the sandbox has a session keyring of its own (the caller's is not inherited)"

done_testing
