#!/usr/bin/env bash
# Escape attempts through the filesystem, as the default user and with --root:
#   - read host-only files (0600; 0644 in a 0700 directory; the host uid 1000's; group root's),
#     under the host's /tmp (not in the sandbox at all) and under the host's /usr/local (visible
#     through the read-only /usr layer), by host path, /proc/self/root, /proc/1/root, ../
#     climbing, /proc/self/cwd, and symlinks planted inside; each route's control reads a
#     sandbox file and a public /usr file;
#   - the host's private /etc files (shadow, ...) by their paths: the sandbox's /etc is generated;
#   - symlinks planted in /output for the host-side artifact copy to follow;
#   - write under /usr (new files in /usr/bin and /usr/lib, a world-writable host file and
#     directory, rename, unlink, chmod), also through --file: the host's /usr stays unchanged;
#   - write into a 0777 host directory (and a tmpfs mounted in it) given with --ro-bind under
#     /tmp, where Landlock allows writes; remount or unmount it; climb out of it with ..;
#   - leave something behind for the next sandbox or in hutch's state directory.
# Every secret holds a random token; a leak anywhere in the output is a failure.
. "$(dirname "$0")/lib.sh"

require_probes escape ids

token() { echo "hutch-$1-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"; }
tag=$$-$RANDOM

hostdir=$(mktemp -d /tmp/hutch-escape-fs.XXXXXX)
usrdir=$(mktemp -d /usr/local/hutch-escape.XXXXXX 2>/dev/null) || usrdir=
cleanup() {
    rm -rf "$hostdir"
    [ -z "$usrdir" ] || rm -rf "$usrdir"
    rm -rf "/usr/bin/hutch-escape-$tag" "/usr/lib/hutch-escape-$tag" \
        "/usr/lib/hutch-escape-dir-$tag" "/usr/bin/hutch-escape-ln-$tag" \
        "/usr/bin/hutch-escape-file-$tag" "/tmp/hutch-persist-$tag"
    [ -z "${HUTCH_TEST_TMP:-}" ] || rm -rf "$HUTCH_TEST_TMP"
}
trap cleanup EXIT

# Host secrets. hostdir is 0755 so that only the files' own modes stand in the way on the host.
chmod 755 "$hostdir"
tok_hsec=$(token hsec) tok_hclosed=$(token hclosed) tok_decoy=$(token decoy)
echo "$tok_hsec" >"$hostdir/secret" && chmod 600 "$hostdir/secret"
mkdir -m 700 "$hostdir/closed"
echo "$tok_hclosed" >"$hostdir/closed/open.txt" && chmod 644 "$hostdir/closed/open.txt"
echo "$tok_decoy" >"$hostdir/decoy.txt"
secrets=("$tok_hsec" "$tok_hclosed")
targets=("hsec=$hostdir/secret" "hclosed=$hostdir/closed/open.txt" "decoy=$hostdir/decoy.txt")
if [ -n "$usrdir" ]; then
    chmod 755 "$usrdir"
    tok_usec=$(token usec) tok_uclosed=$(token uclosed) tok_upub=$(token upub)
    echo "$tok_usec" >"$usrdir/secret" && chmod 600 "$usrdir/secret"
    mkdir -m 700 "$usrdir/closed"
    echo "$tok_uclosed" >"$usrdir/closed/open.txt" && chmod 644 "$usrdir/closed/open.txt"
    echo "$tok_upub" >"$usrdir/public.txt" && chmod 644 "$usrdir/public.txt"
    echo "world" >"$usrdir/world.txt" && chmod 666 "$usrdir/world.txt"
    mkdir -m 777 "$usrdir/worlddir" && chmod 777 "$usrdir/worlddir"
    # owned by the host's uid 1000 (not the sandbox's 1000), and group root 0640
    tok_uown=$(token uown) tok_ugrp=$(token ugrp)
    echo "$tok_uown" >"$usrdir/uid1000" && chown 1000:1000 "$usrdir/uid1000" && chmod 600 "$usrdir/uid1000"
    echo "$tok_ugrp" >"$usrdir/grouproot" && chown 0:0 "$usrdir/grouproot" && chmod 640 "$usrdir/grouproot"
    secrets+=("$tok_usec" "$tok_uclosed" "$tok_uown" "$tok_ugrp")
    targets+=("usec=$usrdir/secret" "uclosed=$usrdir/closed/open.txt" "uown=$usrdir/uid1000"
        "ugrp=$usrdir/grouproot" "upub=$usrdir/public.txt")
