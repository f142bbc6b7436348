#!/usr/bin/env bash
# --writable-root: a persistent root filesystem that sandbox root can change, /usr and /etc
# included. dpkg -i, pip install and npm install -g work inside; the host, the template and a
# second sandbox see none of it; the layer is capped (ENOSPC inside, reported outside), survives
# the run that made it, is used by one sandbox at a time, refuses links planted where its mounts
# go, and leaves nothing behind once removed.
. "$(dirname "$0")/lib.sh"
use_scratch writable-root
state=$HUTCH_STATE_DIR
layers=$state/sandboxes

for tool in dpkg-deb npm; do
    if ! command -v $tool >/dev/null; then
        skip "writable root" "$tool is not installed (scripts/install-deps.sh)"
        done_testing
        exit 0
    fi
done
if ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
    skip "writable root" "Debian's python3-pip is not installed (scripts/install-deps.sh)"
    done_testing
    exit 0
fi

# --- the packages, built here, installed offline ------------------------------------------------
pk=$scratch/pkgs
mkdir -p "$pk" && chmod 755 "$scratch" "$pk"
# A plain package: root-owned files and a conffile.
mkdir -p "$pk/deb/DEBIAN" "$pk/deb/usr/bin" "$pk/deb/etc"
printf 'Package: hutch-canary\nVersion: 1.0\nArchitecture: all\nMaintainer: hutch <t@hutch.invalid>\nDescription: canary\n' >"$pk/deb/DEBIAN/control"
printf '#!/bin/sh\necho canary-deb\n' >"$pk/deb/usr/bin/hutch-canary"
chmod 755 "$pk/deb/usr/bin/hutch-canary"
echo conf=1 >"$pk/deb/etc/hutch-canary.conf"
echo /etc/hutch-canary.conf >"$pk/deb/DEBIAN/conffiles"
dpkg-deb --root-owner-group --build "$pk/deb" "$pk/canary.deb" >/dev/null
# One with files of other users and groups and a set-gid file: what needs the capabilities.
mkdir -p "$pk/deb2/DEBIAN" "$pk/deb2/usr/bin" "$pk/deb2/var/lib/hutch-canary2"
printf 'Package: hutch-canary2\nVersion: 1.0\nArchitecture: all\nMaintainer: hutch <t@hutch.invalid>\nDescription: canary with owners\n' >"$pk/deb2/DEBIAN/control"
printf '#!/bin/sh\necho canary2\n' >"$pk/deb2/usr/bin/hutch-canary2"
chown root:staff "$pk/deb2/usr/bin/hutch-canary2"
chmod 2755 "$pk/deb2/usr/bin/hutch-canary2"
echo data >"$pk/deb2/var/lib/hutch-canary2/state"
chown -R daemon:daemon "$pk/deb2/var/lib/hutch-canary2"
chmod 700 "$pk/deb2/var/lib/hutch-canary2"
find "$pk/deb2" -type d -exec chmod g-s {} +
dpkg-deb --build "$pk/deb2" "$pk/canary2.deb" >/dev/null
# A wheel, made by hand: no setuptools, no index.
python3 - "$pk" <<'EOF'
import base64, hashlib, sys, zipfile
files = {
    "hutch_canary/__init__.py": "def main():\n    print('canary-pip')\n",
    "hutch_canary-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hutch-canary\nVersion: 1.0\n",
    "hutch_canary-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hutch-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "hutch_canary-1.0.dist-info/entry_points.txt": "[console_scripts]\nhutch-canary-py = hutch_canary:main\n",
}
record = []
with zipfile.ZipFile(sys.argv[1] + "/hutch_canary-1.0-py3-none-any.whl", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(data)}")
    record.append("hutch_canary-1.0.dist-info/RECORD,,")
    z.writestr("hutch_canary-1.0.dist-info/RECORD", "\n".join(record) + "\n")
EOF
mkdir -p "$pk/npm"
printf '{"name":"hutch-canary","version":"1.0.0","bin":{"hutch-canary-js":"index.js"}}\n' >"$pk/npm/package.json"
printf '#!/usr/bin/env node\nconsole.log("canary-npm")\n' >"$pk/npm/index.js"
(cd "$pk/npm" && npm pack --silent >/dev/null 2>&1)
wheel=hutch_canary-1.0-py3-none-any.whl
tgz=hutch-canary-1.0.0.tgz
if [ -f "$pk/canary.deb" ] && [ -f "$pk/canary2.deb" ] && [ -f "$pk/$wheel" ] && [ -f "$pk/npm/$tgz" ]; then
    ok "test packages built (.deb x2, wheel, npm tarball)"
