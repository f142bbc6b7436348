#!/usr/bin/env bash
# Escape attempts through processes, privileges and inherited things, as the default user and
# with --root:
#   - see, signal or trace a host process (a `sleep` started here): it is invisible inside, every
#     attempt fails, and it is alive afterwards;
#   - open init's private /proc files (mem, environ, fd, root, ...);
#   - change the host's hostname (sethostname, hostname(1), /proc/sys/kernel/hostname);
#   - write kernel knobs under /proc/sys or any global /proc file; find anything in /sys;
#   - reach the host's SysV shared memory and message queues, or its /dev/shm;
#   - hold a capability, be host root (uid_map), gain privileges from a set-uid binary (one of
#     the host's, one installed set-uid root on the host for the test, one made inside and
#     handed out as an artifact) or from file capabilities;
#   - push input into the caller's terminal with TIOCSTI (hutch run under script(1));
#   - use an fd to a host directory that the caller had open when it started hutch, or turn a
#     host file given as stdin (read-only) into a writable one.
# Each has a control run on the host that shows the same probe notices when the attempt works.
. "$(dirname "$0")/lib.sh"

require_probes escape ids

line() { awk -v op="$2" '$1 == op { print; exit }' <<<"$1"; }
expect() { like "$(line "$1" "$2")" "^[^ ]+ errno=($3)( |\$)" "$4"; }
esc() { echo "--file=$PROBES/escape:/tmp/escape"; }
roles=(user root)
role_flag() { [ "$1" = root ] && echo --root || echo --env=ROLE=user; }

work=$(mktemp -d /tmp/hutch-escape-proc.XXXXXX)
chmod 755 "$work"
usrdir=
host_sleep=
shm_id= msg_id= shm_file=
cleanup() {
    [ -z "$host_sleep" ] || kill "$host_sleep" 2>/dev/null
    [ -z "$host_sleep" ] || wait "$host_sleep" 2>/dev/null
    [ -z "$shm_id" ] || ipcrm -m "$shm_id" 2>/dev/null
    [ -z "$msg_id" ] || ipcrm -q "$msg_id" 2>/dev/null
    [ -z "$shm_file" ] || rm -f "$shm_file"
    rm -rf "$work"
    [ -z "$usrdir" ] || rm -rf "$usrdir"
    [ -z "${HUTCH_TEST_TMP:-}" ] || rm -rf "$HUTCH_TEST_TMP"
}
trap cleanup EXIT