else
    skip "reading, writing and linking to host files under /usr (planted in /usr/local)" \
        "/usr/local is not writable here"
fi

line() { awk -v op="$2" '$1 == op { print; exit }' <<<"$1"; }
# leaked TEXT: the secret tokens found in TEXT, if any.
leaked() {
    local t found=()
    for t in "${secrets[@]}"; do [[ $1 == *"$t"* ]] && found+=("$t"); done
    echo "${found[*]:-}"
}

# --- reading host files -------------------------------------------------------------------------
# One line per route and target: "ROUTE NAME :: first line of what reading it gave".
cat >"$hostdir/reader.sh" <<'EOF'
n=0
for t in "$@"; do
    name=${t%%=*} p=${t#*=} n=$((n + 1))
    ln -sfn "$p" "/tmp/link.$n"
    ln -sfn "/proc/1/root$p" "/tmp/link1.$n"
    for route in direct proc_self_root proc_1_root dotdot proc_cwd symlink symlink_proc1; do
        case $route in
        direct) q=$p ;;
        proc_self_root) q=/proc/self/root$p ;;
        proc_1_root) q=/proc/1/root$p ;;
        dotdot) q=../../../../../../../..$p ;;
        proc_cwd) q=/proc/self/cwd/../../../../../../..$p ;;
        symlink) q=/tmp/link.$n ;;
        symlink_proc1) q=/tmp/link1.$n ;;
        esac
        printf '%s %s :: %s\n' "$route" "$name" "$(cat -- "$q" 2>&1 | head -n 1)"
    done
done
EOF
routes=(direct proc_self_root proc_1_root dotdot proc_cwd symlink symlink_proc1)
for who in user root; do
    flag=()
    [ "$who" = root ] && flag=(--root)
    # the decoy lands inside at the same path as on the host: the routes can reach that path
    out=$(hrun "${flag[@]}" "--file=$hostdir/reader.sh:/tmp/reader.sh" \
        "--file=$hostdir/decoy.txt:$hostdir/decoy.txt" -- /bin/bash /tmp/reader.sh "${targets[@]}" 2>&1)
    for r in "${routes[@]}"; do
        lines=$(grep "^$r " <<<"$out")
        if [ -z "$lines" ]; then
            not_ok "$who: $r: the reader ran"
            diag "$out"
            continue
        fi
        is "$(leaked "$lines")" "" "$who: $r: no host-only file is readable (0600; 0644 in a 0700 dir; host uid 1000's; group root's)"
        case $r in
        proc_1_root | symlink_proc1) continue ;; # init's root is out of reach even for sandbox files
        esac
        like "$(grep "^$r decoy " <<<"$lines")" " :: $tok_decoy\$" "$who: $r: control: the same route reads the sandbox's own file"
        if [ -n "$usrdir" ]; then
            like "$(grep "^$r upub " <<<"$lines")" " :: $tok_upub\$" "$who: $r: control: the same route reads a public host file in /usr"
        fi
    done
done