else
    not_ok "test packages built (.deb x2, wheel, npm tarball)"
fi
files=(--file="$pk/canary.deb:/tmp/canary.deb" --file="$pk/canary2.deb:/tmp/canary2.deb"
    --file="$pk/$wheel:/tmp/$wheel" --file="$pk/npm/$tgz:/tmp/$tgz")

# wrun LAYER ARGS...: a writable-root run on layer LAYER.
wrun() { local l=$1; shift; "$HUTCH" run --writable-root "$l" "$@"; }
# no_loop LAYER: no loop device is bound to LAYER's image.
no_loop() { [ -z "$(losetup -j "$layers/$1/disk.img" 2>/dev/null)" ]; }

# The host's files that the sandbox changes, before.
canaries=(/usr/bin/ls /var/lib/dpkg/status /usr/lib/python3/dist-packages/pip/__init__.py)
sums_before=$(sha256sum "${canaries[@]}")

# --- install all three, as root, in layer A -----------------------------------------------------
install='
set -e
dpkg -i /tmp/canary.deb >/dev/null
dpkg -i /tmp/canary2.deb >/dev/null
python3 -m pip install -q --no-index --break-system-packages --disable-pip-version-check /tmp/'$wheel' 2>/dev/null
npm install -g --offline --no-audit --no-fund --no-update-notifier /tmp/'$tgz' >/dev/null 2>&1
printf x >>/usr/bin/ls
echo changed >/etc/hostname
echo "deb=$(hutch-canary) $(hutch-canary2)"
echo "pip=$(hutch-canary-py) $(python3 -c "import hutch_canary, os; print(os.path.dirname(hutch_canary.__file__))")"
echo "npm=$(hutch-canary-js)"
echo "setgid=$(stat -c %A:%U:%G /usr/bin/hutch-canary2)"
echo "daemon=$(stat -c %U:%G /var/lib/hutch-canary2/state)"
echo "lsowner=$(stat -c %u:%g /usr/bin/ls)"
echo "caps=$(grep CapEff /proc/self/status | cut -f2)"
'
json=$(wrun wrA --disk 256M --root --timeout 120 "${files[@]}" --json -- sh -c "$install")
if [ "$(jfield "$json" status)" = OK ]; then ok "dpkg -i (two packages), pip install and npm install -g as root in a writable root"
else not_ok "dpkg -i (two packages), pip install and npm install -g as root in a writable root"; diag "$json"; fi
out=$(jfield "$json" stdout)
like "$out" "deb=canary-deb canary2" "the .deb programs run"
like "$out" "pip=canary-pip /usr/local/lib/python3[.0-9]*/dist-packages/hutch_canary" "the wheel is importable from /usr/local, its script runs"
like "$out" "npm=canary-npm" "the npm package's bin runs"
like "$out" "setgid=-rwxr-sr-x:root:staff" "dpkg kept the set-gid bit and group staff (CAP_FSETID, CAP_CHOWN)"
like "$out" "daemon=daemon:daemon" "dpkg gave a file to user daemon inside a 0700 directory (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER)"
like "$out" "lsowner=0:0" "the host's /usr/bin/ls shows owner 0 inside (idmapped lower)"
like "$out" "caps=000000000000001b" "root keeps exactly CHOWN, DAC_OVERRIDE, FOWNER, FSETID"
check "no loop device left bound after the run" no_loop wrA

# --- the host and the template saw nothing -------------------------------------------------------
is "$(sha256sum "${canaries[@]}")" "$sums_before" "host files (/usr/bin/ls, dpkg status, pip) unchanged by sha256"
check_fails "no /usr/bin/hutch-canary on the host" test -e /usr/bin/hutch-canary
check_fails "no /usr/lib/node_modules/hutch-canary on the host" test -e /usr/lib/node_modules/hutch-canary
check_fails "no hutch_canary in the host's /usr/local" sh -c 'ls -d /usr/local/lib/python3*/dist-packages/hutch_canary 2>/dev/null | grep -q .'
check_fails "the host's dpkg does not know hutch-canary" dpkg -s hutch-canary
template_etc=$(ls -d "$state"/templates/base-v*/rootfs/etc | head -1)
check "the template's /etc/hostname is unchanged" grep -qx hutch "$template_etc/hostname"