# --- host processes -------------------------------------------------------------------------
sleep 300 &
host_sleep=$!
host_count=$(ls /proc | grep -c '^[0-9]*$')
host_init=$(cat /proc/1/comm)
for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" "$(esc)" -- /bin/bash -c '
        hpid=$1
        echo "pids: $(ls /proc | grep "^[0-9]*$" | sort -n | tr "\n" " ")"
        echo "init: $(cat /proc/1/comm)"
        echo "ps: $(ps -eo pid= | tr -s " \n" "  ")"
        kill -0 $hpid 2>&1; echo "kill -0: rc=$?"
        kill -9 $hpid 2>&1; echo "kill -9: rc=$?"
        sleep 30 & sib=$!
        /tmp/escape kill:$hpid:0 kill:$hpid:9 kill:$hpid:15 ptrace_attach:$hpid proc_mem:$hpid kill:$sib:0
        echo "sibling: $sib"
        kill -9 $sib
        /tmp/escape kill:-1:9' _ "$host_sleep" 2>&1)
    pids=$(sed -n 's/^pids: //p' <<<"$out")
    if [ -z "$pids" ] || [[ " $pids" == *" $host_sleep "* ]]; then
        not_ok "$who: /proc inside does not list the host's sleep (pid $host_sleep)"
        diag "$out"
    else
        ok "$who: /proc inside does not list the host's sleep"
    fi
    n=$(wc -w <<<"$pids")
    if [ "$n" -gt 0 ] && [ "$n" -lt 20 ] && [ "$n" -lt "$host_count" ]; then
        ok "$who: /proc inside lists only the sandbox's few processes ($n, the host has $host_count)"
    else
        not_ok "$who: /proc inside lists only the sandbox's few processes"
        diag "pids inside: $pids" "host has $host_count"
    fi
    like "$pids" '^1 ' "$who: pid 1 exists inside"
    init=$(sed -n 's/^init: //p' <<<"$out")
    if [[ $init == hutch* ]] && [ "$init" != "$host_init" ]; then
        ok "$who: pid 1 inside is the sandbox's init ($init), not the host's ($host_init)"
    else
        not_ok "$who: pid 1 inside is the sandbox's init, not the host's"
        diag "init inside: $init" "host pid 1: $host_init"
    fi
    if [[ " $(sed -n 's/^ps: //p' <<<"$out") " == *" $host_sleep "* ]]; then
        not_ok "$who: ps inside does not show the host's sleep"
    else
        ok "$who: ps inside does not show the host's sleep"
    fi
    like "$out" 'kill -0: rc=[1-9]' "$who: kill -0 of the host's pid fails"
    like "$out" 'kill -9: rc=[1-9]' "$who: kill -9 of the host's pid fails"
    expect "$out" "kill:$host_sleep:0" ESRCH "$who: kill(host pid, 0) fails with ESRCH (no such process inside)"
    expect "$out" "kill:$host_sleep:9" ESRCH "$who: kill(host pid, SIGKILL) fails with ESRCH"
    expect "$out" "kill:$host_sleep:15" ESRCH "$who: kill(host pid, SIGTERM) fails with ESRCH"
    expect "$out" "ptrace_attach:$host_sleep" "EPERM|ESRCH" "$who: ptrace of the host's pid fails"
    expect "$out" "proc_mem:$host_sleep" "ENOENT at=open" "$who: /proc/<host pid>/mem does not exist inside"
    sib=$(sed -n 's/^sibling: //p' <<<"$out")
    like "$(line "$out" "kill:$sib:0")" "^[^ ]+ ok" "$who: control: the probe signals a process of the sandbox's own"
    like "$(line "$out" "kill:-1:9")" "^[^ ]+ (ok|errno=ESRCH)" "$who: kill(-1, SIGKILL) was tried inside"
    state=$(awk '{print $3}' "/proc/$host_sleep/stat" 2>/dev/null)
    if kill -0 "$host_sleep" 2>/dev/null && [ "$state" != Z ]; then
        ok "$who: the host's sleep is alive after the sandbox tried to kill it (state $state)"
    else
        not_ok "$who: the host's sleep is alive after the sandbox tried to kill it"
    fi