# --- the sandbox's /etc is a generated copy: no host file that is not world-readable is in it ----
# (shadow, gshadow, keys under 0700 directories, ...). Listed on the host, tried inside by path.
mapfile -t private_etc < <(python3 -c '
import os, stat, sys
def walk(d, open_chain):
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        p = os.path.join(d, n)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            walk(p, open_chain and bool(st.st_mode & stat.S_IXOTH))
        elif stat.S_ISREG(st.st_mode) and st.st_size > 0:
            if not (open_chain and st.st_mode & stat.S_IROTH):
                print(p)
walk("/etc", True)')
if [ "${#private_etc[@]}" -gt 0 ]; then
    for who in user root; do
        flag=()
        [ "$who" = root ] && flag=(--root)
        out=$(hrun "${flag[@]}" -- /bin/bash -c '
            for f; do head -c 1 "$f" >/dev/null 2>&1 && echo "readable: $f"; done
            head -c 1 /etc/passwd >/dev/null && echo "control: /etc/passwd readable"' _ "${private_etc[@]}" 2>&1)
        is "$(grep '^readable' <<<"$out")" "" "$who: none of the host's ${#private_etc[@]} private /etc files (e.g. ${private_etc[0]}) is readable inside"
        like "$out" 'control: /etc/passwd readable' "$who: control: the sandbox's own /etc/passwd is readable the same way"
    done
else
    skip "private /etc files" "the host has no /etc file that is not world-readable"
fi

# --- symlinks planted for the host-side artifact copy ------------------------------------------
art=$hostdir/artifacts
links=("abs=$hostdir/secret" "rel=../../../../../../..$hostdir/secret" "dir=$hostdir"
    "closed=$hostdir/closed/open.txt" "proc=/proc/1/root$hostdir/secret")
[ -n "$usrdir" ] && links+=("usr=$usrdir/secret")
out=$(hrun "--artifacts=$art" -- /bin/bash -c '
    for l in "$@"; do ln -s "${l#*=}" "/output/${l%%=*}" || exit 1; done
    mkdir /output/sub && ln -s / /output/sub/root && ln -s .. /output/sub/up
    echo "$0" >/output/plain.txt' "$tok_decoy" "${links[@]}" 2>&1)
is "$(leaked "$(cat -- "$art"/* "$art"/*/* 2>/dev/null; find "$art" 2>/dev/null)")" "" "artifacts: symlinks planted in /output to host secrets bring nothing of them out"
is "$(find "$art" -type l 2>/dev/null)" "" "artifacts: no symlink is copied out"
is "$(find "$art" -mindepth 1 ! -path "$art/plain.txt" ! -path "$art/sub" 2>/dev/null)" "" "artifacts: the planted links and their targets are left behind"
is "$(cat "$art/plain.txt" 2>&1)" "$tok_decoy" "artifacts: control: a plain file from /output is copied out"

# --- writing under /usr ---------------------------------------------------------------------------
if [ -n "$usrdir" ]; then
    sum_before=$(cd "$usrdir" && sha256sum public.txt world.txt && stat -c '%n %a %u %Y' public.txt world.txt worlddir)
fi
for who in user root; do
    flag=()
    [ "$who" = root ] && flag=(--root)
    out=$(hrun "${flag[@]}" -- /bin/bash -c '
        tag=$1 usrdir=$2
        try() {
            local what=$1; shift
            if "$@" 2>/dev/null; then echo "$what: done"; else echo "$what: failed"; fi
        }
        try "create in /usr/bin" eval "echo x >/usr/bin/hutch-escape-$tag"
        try "create in /usr/lib" eval "echo x >/usr/lib/hutch-escape-$tag"
        try "mkdir in /usr/lib" mkdir "/usr/lib/hutch-escape-dir-$tag"
        try "symlink in /usr/bin" ln -s /etc/passwd "/usr/bin/hutch-escape-ln-$tag"
        if [ -n "$usrdir" ]; then
            try "create in a 0777 host dir" eval "echo x >$usrdir/worlddir/new-$tag"
            try "append to a 0666 host file" eval "echo evil >>$usrdir/world.txt"
            try "truncate a 0666 host file" truncate -s 0 "$usrdir/world.txt"
            try "append to a 0644 host file" eval "echo evil >>$usrdir/public.txt"
            try "chmod a host file" chmod 0777 "$usrdir/public.txt"
            try "rename a host file" mv "$usrdir/public.txt" "$usrdir/moved-$tag"
            try "unlink a host file" rm "$usrdir/public.txt"
            touch "$usrdir/world.txt" 2>/dev/null # times: at most the sandbox'\''s copy
        fi' _ "$tag" "$usrdir" 2>&1)
    attempts=$(grep -cE ': (done|failed)$' <<<"$out")
    done_lines=$(grep -E ': done$' <<<"$out")
    is "$done_lines" "" "$who: every write under /usr fails inside ($attempts attempts)"
    [ "$attempts" -ge 4 ] || diag "$out"
    is "$(ls -d /usr/bin/hutch-escape-"$tag" /usr/lib/hutch-escape-"$tag" /usr/lib/hutch-escape-dir-"$tag" \
        /usr/bin/hutch-escape-ln-"$tag" 2>/dev/null)" "" "$who: no new file in the host's /usr/bin or /usr/lib"
    if [ -n "$usrdir" ]; then
        is "$(cd "$usrdir" && sha256sum public.txt world.txt && stat -c '%n %a %u %Y' public.txt world.txt worlddir)" \
            "$sum_before" "$who: the host's /usr files are unchanged (content, mode, owner, mtime)"
        is "$(ls -A "$usrdir/worlddir"; ls "$usrdir" | grep -v '^\(secret\|closed\|public.txt\|world.txt\|worlddir\|uid1000\|grouproot\)$')" "" \
            "$who: nothing new in the host's world-writable /usr directory"
    fi
done
# --file copies as sandbox root while the sandbox is being set up: still not onto the host's /usr
for dest in "/usr/bin/hutch-escape-file-$tag" "/bin/hutch-escape-ln-$tag" ${usrdir:+"$usrdir/worlddir/file-$tag"}; do
    hrun "--file=$hostdir/decoy.txt:$dest" -- /bin/true >/dev/null 2>&1
    host_path=$dest
    [[ $dest == /bin/* ]] && host_path=/usr$dest
    desc="--file into ${dest%/*}/ does not create a file in the host's ${host_path%/*}/"
    [[ $dest == "$usrdir"/* ]] && desc="--file into a 0777 host directory under /usr does not create a file there on the host"
    if [ -e "$host_path" ]; then not_ok "$desc"; else ok "$desc"; fi
done

# --- truncation outside the writable places: Landlock refuses it from ABI 3 (Linux 6.2); below
# that (Debian 12's 6.1 has ABI 2) the read-only mounts and the files' owner (host root, which is
# nobody inside) still do. O_RDONLY|O_TRUNC is the way past Landlock's write right. -------------
for who in user root; do
    flag=()
    [ "$who" = root ] && flag=(--root)
    ops=()
    for f in /etc/passwd /etc/hostname /usr/bin/true /usr/lib/os-release ${usrdir:+"$usrdir/world.txt"}; do
        ops+=("truncate:$f" "open_trunc:$f")
    done
    out=$(hrun "${flag[@]}" "--file=$PROBES/escape:/tmp/escape" -- /bin/sh -c \
        'echo mine >/tmp/own && exec /tmp/escape truncate:/tmp/own open_trunc:/tmp/own "$@"' _ "${ops[@]}" 2>&1)
    like "$(line "$out" truncate:/tmp/own)/$(line "$out" open_trunc:/tmp/own)" '^[^ ]+ ok/[^ ]+ ok$' \
        "$who: control: the probe truncates a file of its own in /tmp both ways"
    bad=
    for op in "${ops[@]}"; do
        [[ $(line "$out" "$op") =~ ^[^\ ]+\ errno=(EACCES|EPERM|EROFS)( |$) ]] || bad="$bad [$(line "$out" "$op")]"
    done
    is "${bad:-none}" none "$who: truncate(2) and O_RDONLY|O_TRUNC of /etc, /usr and host files fail (${#ops[@]} tries)"
done
[ -z "$usrdir" ] || is "$(cat "$usrdir/world.txt")" world "the host's 0666 file under /usr is not truncated"

# --- --ro-bind: a world-writable host directory (with a tmpfs mounted inside it) bound read-only
# under /tmp, where Landlock allows writes: only the read-only mount stands in the way ----------
bind_src=$hostdir/bind
mkdir -m 777 "$bind_src" && chmod 777 "$bind_src"
echo "$tok_decoy" >"$bind_src/public.txt"
echo "$tok_hsec" >"$bind_src/secret" && chmod 600 "$bind_src/secret"
mkdir "$bind_src/sub"
sub_mounted=
if mount -t tmpfs -o mode=1777,size=1m hutch-escape "$bind_src/sub" 2>/dev/null; then
    sub_mounted=yes
    trap 'umount "$bind_src/sub" 2>/dev/null; cleanup' EXIT
fi
bind_before=$(find "$bind_src" -printf '%p %s %m %T@\n' | sort)
if hrun "--ro-bind=$bind_src:/tmp/ro" -- /bin/true >/dev/null 2>&1; then
    for who in user root; do
        flag=()
        [ "$who" = root ] && flag=(--root)
        out=$(hrun "${flag[@]}" "--ro-bind=$bind_src:/tmp/ro" "--file=$PROBES/escape:/tmp/escape" -- /bin/bash -c '
            try() {
                local what=$1; shift
                if "$@" 2>/dev/null; then echo "$what: done"; else echo "$what: failed"; fi
            }
            echo "read: $(cat /tmp/ro/public.txt)"
            cat /tmp/ro/secret 2>&1
            try "create in the bind" eval "echo x >/tmp/ro/new"
            try "create in the tmpfs under the bind" eval "echo x >/tmp/ro/sub/new"
            try "mkdir in the bind" mkdir /tmp/ro/dir
            try "append to a file of the bind" eval "echo x >>/tmp/ro/public.txt"
            try "chmod in the bind" chmod 0600 /tmp/ro/public.txt
            try "rename in the bind" mv /tmp/ro/public.txt /tmp/ro/moved
            try "unlink in the bind" rm -f /tmp/ro/public.txt
            /tmp/escape remount_rw:/tmp/ro remount_rw:/tmp/ro/sub umount:/tmp/ro/sub umount:/tmp/ro
            echo "up: $(cd /tmp/ro/.. && pwd -P) $(ls /tmp/ro/../ | tr "\n" " ")"
            true' 2>&1)
        like "$out" "read: $tok_decoy" "$who: --ro-bind: control: a public file of the bound host directory is readable"
        is "$(leaked "$out")" "" "$who: --ro-bind: a 0600 file in the bound directory stays unreadable"
        is "$(grep -E ': done$' <<<"$out")" "" "$who: --ro-bind: every write into the bound 0777 directory (and the tmpfs in it) fails"
        for op in remount_rw:/tmp/ro remount_rw:/tmp/ro/sub umount:/tmp/ro/sub umount:/tmp/ro; do
            like "$(line "$out" "$op")" "^[^ ]+ errno=EPERM" "$who: --ro-bind: $op fails with EPERM"
        done
        like "$(sed -n 's/^up: //p' <<<"$out")" '^/tmp ' "$who: --ro-bind: .. from the bind's root is the sandbox's /tmp, not the host's"
        is "$(find "$bind_src" -printf '%p %s %m %T@\n' | sort)" "$bind_before" "$who: --ro-bind: the host directory is unchanged"
    done
else
    skip "--ro-bind of a host directory" "hutch run has no --ro-bind, or refused a 0777 directory"
fi
closed_out=$(hrun --json "--ro-bind=$hostdir/closed:/tmp/closed" -- /bin/cat /tmp/closed/open.txt 2>&1)
is "$(leaked "$closed_out")" "" "--ro-bind of a 0700 host directory reveals nothing of it"
[ -z "$sub_mounted" ] || umount "$bind_src/sub"

# --- nothing carries over to the host or the next sandbox -----------------------------------------
out=$(hrun --root -- /bin/bash -c 'for d in /tmp /var/tmp /root /run; do echo "$1" >"$d/hutch-persist-$2"; cat "$d/hutch-persist-$2"; done' _ "$tok_decoy" "$tag" 2>&1)
is "$(grep -c "^$tok_decoy\$" <<<"$out")" 4 "control: a sandbox writes and reads back files in /tmp /var/tmp /root /run"
out=$(hrun --root -- /bin/bash -c 'cat /tmp/hutch-persist-$1 /var/tmp/hutch-persist-$1 /root/hutch-persist-$1 /run/hutch-persist-$1 2>&1 | grep -c "No such file"' _ "$tag" 2>&1)
is "$out" 4 "files written by one sandbox in /tmp /var/tmp /root /run are not in the next"
is "$(ls -d /tmp/hutch-persist-"$tag" /var/tmp/hutch-persist-"$tag" /root/hutch-persist-"$tag" /run/hutch-persist-"$tag" 2>/dev/null)" "" \
    "files written by a sandbox do not appear on the host"
is "$(grep -rlF "$tok_decoy" "$HUTCH_STATE_DIR" "$HUTCH_RUN_DIR" 2>/dev/null)" "" "files written by a sandbox are not left in hutch's state or run directory"

done_testing