# --- a second sandbox sees none of it ------------------------------------------------------------
probe_b='
command -v hutch-canary hutch-canary2 hutch-canary-py hutch-canary-js || true
dpkg -s hutch-canary >/dev/null 2>&1 && echo dpkg-knows
python3 -c "import hutch_canary" 2>/dev/null && echo pip-visible
ls /usr/lib/node_modules | grep -x hutch-canary
cat /etc/hostname
sha256sum /usr/bin/ls | cut -d" " -f1
'
out=$(wrun wrB --disk 64M --root -- sh -c "$probe_b")
is "$out" "hutch
$(sha256sum /usr/bin/ls | cut -d' ' -f1)" "a second writable root sees no package, the host's /usr/bin/ls and the template's /etc/hostname"
out=$(hrun --root -- sh -c "$probe_b")
is "$out" "hutch
$(sha256sum /usr/bin/ls | cut -d' ' -f1)" "a one-shot sandbox sees none of it either"

# --- the layer outlives the run ------------------------------------------------------------------
again='
dpkg -s hutch-canary | grep ^Status
hutch-canary; hutch-canary-py; hutch-canary-js
cat /etc/hostname /etc/hutch-canary.conf
'
out=$(wrun wrA --root -- sh -c "$again")
is "$out" "Status: install ok installed
canary-deb
canary-pip
canary-npm
changed
conf=1" "a new sandbox on the same layer: the packages and the changes to /usr and /etc are there"
out=$(wrun wrA -- sh -c 'hutch-canary-js; id -u; grep CapEff /proc/self/status | cut -f2; touch /usr/bin/x 2>&1; touch /etc/x 2>&1')
like "$out" "canary-npm" "the sandbox user runs what root installed"
like "$out" "1000.0000000000000000" "the sandbox user has uid 1000 and no capabilities"
like "$out" "touch: cannot touch '/usr/bin/x': Permission denied.*touch: cannot touch '/etc/x': Permission denied" \
    "the sandbox user cannot write /usr or /etc (ordinary permissions)"

# --- without --writable-root nothing changed -----------------------------------------------------
out=$(hrun --root -- sh -c 'grep CapEff /proc/self/status | cut -f2; touch /usr/bin/x 2>&1; touch /etc/x 2>&1')
like "$out" "^0000000000000000" "without --writable-root, root has no capabilities"
like "$out" "Read-only file system" "and /usr is read-only"
like "$out" "/etc/x': Permission denied" "and the template's /etc cannot be written"

# --- one sandbox at a time -----------------------------------------------------------------------
# hold_layer NAME: a hutch run in the background that holds the layer NAME (its pid in $holder),
# once the layer is in use.
hold_layer() {
    "$HUTCH" run --writable-root "$1" --timeout 30 -- sleep 30 >/dev/null 2>&1 &
    holder=$!
    bg_pids+=("$holder")
    for _ in $(seq 100); do
        "$HUTCH" layer info "$1" >/dev/null 2>&1 || break
        sleep 0.05
    done
}
hold_layer wrA
json=$(wrun wrA --json -- true)
is "$(jfield "$json" status)" "XX" "a second sandbox on a layer in use is refused (XX)"
like "$(jfield "$json" message)" "in use by another sandbox" "and says the layer is in use"
out=$("$HUTCH" layer rm wrA 2>&1)
like "$out" "in use" "hutch layer rm refuses a layer in use"
kill "$holder"
wait "$holder" 2>/dev/null
check "once its sandbox is gone, the layer is free again" "$HUTCH" layer info wrA
check "and no loop device is left" no_loop wrA
# The same when the supervisor is killed outright: the sandbox dies with it, and the layer's
# mount lived only in the sandbox's namespace.
hold_layer wrA
kill -9 "$holder"
wait "$holder" 2>/dev/null
for _ in $(seq 100); do
    "$HUTCH" layer info wrA >/dev/null 2>&1 && break
    sleep 0.05
done
check "after kill -9 of hutch run, the layer is free again" "$HUTCH" layer info wrA
check "and no loop device is left" no_loop wrA

# --- a layer that is not a filesystem ------------------------------------------------------------
mkdir -m 700 "$layers/wrE"
head -c $((16 << 20)) /dev/zero >"$layers/wrE/disk.img"
json=$(wrun wrE --json -- true)
is "$(jfield "$json" status)" "XX" "a layer that is no ext4 filesystem is refused (XX)"
like "$(jfield "$json" message)" "disk layer $layers/wrE/disk.img: mount ext4 from /dev/loop[0-9]+" \
    "and the message names the image"
check "and no loop device is left" no_loop wrE