done
# init (pid 1 inside) is hutch's own process, holding the channel to the supervisor: none of its
# private /proc files opens, for the user or for sandbox root
for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" -- /bin/bash -c '
        for pid in 1 $$; do
            for f in environ mem exe stack syscall auxv; do
                head -c 1 /proc/$pid/$f >/dev/null 2>&1 && echo "opened $pid $f"
            done
            for d in root cwd fd map_files; do
                ls /proc/$pid/$d/ >/dev/null 2>&1 && echo "opened $pid $d"
            done
        done
        true' 2>&1)
    is "$(grep '^opened 1 ' <<<"$out" | grep -v '^opened 1 fd$')" "" "$who: init's environ, mem, exe, stack, syscall, auxv, root, cwd, map_files stay closed"
    like "$(grep -c '^opened [02-9][0-9]* \(environ\|exe\|root\|cwd\|fd\)$' <<<"$out")" '^5$' "$who: control: the shell opens its own environ, exe, root, cwd and fd the same way"
    # Init is exec'd inside the sandbox's user namespace, so the root of that namespace owns the
    # /proc entries of the non-dumpable init: sandbox root may list init's fd numbers, nothing
    # more. The user may not even list them.
    if [ "$who" = root ]; then
        out=$(hrun --root -- /bin/bash -c '
            for n in $(ls /proc/1/fd); do
                readlink /proc/1/fd/$n >/dev/null 2>&1 && echo "read link $n"
                head -c 1 /proc/1/fd/$n >/dev/null 2>&1 && echo "opened $n"
                head -c 1 /proc/1/fdinfo/$n >/dev/null 2>&1 && echo "fdinfo $n"
            done
            echo listed $(ls /proc/1/fd | wc -l)' 2>&1)
        is "$(grep -v '^listed' <<<"$out")" "" "root: no fd of init's can be read, opened or described (fdinfo)"
        like "$out" '^listed [1-9]' "root: control: it did list init's fds"
    else
        is "$(grep '^opened 1 fd$' <<<"$out")" "" "user: init's fd directory does not even list"
    fi
done

# control: the same probe, on the host, does see and signal it
host=$("$PROBES/escape" "kill:$host_sleep:0" "ptrace_attach:$host_sleep" "proc_mem:$host_sleep" 2>&1)
like "$(line "$host" "kill:$host_sleep:0")" "^[^ ]+ ok" "control: the probe on the host signals the sleep"
like "$(line "$host" "ptrace_attach:$host_sleep")" "^[^ ]+ ok attached" "control: the probe on the host attaches to the sleep"
like "$(line "$host" "proc_mem:$host_sleep")" "^[^ ]+ ok" "control: the probe on the host opens the sleep's /proc/PID/mem"
kill "$host_sleep" 2>/dev/null
wait "$host_sleep" 2>/dev/null
host_sleep=

# --- hostname and /proc/sys -------------------------------------------------------------------
host_name=$(hostname)
host_domain=$(cat /proc/sys/kernel/domainname)
for who in "${roles[@]}"; do
    evil=evil-$RANDOM
    out=$(hrun "$(role_flag "$who")" "$(esc)" -- /bin/bash -c '
        evil=$1
        echo "inside: $(hostname)"
        hostname "$evil" 2>&1; echo "hostname(1): rc=$?"
        /tmp/escape sethostname:$evil setdomainname:$evil
        echo "$evil" 2>&1 >/proc/sys/kernel/hostname; echo "proc hostname: rc=$?"
        echo "$evil" 2>&1 >/proc/sys/kernel/domainname; echo "proc domainname: rc=$?"
        echo 1 2>&1 >/proc/sys/net/ipv4/ip_forward; echo "proc ip_forward: rc=$?"
        echo 0 2>&1 >/proc/sys/kernel/randomize_va_space; echo "proc aslr: rc=$?"
        echo "after: $(hostname)"
        grep " /proc/sys " /proc/self/mountinfo | cut -d" " -f6
        echo "sys: $(ls -A /sys 2>&1 | wc -l) $(grep -c " sysfs " /proc/self/mountinfo)"' _ "$evil" 2>&1)
    like "$out" 'hostname\(1\): rc=[1-9]' "$who: hostname(1) fails inside"
    expect "$out" "sethostname:$evil" EPERM "$who: sethostname fails with EPERM"
    expect "$out" "setdomainname:$evil" EPERM "$who: setdomainname fails with EPERM"
    like "$out" 'Read-only file system'$'\n''proc hostname: rc=[1-9]' "$who: writing /proc/sys/kernel/hostname fails (read-only)"
    like "$out" 'proc domainname: rc=[1-9]' "$who: writing /proc/sys/kernel/domainname fails"
    like "$out" 'proc ip_forward: rc=[1-9]' "$who: writing /proc/sys/net/ipv4/ip_forward fails"
    like "$out" 'proc aslr: rc=[1-9]' "$who: writing /proc/sys/kernel/randomize_va_space fails"
    like "$out" $'\nro,' "$who: /proc/sys is mounted read-only"
    inside=$(sed -n 's/^inside: //p' <<<"$out")
    is "$(sed -n 's/^after: //p' <<<"$out")" "$inside" "$who: the sandbox's hostname is unchanged ($inside)"
    is "$(hostname)" "$host_name" "$who: the host's hostname is unchanged"
    is "$(cat /proc/sys/kernel/domainname)" "$host_domain" "$who: the host's domainname is unchanged"
    is "$(sed -n 's/^sys: //p' <<<"$out")" "0 0" "$who: /sys is empty and no sysfs is mounted"
done
# --- the boot id ------------------------------------------------------------------------------
# /proc/sys/kernel/random/boot_id is the host's in a plain /proc: each start gets its own, which
# neither sandbox root's write, chmod, remount nor umount turns back into the host's.
host_boot=$(cat /proc/sys/kernel/random/boot_id)
boots=()
for who in "${roles[@]}"; do
    f=/proc/sys/kernel/random/boot_id
    out=$(hrun "$(role_flag "$who")" "$(esc)" -- /bin/bash -c '
        f=$1
        echo "boot: $(cat $f)"
        echo x 2>&1 >$f; echo "write: rc=$?"
        chmod 666 $f 2>&1; echo "chmod: rc=$?"
        /tmp/escape remount_rw:$f umount:$f
        umount $f 2>&1; echo "umount(8): rc=$?"
        echo "after: $(cat $f)"' _ "$f" 2>&1)
    boot=$(sed -n 's/^boot: //p' <<<"$out")
    boots+=("$boot")
    like "$boot" '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' "$who: the boot id inside is a uuid ($boot)"
    [ -n "$boot" ] && [ "$boot" != "$host_boot" ] && ok "$who: the boot id inside is not the host's" || not_ok "$who: the boot id inside is not the host's"
    like "$out" 'write: rc=[1-9]' "$who: writing the boot id fails"
    like "$out" 'chmod: rc=[1-9]' "$who: chmod of the boot id fails"
    expect "$out" "remount_rw:$f" EPERM "$who: remounting the boot id read-write fails with EPERM"
    expect "$out" "umount:$f" EPERM "$who: unmounting the boot id fails with EPERM (seccomp)"
    like "$out" 'umount\(8\): rc=[1-9]' "$who: umount(8) of the boot id fails"
    is "$(sed -n 's/^after: //p' <<<"$out")" "$boot" "$who: the boot id is unchanged after the attempts"
done
[ "${boots[0]}" != "${boots[1]}" ] && ok "two starts get two boot ids" || not_ok "two starts get two boot ids"
# control: the same probe does unmount a bind over the boot id where the caller may (the host's
# root in a mount namespace of its own), so EPERM above is the sandbox's doing
ctl=$(unshare -m bash -c 'mount --make-rprivate / && mount --bind /dev/null /proc/sys/kernel/random/boot_id && "$0" umount:/proc/sys/kernel/random/boot_id && cat /proc/sys/kernel/random/boot_id' "$PROBES/escape" 2>&1)
like "$ctl" "umount:/proc/sys/kernel/random/boot_id ok" "control: the probe's umount of such a bind works with CAP_SYS_ADMIN"
like "$ctl" "$host_boot" "control: and uncovers the host's boot id"

# Every global file under /proc that opens for writing (pid directories aside). /proc/pressure
# takes PSI triggers from any unprivileged user, on the host too; nothing else may open.
for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" -- /bin/bash -c '
        n=0
        while read -r f; do
            n=$((n + 1))
            # in this shell, not a subshell: a fork for each of 1000 files took 14 s on the
            # host and far more under TCG; the open is the same O_WRONLY|O_APPEND|O_CREAT
            { true >>"$f"; } 2>/dev/null && echo "writable: $f"
        done < <(find /proc -maxdepth 8 -type f ! -regex "/proc/\([0-9]+\|self\|thread-self\)/.*" 2>/dev/null)
        echo "tried: $n"' 2>&1)
    is "$(grep '^writable: ' <<<"$out" | grep -v '^writable: /proc/pressure/')" "" "$who: no global /proc file opens for writing ($(sed -n 's/^tried: //p' <<<"$out") tried)"
done
[ "$(cat /proc/sys/kernel/randomize_va_space)" != 0 ] && ok "the host's ASLR setting is untouched" || not_ok "the host's ASLR setting is untouched"
# control: sethostname works where the caller holds CAP_SYS_ADMIN (in a throwaway UTS namespace)
host=$(unshare -u "$PROBES/escape" sethostname:control-name 2>&1)
like "$host" '^sethostname:control-name ok' "control: the probe's sethostname works with the capability (own UTS namespace)"

# --- IPC objects of the host's: SysV shared memory, message queues, /dev/shm -------------------
shm_id=$(ipcmk -M 4096 -p 0666 2>/dev/null | grep -o '[0-9]*$')
msg_id=$(ipcmk -Q -p 0666 2>/dev/null | grep -o '[0-9]*$')
shm_file=/dev/shm/hutch-escape-$$-$RANDOM
echo host-shm >"$shm_file" && chmod 666 "$shm_file"
if [ -n "$shm_id" ] && [ -n "$msg_id" ]; then
    like "$(tail -n +2 /proc/sysvipc/shm | awk '{print $2}' | tr '\n' ' ')" "(^| )$shm_id " "control: the host's shared memory segment is in the host's /proc/sysvipc/shm"
    host=$("$PROBES/escape" "shmat:$shm_id" "msgctl:$msg_id" 2>&1)
    like "$(line "$host" "shmat:$shm_id")" "^[^ ]+ ok" "control: the probe attaches the host's segment on the host"
    like "$(line "$host" "msgctl:$msg_id")" "^[^ ]+ ok" "control: the probe reaches the host's message queue on the host"
    for who in "${roles[@]}"; do
        out=$(hrun "$(role_flag "$who")" "$(esc)" -- /bin/bash -c '
            echo "shm: $(tail -n +2 /proc/sysvipc/shm | wc -l)"
            echo "msg: $(tail -n +2 /proc/sysvipc/msg | wc -l)"
            /tmp/escape "shmat:$1" "msgctl:$2"
            echo "devshm: $(ls -A /dev/shm | wc -l)"' _ "$shm_id" "$msg_id" 2>&1)
        like "$out" $'shm: 0\nmsg: 0\n' "$who: no SysV shared memory or message queue is visible inside"
        expect "$out" "shmat:$shm_id" "EINVAL|EACCES|EIDRM" "$who: the host's shared memory segment cannot be attached by its id"
        expect "$out" "msgctl:$msg_id" "EINVAL|EACCES|EIDRM" "$who: the host's message queue cannot be reached by its id"
        like "$out" $'devshm: 0(\n|$)' "$who: the host's /dev/shm file is not in the sandbox's /dev/shm"
    done
else
    skip "SysV IPC isolation" "ipcmk could not create a segment on the host"
fi
[ -z "$shm_id" ] || ipcrm -m "$shm_id"
[ -z "$msg_id" ] || ipcrm -q "$msg_id"
rm -f "$shm_file"
shm_id= msg_id= shm_file=

# --- capabilities, uid mapping, set-uid ---------------------------------------------------------
# A harmless set-uid root program on the host's /usr, visible inside through the /usr layer.
usrdir=$(mktemp -d /usr/local/hutch-escape-suid.XXXXXX 2>/dev/null) || usrdir=
if [ -n "$usrdir" ]; then
    chmod 755 "$usrdir"
    cp "$PROBES/ids" "$usrdir/ids-suid"
    chown 0:0 "$usrdir/ids-suid"
    chmod 6755 "$usrdir/ids-suid"
    # control: on the host it does make an unprivileged user root
    host=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$usrdir/ids-suid" 2>&1)
    like "$host" 'ruid=65534 euid=0 ' "control: the set-uid root probe makes nobody euid 0 on the host"
else
    skip "the host's set-uid root program under /usr, run inside" "/usr/local is not writable here"
fi
# Init (pid 1) while the program runs: no capability, no_new_privs, and its own allow-list filter
# (reap, report, exit), under which execve kills it, so the bounding set it keeps is never used.
# Init is exec'd beside the program's own start (src/init/README.md, "What init can do"): the
# program waits (at most 2 s) for init's filter, which init loads after it dropped the rest.
out=$(hrun -- /bin/sh -c 'for i in $(seq 200); do grep -q "^Seccomp:[[:space:]]*2" /proc/1/status && break; sleep 0.01; done
    grep -E "^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs|Seccomp|Uid):" /proc/1/status')
for f in CapInh CapPrm CapEff CapAmb; do
    like "$out" "$f:"$'\t'"0000000000000000" "init: $f is 0"
done
like "$out" 'NoNewPrivs:'$'\t''1' "init: NoNewPrivs is 1"
like "$out" 'Seccomp:'$'\t''2' "init: a seccomp filter is installed"
like "$out" 'Uid:'$'\t''0'$'\t''0' "init: sandbox uid 0 (host: an unprivileged uid of the range)"
# Signals to init from inside: refused by Landlock's signal scoping where the kernel has ABI 6,
# else (Debian 12's 6.1 has ABI 2) dropped by the kernel, because init is pid 1 of its namespace
# and installs no handler; for the default user also by uid. Either way init lives on: the
# payload's exit is reported, not XX, and a stopped init would have run into the timeout.
for who in "${roles[@]}"; do
    out=$(hjson --timeout 20 "$(role_flag "$who")" "$(esc)" -- /bin/sh -c \
        '/tmp/escape kill:1:9 kill:1:15 kill:1:19 kill:1:1; sleep 0.2; echo payload-done')
    is "$(jfield "$out" status)/$(jpy "$out" 'o["stdout"].split("\n")[-2] if o["stdout"] else ""')" \
        OK/payload-done "$who: init survives SIGKILL, SIGTERM, SIGSTOP and SIGHUP from the payload (OK, not XX or TO)"
    so=$(jfield "$out" stdout)
    bad=
    for sig in 9 15 19 1; do
        [[ $(line "$so" "kill:1:$sig") =~ ^[^\ ]+\ (ok|errno=EPERM)( |$) ]] || bad="$bad $sig"
    done
    is "$bad" "" "$who: control: the payload did send the signals (ok, or EPERM where refused)"
done
# control: had a signal reached init, the run would not have been OK: init SIGKILLed from the host
"$HUTCH" run --json --timeout 20 -- /bin/sh -c 'sleep 3; echo payload-done' >"$work/init-kill.json" 2>&1 &
run_pid=$!
init_pid=
for _ in $(seq 100); do
    for p in $(cat $(run_cgroup_dirs "$run_pid" | sed 's|$|/cgroup.procs|') 2>/dev/null); do
        [ "$(tr -d '\0' <"/proc/$p/cmdline" 2>/dev/null)" = hutch-init ] && init_pid=$p
    done
    [ -n "$init_pid" ] && break
    sleep 0.05
done
[ -n "$init_pid" ] && kill -9 "$init_pid"
wait "$run_pid"
out=$(cat "$work/init-kill.json")
if [ -n "$init_pid" ] && [ "$(jfield "$out" status)" != OK ]; then
    ok "control: init SIGKILLed from the host ends the run as $(jfield "$out" status), not OK"
else
    not_ok "control: init SIGKILLed from the host ends the run, not OK"
    diag "init pid '$init_pid'" "$out"
fi

for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" "$(probe ids)" "$(esc)" -- /bin/bash -c '
        grep -E "^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):" /proc/self/status
        echo "uid_map: $(cat /proc/self/uid_map)"
        echo "gid_map: $(cat /proc/self/gid_map)"
        /tmp/ids
        [ -n "$1" ] && echo "suid: $($1/ids-suid)"
        su -c "/tmp/ids" root </dev/null 2>&1 | grep "^ids" | sed "s/^/su: /"
        cp /tmp/ids /tmp/ids-mine && chmod 6755 /tmp/ids-mine && echo "own: $(/tmp/ids-mine)"
        cp /tmp/ids /tmp/ids-cap && /tmp/escape setfcap:/tmp/ids-cap; echo "fcap: $(/tmp/ids-cap)"' _ "$usrdir" 2>&1)
    for f in CapInh CapPrm CapEff CapBnd CapAmb; do
        like "$out" "$f:"$'\t'"0000000000000000" "$who: $f is 0 in /proc/self/status"
    done
    like "$out" 'NoNewPrivs:'$'\t''1' "$who: NoNewPrivs is 1"
    like "$out" 'Seccomp:'$'\t''2' "$who: a seccomp filter is installed"
    want_uid=1000
    [ "$who" = root ] && want_uid=0
    like "$out" "ids ruid=$want_uid euid=$want_uid suid=$want_uid .* capeff=0 nnp=1" "$who: control: the probe runs as uid $want_uid with no capability"
    for m in uid_map gid_map; do
        read -r inside outside count <<<"$(sed -n "s/^$m: //p" <<<"$out")"
        if [ "${inside:-x}" = 0 ] && [ "${outside:-0}" -ge $((0x40000000)) ] && [ "${count:-0}" = 65535 ]; then
            ok "$who: $m maps sandbox 0 to host $outside, not host root"
        else
            not_ok "$who: $m maps sandbox 0 to an unprivileged host range"
            diag "$(grep "^$m" <<<"$out")"
        fi
    done
    if [ -n "$usrdir" ]; then
        like "$(sed -n 's/^suid: //p' <<<"$out")" "^ids ruid=$want_uid euid=$want_uid suid=$want_uid .* capeff=0 nnp=1" \
            "$who: the host's set-uid root program raises nothing inside"
    fi
    like "$(sed -n 's/^own: //p' <<<"$out")" "^ids ruid=$want_uid euid=$want_uid .* capeff=0" "$who: a set-uid file made inside raises nothing"
    is "$(sed -n 's/^su: //p' <<<"$out")" "" "$who: su does not run anything as root"
    expect "$out" "setfcap:/tmp/ids-cap" EPERM "$who: setting file capabilities fails with EPERM"
    like "$(sed -n 's/^fcap: //p' <<<"$out")" "^ids ruid=$want_uid euid=$want_uid .* capeff=0 " "$who: the file it tried to give capabilities raises nothing"
done
# A set-uid file made inside and handed out as an artifact loses its set-id bits on the host.
art=$work/artifacts
hrun "--artifacts=$art" "$(probe ids)" -- /bin/bash -c '
    cp /tmp/ids /output/ids && chmod 6755 /output/ids && mkdir -m 7777 /output/dir && chmod 7777 /output/dir' >/dev/null 2>&1
if [ -f "$art/ids" ]; then
    ok "artifacts: control: the set-uid file made inside is copied out"
else
    not_ok "artifacts: control: the set-uid file made inside is copied out"
fi
is "$(find "$art" -perm /7000 2>/dev/null)" "" "artifacts: nothing arrives on the host set-uid, set-gid or sticky"
is "$(find "$art" -mindepth 1 ! -uid 0 2>/dev/null)" "" "artifacts: everything copied out is owned by the caller (root), not a sandbox uid"

# --- TIOCSTI: hutch run on a terminal ---------------------------------------------------------
# script(1) gives hutch a pty as stdin, stdout and stderr. Had any TIOCSTI reached that terminal,
# the pty would echo the text and the shell's `read` afterwards would get it.
word=hutchinjected$RANDOM
cat >"$work/tty.sh" <<EOF
"\$@" isatty:0 isatty:1 isatty:2 tiocsti:0:${word}a tiocsti_high:0:${word}b tiocsti:1:${word}c tiocsti:2:${word}d tiocsti_tty:${word}e
read -t 1 line
echo "after=[\$line]"
EOF
have_script=yes
command -v script >/dev/null || have_script=
if [ -n "$have_script" ]; then
    # script(1) writes an end-of-file to the terminal when its own stdin ends, and the shell's
    # `read` would then see nothing whatever was injected: its stdin is a pipe that stays open
    # (a sleep of ours, ended by its pid below) instead of /dev/null.
    exec {hold_fd}< <(exec sleep 300)
    hold_pid=$!
    tty_out=$(timeout 60 script -qec "bash $work/tty.sh $HUTCH run $(esc) -- /tmp/escape" /dev/null <&$hold_fd 2>&1 | tr -d '\r')
    expect "$tty_out" isatty:0 ENOTTY "TIOCSTI: hutch's stdin is a terminal, the program's is not"
    expect "$tty_out" isatty:1 ENOTTY "TIOCSTI: the program's stdout is not the terminal"
    expect "$tty_out" isatty:2 ENOTTY "TIOCSTI: the program's stderr is not the terminal"
    expect "$tty_out" "tiocsti:0:${word}a" EPERM "TIOCSTI on stdin fails with EPERM"
    expect "$tty_out" "tiocsti_high:0:${word}b" EPERM "TIOCSTI with high bits set in the command fails with EPERM"
    expect "$tty_out" "tiocsti:1:${word}c" EPERM "TIOCSTI on stdout fails with EPERM"
    expect "$tty_out" "tiocsti:2:${word}d" EPERM "TIOCSTI on stderr fails with EPERM"
    expect "$tty_out" "tiocsti_tty:${word}e" "ENXIO at=open|EPERM" "TIOCSTI: /dev/tty cannot be opened (no controlling terminal)"
    like "$tty_out" 'after=\[\]' "TIOCSTI: the shell reading the terminal afterwards gets nothing"
    if grep -qE "^$word[a-e]\$" <<<"$tty_out"; then
        not_ok "TIOCSTI: nothing was echoed by the terminal"
        diag "$tty_out"
    else
        ok "TIOCSTI: nothing was echoed by the terminal"
    fi
    # control: the probe run directly on the pty does inject, and both signs show
    ctl_out=$(timeout 60 script -qec "bash $work/tty.sh $PROBES/escape" /dev/null <&$hold_fd 2>&1 | tr -d '\r')
    kill "$hold_pid" 2>/dev/null
    exec {hold_fd}<&-
    like "$ctl_out" "after=\\[${word}a\\]" "TIOCSTI control: on the host the same probe injects into the terminal"
    like "$ctl_out" $'\n'"${word}a"$'\n' "TIOCSTI control: and the terminal echoes it"
else
    skip "TIOCSTI: hutch run on a terminal" "script(1) is not installed"
fi

# --- fds inherited from the caller ------------------------------------------------------------
echo secret-fd >"$work/fdsecret" && chmod 600 "$work/fdsecret"
exec 7</ 8<"$work" 9<"$work/fdsecret"
for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" "$(esc)" -- /bin/bash -c '
        /tmp/escape fds
        # one cat for all 506 paths: one exec each ran past the 30 s CPU limit in the TCG guest
        paths=(); for n in $(seq 3 255); do paths+=(/proc/self/fd/$n/etc/hostname /proc/self/fd/$n); done
        cat "${paths[@]}" 2>/dev/null
        echo "ls: $(ls /proc/self/fd/ | tr "\n" " ")"' 2>&1)
    is "$(line "$out" fds)" "fds ok none" "$who: no fd above 2 is open in the program (the caller had / , a dir and a file on 7, 8, 9)"
    is "$(grep -c secret-fd <<<"$out")" 0 "$who: the caller's open file is not readable through /proc/self/fd"
    like "$out" 'ls: 0 1 2 3 $' "$who: /proc/self/fd shows only stdio (and ls's own directory fd)"
done
# stdin redirected from a host file is handed over as is (read-only): it must not turn writable
# by reopening it through /proc/self/fd/0 or /dev/stdin, even when its mode would allow that
echo original >"$work/stdin.txt" && chmod 666 "$work/stdin.txt"
stdin_before=$(stat -c '%s %Y %a' "$work/stdin.txt")
for who in "${roles[@]}"; do
    out=$(hrun "$(role_flag "$who")" -- /bin/bash -c '
        echo "read: $(cat <&0)"
        for p in /proc/self/fd/0 /dev/stdin /dev/fd/0; do
            if (echo evil >>"$p") 2>/dev/null; then echo "appended via $p"; fi
            if (exec 5<>"$p") 2>/dev/null; then echo "reopened read-write via $p"; fi
        done
        (echo evil >&0) 2>/dev/null && echo "wrote to fd 0"
        true' <"$work/stdin.txt" 2>&1)
    like "$out" 'read: original' "$who: control: the program reads its stdin, a host file"
    is "$(grep -E '^(appended|reopened|wrote)' <<<"$out")" "" "$who: stdin from a 0666 host file cannot be written or reopened read-write"
done
is "$(cat "$work/stdin.txt"; stat -c '%s %Y %a' "$work/stdin.txt")" "original"$'\n'"$stdin_before" "the host file given as stdin is unchanged"

# the host's view: no process of a running sandbox holds any of the caller's fds. The sandbox
# sleeps until the test has looked (then hutch is stopped with SIGTERM): a fixed 2 s sleep was
# over before a TCG guest's polling found both of its processes.
"$HUTCH" run --timeout 120 -- /bin/sleep 120 >/dev/null 2>&1 &
run_pid=$!
my_pidns=$(readlink /proc/self/ns/pid)
found=
for _ in $(seq 600); do
    found=
    for p in $(cat /proc/"$run_pid"/task/*/children 2>/dev/null); do
        [ "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" != "$my_pidns" ] || continue
        found="$found $p $(cat /proc/"$p"/task/*/children 2>/dev/null | tr '\n' ' ')"
    done
    [[ $found == *" "[0-9]*" "[0-9]* ]] && break # init and the payload
    sleep 0.05
done
held=
for p in $found; do
    for fd in /proc/"$p"/fd/*; do
        t=$(readlink "$fd" 2>/dev/null) || continue
        case $t in / | "$work" | "$work"/*) held="$held $p:$fd->$t" ;; esac
    done
done
if [[ $found == *" "[0-9]*" "[0-9]* ]]; then
    is "$held" "" "host view: no process of the sandbox (init and payload:$found) holds the caller's fds"
else
    not_ok "host view: found the sandbox's processes (init and payload)"
    diag "found: '$found'"
fi
kill -TERM "$run_pid"
wait "$run_pid"
exec 7<&- 8<&- 9<&-
# control: the probe run on the host with the same fds open finds them, and the host behind them
host=$(exec 7</ 8<"$work" 9<"$work/fdsecret"; "$PROBES/escape" fds 2>&1)
like "$host" 'fd=7 -> / \.:\[' "control: the probe on the host finds fd 7 (/) and lists the host's root through it"
like "$host" "fd=9 -> $work/fdsecret" "control: the probe on the host finds fd 9 (the secret file)"

done_testing
