#!/usr/bin/env bash
# The sandbox's pid 1: named hutch-init, shows nothing of the host command line, reaps orphans,
# and takes every leftover process with it when the program ends.
. "$(dirname "$0")/lib.sh"

token=host-secret-$$-$RANDOM
# Init is exec'd beside the program's start (src/init/README.md): while that exec is under way
# /proc/1/cmdline reads empty, so the program waits (at most 2 s) for init's.
out=$(hrun --env "TOKEN=$token" --file "/etc/hostname:/tmp/$token" -- /bin/sh -c \
    'for i in $(seq 200); do [ -n "$(tr -d "\0" </proc/1/cmdline)" ] && break; sleep 0.01; done
    tr "\0" " " </proc/1/cmdline')
like "$out" "^hutch-init" "pid 1 is hutch-init"
case $out in *"$token"* | *--env* | *"/etc/hostname"*) not_ok "pid 1's command line hides the host's"; diag "$out" ;;
*) ok "pid 1's command line hides the host's" ;; esac

out=$(hrun -- /bin/sh -c '(sleep 0.2 &) ; sleep 0.5; ps -e -o stat= -o comm= | grep -c "^Z"')
is "$out" "0" "an orphan that exits is reaped by init (no zombie)"

marker=/tmp/hutch-init-marker-$$
start=$(date +%s%N)
hrun --timeout 20 -- /bin/sh -c 'setsid sleep 60 </dev/null >/dev/null 2>&1 & echo started'
end=$(date +%s%N)
[ $(((end - start) / 1000000)) -lt 5000 ] && ok "a daemon left behind does not keep hutch run waiting" ||
    not_ok "a daemon left behind does not keep hutch run waiting"
pgrep -f "^sleep 60$" >/dev/null && not_ok "the daemon died with the sandbox" || ok "the daemon died with the sandbox"
out=$(hrun -- cat /proc/self/cgroup)
bad=$(echo "$out" | grep -v ':/$' || true)
[ -n "$out" ] && [ -z "$bad" ] && ok "the cgroup namespace hides the host's cgroup tree (every line is /)" ||
    { not_ok "the cgroup namespace hides the host's cgroup tree (every line is /)"; diag "$out"; }
# Signal state: hutch run started with every signal it can ignore ignored, and several blocked,
# must start the program with none ignored, caught or blocked (ignored and blocked survive exec).
sigs=$(python3 - "$HUTCH" <<'EOF'
import os, signal, sys
for s in range(1, signal.NSIG):
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
# 32 and 33, which libc keeps for itself, only by the system call (make leaves them ignored)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
ign = (ctypes.c_ulong * 4)(1, 0, 0, 0)  # handler SIG_IGN, flags, restorer, mask
for s in (32, 33):
    libc.syscall(13, s, ign, None, 8)  # rt_sigaction on x86_64
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM, signal.SIGCHLD})
os.execv(sys.argv[1], [sys.argv[1], "run", "--", "cat", "/proc/self/status"])
EOF
)
like "$sigs" $'\nSigIgn:\t0+\n' "signals ignored by hutch run's caller are not ignored in the sandbox"
like "$sigs" $'\nSigBlk:\t0+\n' "signals blocked by hutch run's caller are not blocked in the sandbox"
like "$sigs" $'\nSigCgt:\t0+\n' "and none is caught by a handler"
ctl=$(python3 -c 'import ctypes, os, signal; signal.signal(signal.SIGUSR2, signal.SIG_IGN)
ctypes.CDLL(None).syscall(13, 33, (ctypes.c_ulong * 4)(1, 0, 0, 0), None, 8)
os.execv("/bin/cat", ["cat", "/proc/self/status"])')
like "$ctl" $'\nSigIgn:\t0*1[0-9a-f]{8}\n' "control: ignored signals (33 too) do survive exec outside a sandbox"
done_testing