# --- the cap -------------------------------------------------------------------------------------
json=$(wrun wrC --disk 32M --root --json -- sh -c 'dd if=/dev/zero of=/usr/big bs=1M count=100 2>&1; echo rc=$?')
so=$(jfield "$json" stdout)
like "$so" "No space left on device" "writing past --disk 32M fails with ENOSPC inside"
like "$so" "rc=1" "dd fails"
like "$(jfield "$json" message)" "the writable root is full" "the run reports a full layer"
is "$(jpy "$json" 'o["disk"]["full"]')" "true" "the JSON says disk.full"
size=$(stat -c %s "$layers/wrC/disk.img")
used=$(($(stat -c %b "$layers/wrC/disk.img") * 512))
if [ "$size" -eq $((32 << 20)) ] && [ "$used" -le "$size" ]; then
    ok "the image is 32 MiB and takes at most that on the host ($used bytes)"
else not_ok "the image is 32 MiB and takes at most that on the host (size $size, used $used)"; fi
json=$(wrun wrC --root --json -- sh -c 'rm /usr/big && echo removed')
if [ "$(jfield "$json" stdout)" = removed ] && [ "$(jpy "$json" 'o["disk"]["full"]')" = false ] &&
    [ "$(($(stat -c %b "$layers/wrC/disk.img") * 512))" -lt $((8 << 20)) ]; then
    ok "after rm the layer has room again, and the space goes back to the host (discard)"
else not_ok "after rm the layer has room again, and the space goes back to the host (discard)"; diag "$json"; fi

# --- links planted where the next start mounts ---------------------------------------------------
out=$(wrun wrD --disk 32M --root -- python3 -c '
import os
try:
    os.rename("/dev", "/dev.old")
except OSError as e:
    print(e.strerror)' 2>&1)
is "$out" "Invalid cross-device link" "root cannot move /dev away (overlayfs refuses to rename a lower directory)"
# overlayfs's own metadata lives in user.overlay.* xattrs of the upper layer: one set from inside
# is stored escaped (6.7+) or refused, never taken as overlayfs's own at the next mount, where an
# "opaque" /etc would hide the template's files.
out=$(wrun wrD --root -- python3 -c '
import os
try:
    os.setxattr("/etc", "user.overlay.opaque", b"y"); print("set")
except OSError as e:
    print(e.strerror)' 2>&1)
like "$out" "^(set|Operation not permitted|Operation not supported)$" "root may set user.overlay.opaque on /etc from inside ($out)"
out=$(wrun wrD -- sh -c 'test -s /etc/passwd && echo still-there')
is "$out" "still-there" "the next start does not take it as overlayfs's own: /etc keeps the template's files"
# What an earlier life could leave if it could (another kernel, another overlay option): /dev a
# link to "/", made here on the host in the layer itself.
plant=$scratch/plant
mkdir -p "$plant"
if dev=$(losetup -f --show "$layers/wrD/disk.img") && mount -o nosuid,nodev,noexec "$dev" "$plant"; then
    rm -rf "$plant/root/upper/dev" && ln -s / "$plant/root/upper/dev"
    umount "$plant"
    losetup -d "$dev"
    json=$(wrun wrD --root --json -- true)
    is "$(jfield "$json" status)" "XX" "a layer whose /dev is a link to / is refused at the next start (XX)"
    like "$(jfield "$json" message)" "/dev must be a directory, not a link" "and the run says why"
else
    not_ok "plant a link in the layer on the host (losetup, mount)"
    [ -n "${dev:-}" ] && losetup -d "$dev"
fi
check "no loop device is left after the refused start" no_loop wrD

# --- removal leaves nothing ----------------------------------------------------------------------
for l in wrA wrB wrC wrD wrE; do
    "$HUTCH" layer rm "$l" || not_ok "hutch layer rm $l"
done
check_fails "hutch layer rm removed every layer" sh -c "ls -A '$layers' | grep ."
check_fails "no loop device is bound to a layer of this test" sh -c "grep -l '$layers' /sys/block/loop*/loop/backing_file 2>/dev/null | grep ."
check_fails "no mount of this test is left on the host" grep -q "$state" /proc/self/mountinfo
check_fails "no cgroup of this test's runs is left" sh -c "ls -d /sys/fs/cgroup/*/hutch/run-* /sys/fs/cgroup/hutch/run-* 2>/dev/null | while read d; do p=\${d##*/run-}; p=\${p%%-*}; kill -0 \$p 2>/dev/null || echo \$d; done | grep ."
out=$("$HUTCH" layer rm wrA 2>&1)
like "$out" "No such file" "removing a removed layer says it is not there"
done_testing
