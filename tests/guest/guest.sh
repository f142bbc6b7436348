#!/usr/bin/env bash
# The test guest: Debian's own 6.1 kernel under qemu (TCG), pure cgroup v2, the host's / shared
# read-only over virtio-9p, a fresh ext4 scratch disk on /tmp. See tests/guest/README.md.
#
#   guest.sh check                    one line: why the guest cannot run here (exit 1), or nothing
#   guest.sh build                    the initramfs, cached in build/guest/ (rebuilt when inputs change)
#   guest.sh run [-t SECS] -- CMD...  boots, runs CMD in the repository, prints its output, exits
#                                     with its status (125: the guest failed, 124: time limit)
#   guest.sh shell                    boots to an interactive bash on this terminal
#
# GUEST_KERNEL=/boot/vmlinuz-X picks the kernel (default: the newest 6.1 one installed);
# GUEST_MEMORY (MiB, default 2048) and GUEST_CPUS (default 2) size the guest.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GUEST_DIR=$ROOT/build/guest
QEMU=qemu-system-x86_64
BUSYBOX=/bin/busybox
# The modules the initramfs loads to reach the host's files; the rest come from the host's
# /lib/modules once it is mounted.
INITRAMFS_MODULES=(virtio_pci 9pnet_virtio 9p)

die() { echo "guest: $*" >&2; exit 125; }

# The newest installed 6.1 kernel whose modules are installed too.
find_kernel() {
    if [ -n "${GUEST_KERNEL:-}" ]; then
        echo "$GUEST_KERNEL"
        return
    fi
    local k
    for k in $(ls -v /boot/vmlinuz-6.1.* 2>/dev/null | tac); do
        [ -d "/lib/modules/${k#/boot/vmlinuz-}" ] && { echo "$k"; return; }
    done
}

# check: nothing when the guest can run, else one line saying what is missing and how to get it.
check() {
    local missing=()
    command -v "$QEMU" >/dev/null || missing+=("$QEMU (qemu-system-x86)")
    [ -n "$(find_kernel)" ] || missing+=("a 6.1 kernel in /boot with its modules (linux-image-amd64)")
    [ -x "$BUSYBOX" ] && "$BUSYBOX" --list 2>/dev/null | grep -qx switch_root ||
        missing+=("busybox (busybox-static)")
    command -v cpio >/dev/null || missing+=("cpio")
    command -v mkfs.ext4 >/dev/null || missing+=("mkfs.ext4 (e2fsprogs)")
    [ "$(id -u)" -eq 0 ] || missing+=("root")
    [ "${#missing[@]}" -eq 0 ] && return 0
    local IFS=,
    echo "guest tests skipped: no ${missing[*]}; scripts/install-deps.sh installs them"
    return 1
}

# modules_in_order KVER NAME...: the .ko paths (relative to /lib/modules/KVER) of NAME and of
# everything it depends on, each after its dependencies, each once.
modules_in_order() {
    local kver=$1; shift
    local dep=/lib/modules/$kver/modules.dep
    declare -A seen=()
    visit() {
        local path=$1 d
        [ -n "${seen[$path]:-}" ] && return
        seen[$path]=1
        for d in $(sed -n "s|^$path: *||p" "$dep"); do visit "$d"; done
        echo "$path"
    }
    local name path
    for name in "$@"; do
        path=$(grep -E "^(.*/)?${name}\.ko(\.[a-z]+)?:" "$dep" | head -n 1 | cut -d: -f1)
        [ -n "$path" ] || die "module $name is not in $dep"
        visit "$path"
    done
}

