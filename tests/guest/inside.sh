# pid 1 of the test guest, after the initramfs switched into the host's / (read-only over 9p).
# Makes the guest look like a stock Debian 12 host as far as hutch can tell: writable /tmp on
# the scratch disk (ext4), /run and /root on tmpfs, pure cgroup v2 at /sys/fs/cgroup with the
# controllers delegated as systemd does, and every process out of the root cgroup. Then runs the
# command the host passed (hutch.cmd=, NUL-separated argv in base64) with its output on ttyS1,
# and hands its exit status to the host through qemu's isa-debug-exit port.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=${TERM:-linux}
console=/dev/ttyS0 out=/dev/ttyS1

say() { echo "guest: $*" >"$console"; }

# The status reaches the host as qemu's exit code, (status << 1) | 1; status is 0..127.
report() {
    local status=$1
    [ "$status" -le 127 ] || status=127
    say "exit status $status"
    sync
    printf "\\x$(printf %02x "$status")" | dd of=/dev/port bs=1 seek=$((0xf4)) count=1 status=none
    echo o >/proc/sysrq-trigger # only if the port is missing: the host then sees "no status"
    sleep 10
}

# die MESSAGE: the guest could not be set up; 125 tells the host it was the fixture.
die() {
    say "setup failed: $*"
    echo "guest: setup failed: $*" >"$out"
    report 125
}

repo= cmd_b64= shell=
for arg in $(</proc/cmdline); do
    case $arg in
    hutch.repo=*) repo=${arg#hutch.repo=} ;;
    hutch.cmd=*) cmd_b64=${arg#hutch.cmd=} ;;
    hutch.shell=1) shell=1 ;;
    esac
done

mount -t tmpfs -o mode=755,size=256m tmpfs /run || die "mount /run"
mount -t tmpfs -o mode=700,size=64m tmpfs /root || die "mount /root"
mount -t tmpfs -o mode=1777,size=256m tmpfs /var/tmp || die "mount /var/tmp"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts /dev/pts || die "mount /dev/pts"
ln -sf pts/ptmx /dev/ptmx
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm || die "mount /dev/shm"
# modprobe finds the host's /lib/modules, which holds this kernel's (the package installed it).
# loop: the disk layers of persistent sandboxes (src/jail/disk_layer.c)
modprobe -a virtio_blk ext4 overlay loop || die "modprobe virtio_blk ext4 overlay loop"
for _ in $(seq 50); do [ -b /dev/vda ] && break; sleep 0.1; done
# A repository under /tmp (a clone made there) would be hidden by the scratch disk: it stays
# reachable through a bind of the host's /tmp, made first.
if [[ $repo == /tmp/* ]]; then
    mkdir -p /var/tmp/hutch-host-tmp && mount --bind /tmp /var/tmp/hutch-host-tmp ||
        die "bind the host's /tmp, which holds the repository"
    repo=/var/tmp/hutch-host-tmp/${repo#/tmp/}
fi
mount -t ext4 -o noatime /dev/vda /tmp || die "mount the scratch disk on /tmp"
chmod 1777 /tmp
hostname hutch-guest
ip link set lo up || die "loopback up"

# cgroup2 only, mounted as systemd mounts it, and delegated the way systemd 252 leaves a Debian
# 12 host: the root hands cpuset, cpu, io, memory and pids down, pid 1 sits in init.scope, and
# whatever runs is in a leaf under system.slice, never in the root.
mount -t cgroup2 -o nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot cgroup2 \
    /sys/fs/cgroup || die "mount cgroup2"
cg=/sys/fs/cgroup
echo "+cpuset +cpu +io +memory +pids" >$cg/cgroup.subtree_control || die "root subtree_control"
mkdir -p $cg/init.scope $cg/system.slice/hutch-test.service
echo $$ >$cg/init.scope/cgroup.procs || die "move pid 1 to init.scope"
echo "+cpu +io +memory +pids" >$cg/system.slice/cgroup.subtree_control ||
    die "system.slice subtree_control"

# What run-all.sh gives the tests on the host: a private state and run directory, here on the
# scratch disk. World-traversable, since the sandboxes' uids must reach the template layer.
mkdir -p /tmp/hutch-guest && chmod 755 /tmp/hutch-guest
export HUTCH_STATE_DIR=/tmp/hutch-guest/state HUTCH_RUN_DIR=/tmp/hutch-guest/run
# /usr/local writable by root, as on a host: the escape tests plant host files there (a set-uid
# root program, secrets, a 0777 directory) to show that the sandbox's read-only /usr holds them
# off. An overlay of the host's /usr/local with its upper layer on the scratch disk; sandboxes
# see it through their recursive, read-only bind of /usr.
mkdir -p /tmp/hutch-guest/usr-local/upper /tmp/hutch-guest/usr-local/work
mount -t overlay -o lowerdir=/usr/local,upperdir=/tmp/hutch-guest/usr-local/upper,workdir=/tmp/hutch-guest/usr-local/work \
    overlay /usr/local || die "mount a writable overlay on /usr/local"
say "ready: $(uname -r), cgroup2 controllers: $(<$cg/cgroup.controllers)"

cd "$repo" || die "cd $repo"
if [ -n "$shell" ]; then
    (
        echo $BASHPID >$cg/system.slice/hutch-test.service/cgroup.procs
        echo "hutch guest: $(uname -r), repository $repo (read-only), scratch on /tmp;" \
            "exit the shell to power off" >"$out"
        exec setsid -c bash -i <"$out" >"$out" 2>&1
    )
    report $?
fi
cmd=()
[ -n "$cmd_b64" ] && mapfile -d '' -t cmd < <(base64 -d <<<"$cmd_b64")
[ "${#cmd[@]}" -gt 0 ] || die "no command (hutch.cmd=)"
stty -F "$out" raw -echo # no \r\n: the host reads the bytes the command wrote
(
    echo $BASHPID >$cg/system.slice/hutch-test.service/cgroup.procs || exit 125
    exec "${cmd[@]}"
) </dev/null >"$out" 2>&1
report $?