# build: the initramfs (busybox, initramfs-init, the 9p modules), cached under its inputs' hash.
build() {
    local kernel kver
    kernel=$(find_kernel)
    [ -n "$kernel" ] || die "no 6.1 kernel with its modules installed (apt-get install linux-image-amd64)"
    kver=${kernel#/boot/vmlinuz-}
    local mods
    mods=$(modules_in_order "$kver" "${INITRAMFS_MODULES[@]}") || exit 125
    local key
    key=$( {
        echo "$kernel $kver"
        sha256sum "$BUSYBOX" "$ROOT/tests/guest/initramfs-init"
        for m in $mods; do sha256sum "/lib/modules/$kver/$m"; done
    } | sha256sum | cut -d' ' -f1)
    mkdir -p "$GUEST_DIR"
    if [ -f "$GUEST_DIR/initramfs.img" ] && [ "$(cat "$GUEST_DIR/initramfs.key" 2>/dev/null)" = "$key" ]; then
        echo "$kernel" >"$GUEST_DIR/kernel"
        return 0
    fi
    local tree
    tree=$(mktemp -d "$GUEST_DIR/initramfs.XXXXXX") || die "mktemp"
    # shellcheck disable=SC2064 # expand now: tree is local
    trap "rm -rf '$tree'" RETURN
    mkdir -p "$tree/bin" "$tree/modules"
    cp "$BUSYBOX" "$tree/bin/busybox"
    install -m 755 "$ROOT/tests/guest/initramfs-init" "$tree/init"
    for m in $mods; do
        cp "/lib/modules/$kver/$m" "$tree/modules/"
        basename "$m" >>"$tree/modules.load"
    done
    (cd "$tree" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$GUEST_DIR/initramfs.img.tmp" ||
        die "cpio"
    mv "$GUEST_DIR/initramfs.img.tmp" "$GUEST_DIR/initramfs.img"
    echo "$key" >"$GUEST_DIR/initramfs.key"
    echo "$kernel" >"$GUEST_DIR/kernel"
}

# Run directories of guests whose guest.sh is gone (killed with SIGKILL): removed before a boot.
reap_stale_runs() {
    local d pid
    for d in "$GUEST_DIR"/run.*; do
        [ -d "$d" ] || continue
        pid=$(cat "$d/owner" 2>/dev/null)
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && continue
        rm -rf "$d"
    done
}

qemu_pid= run_dir=
cleanup() {
    # qemu is ours: the time-limit wrapper we started; it passes the TERM on and waits for qemu.
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill -TERM "$qemu_pid" 2>/dev/null
        wait "$qemu_pid" 2>/dev/null
    fi
    [ -n "$run_dir" ] && [ -z "${GUEST_KEEP:-}" ] && rm -rf "$run_dir"
    run_dir=
}

# boot MODE LIMIT [CMD...]: MODE is "cmd" or "shell".
boot() {
    local mode=$1 limit=$2; shift 2
    check >&2 || exit 125
    build || exit 125
    reap_stale_runs
    run_dir=$(mktemp -d "$GUEST_DIR/run.XXXXXX") || die "mktemp"
    echo $$ >"$run_dir/owner"
    trap cleanup EXIT
    trap 'cleanup; exit 130' INT
    trap 'cleanup; exit 143' TERM
    # The scratch disk: sparse, made fresh for every boot, gone with the run directory.
    truncate -s 4G "$run_dir/scratch.img"
    mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$run_dir/scratch.img" ||
        die "mkfs.ext4"
    local append="console=ttyS0 quiet loglevel=4 panic=-1 hutch.repo=$ROOT"
    local io=()
    if [ "$mode" = shell ]; then
        append+=" hutch.shell=1"
        [ -n "${TERM:-}" ] && append+=" TERM=$TERM"
        io=(-chardev stdio,id=out,signal=off)
    else
        append+=" hutch.cmd=$(printf '%s\0' "$@" | base64 -w0)"
        io=(-chardev stdio,id=out)
    fi
    [ "${#append}" -lt 2000 ] || die "command too long for the kernel command line"
    local args=(
        -accel tcg -cpu max -smp "${GUEST_CPUS:-2}" -m "${GUEST_MEMORY:-2048}"
        -nodefaults -no-user-config -display none -monitor none -no-reboot
        -kernel "$(cat "$GUEST_DIR/kernel")" -initrd "$GUEST_DIR/initramfs.img" -append "$append"
        -chardev "file,id=console,path=$run_dir/console.log" -serial chardev:console
        "${io[@]}" -serial chardev:out
        -device isa-debug-exit,iobase=0xf4,iosize=1
        -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
        -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
        -drive "file=$run_dir/scratch.img,format=raw,if=virtio,cache=unsafe,discard=unmap"
    )
    # The hard time limit, and qemu dies with us even if we are SIGKILLed (--pdeathsig, twice:
    # for timeout when we die, for qemu when timeout dies).
    local rc
    if [ "$mode" = shell ]; then
        setpriv --pdeathsig KILL timeout -k 5 "$limit" setpriv --pdeathsig KILL "$QEMU" "${args[@]}" &
        qemu_pid=$!
        wait "$qemu_pid"
        rc=$?
    else
        setpriv --pdeathsig KILL timeout -k 5 "$limit" setpriv --pdeathsig KILL "$QEMU" "${args[@]}" </dev/null &
        qemu_pid=$!
        wait "$qemu_pid"
        rc=$?
    fi
    qemu_pid=
    # isa-debug-exit: qemu exits with (status << 1) | 1. Anything else: the guest never reported.
    local status
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "guest: time limit of ${limit}s reached; the guest's console ended with:" >&2
        tail -n 20 "$run_dir/console.log" | sed 's/^/    /' >&2
        status=124
    elif [ $((rc & 1)) -eq 1 ]; then
        status=$((rc >> 1))
        [ "$status" -eq 125 ] && tail -n 20 "$run_dir/console.log" | sed 's/^/    /' >&2
    else
        echo "guest: qemu exited with $rc and no status from the guest; its console ended with:" >&2
        tail -n 20 "$run_dir/console.log" | sed 's/^/    /' >&2
        status=125
    fi
    cleanup
    return "$status"
}

case ${1:-} in
check) check ;;
build) check >&2 || exit 125; build ;;
run)
    shift
    limit=600
    while [ $# -gt 0 ]; do
        case $1 in
        -t) limit=$2; shift 2 ;;
        --) shift; break ;;
        *) break ;;
        esac
    done
    [ $# -gt 0 ] || die "run: no command"
    boot cmd "$limit" "$@"
    ;;
shell) boot shell "${GUEST_SHELL_LIMIT:-3600}" ;;
*)
    sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
