#!/usr/bin/env bash
# hutch serve's disk layers made ahead (src/serve/disk_pool.h): the daemon keeps HUTCH_DISK_POOL
# formatted images of the default disk size in STATE/disk-pool; a create of that size takes one
# (the very file: its inode), a create of another size makes its own; the pool fills up again;
# each image is a filesystem of its own (no two share a UUID); the spares outlive a kill -9 and are
# taken after it, one of another size is made again; HUTCH_DISK_POOL=0 drops them and creates
# still work; nothing is left running.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh"
serve_setup serve-disk-pool
POOL=$HUTCH_STATE_DIR/disk-pool
SBXS=$HUTCH_STATE_DIR/sandboxes

# spares: "SLOT:INODE" of each ready spare, sorted
spares() {
    local f
    for f in "$POOL"/*/disk.img; do [ -f "$f" ] && echo "$(basename "$(dirname "$f")"):$(stat -c %i "$f")"; done | sort
}
# wait_spares N: until N spares are ready (at most 20 s)
wait_spares() {
    for _ in $(seq 200); do [ "$(spares | wc -l)" = "$1" ] && return 0; sleep 0.1; done
    return 1
}
inode_of() { stat -c %i "$SBXS/$1/disk.img" 2>/dev/null; }
# uuid IMAGE: the ext4 superblock's UUID (bytes 0x68-0x77 of the superblock at 1024)
uuid() { python3 -c 'import sys; f=open(sys.argv[1],"rb"); f.seek(1024+0x68); print(f.read(16).hex())' "$1"; }
create() {
    local r
    r=$(api -X POST -d "$1" "$U/v2/sandboxes")
    SB=$(jget "$(body_of "$r")" 'd["sandboxID"]')
    TK=$(jget "$(body_of "$r")" 'd["envdAccessToken"]')
    [ -n "$SB" ] && made+=("$SB")
    [ "$(status_of "$r")" = 201 ]
}
# disk_mb ID TOKEN: the size of / inside, in MiB
disk_mb() { sh_out "$1" "$2" 'df -k / | tail -n1' | awk '{print int($2 / 1024)}'; }

daemon_answers
wait_spares 4 && ok "the daemon makes 4 spares (the default) in STATE/disk-pool" ||
    { not_ok "the daemon makes 4 spares"; diag "$(spares)" "$(tail -5 "$LOG")"; }
is "$(stat -c %a "$POOL")" 700 "... in a directory only root can enter"
before=$(spares)

create '{"templateID":"base","timeout":300}' && ok "a create of the default size" || not_ok "a create of the default size"
A=$SB TA=$TK
ino=$(inode_of "$A")
grep -q ":$ino\$" <<<"$before" && ok "... takes a spare: its disk.img is one of them (inode $ino)" ||
    not_ok "... takes a spare (inode '$ino', spares: $before)"
wait_spares 4 && ok "the pool is full again after it" || not_ok "the pool is full again after it"
grep -q ":$ino\$" <<<"$(spares)" && not_ok "the taken image is no spare any more" || ok "the taken image is no spare any more"
mb=$(disk_mb "$A" "$TA")
[ "${mb:-0}" -ge 900 ] && [ "${mb:-0}" -le 1024 ] && ok "its / is the default 1 GiB ($mb MiB)" ||
    not_ok "its / is the default 1 GiB (got '$mb' MiB)"
is "$(sh_out "$A" "$TA" 'head -c 1048576 /dev/urandom > /home/user/f && sync && wc -c < /home/user/f')" 1048576 \
    "... and takes a file"

before=$(spares)
create '{"templateID":"base","timeout":300,"diskSizeMB":512}' && ok "a create of another size (512 MB)" ||
    not_ok "a create of another size (512 MB)"
B=$SB TB=$TK
ino=$(inode_of "$B")
[ -n "$ino" ] && ! grep -q ":$ino\$" <<<"$before" && ok "... makes its own image (no spare taken)" ||
    not_ok "... makes its own image (inode '$ino', spares: $before)"
is "$(spares)" "$before" "... and leaves the spares as they were"
mb=$(disk_mb "$B" "$TB")
[ "${mb:-0}" -ge 440 ] && [ "${mb:-0}" -le 512 ] && ok "its / is 512 MB ($mb MiB)" || not_ok "its / is 512 MB (got '$mb')"

uuids=$(for f in "$SBXS/$A/disk.img" "$SBXS/$B/disk.img" "$POOL"/*/disk.img; do uuid "$f"; done)
is "$(sort <<<"$uuids" | uniq -d)" "" "no two images share a filesystem UUID ($(wc -l <<<"$uuids") images)"

# --- a kill -9: the spares stay, and are taken after the restart ---
wait_spares 4
kept=$(spares)
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
start_daemon && ok "the daemon restarts after kill -9" || not_ok "the daemon restarts after kill -9"
sleep 0.5
is "$(spares)" "$kept" "the spares made before are kept, not made again"
create '{"templateID":"base","timeout":300}'
ino=$(inode_of "$SB")
grep -q ":$ino\$" <<<"$kept" && ok "a create after the restart takes one of them" || not_ok "a create after the restart takes one of them"
is "$(sh_out "$A" "$TA" 'wc -c < /home/user/f')" 1048576 "the first sandbox's file is still there"

# --- HUTCH_DISK_POOL=0: no spares; creates make their own ---
kill "$daemon"
wait "$daemon"
start_daemon HUTCH_DISK_POOL=0 && ok "the daemon starts with HUTCH_DISK_POOL=0" || not_ok "the daemon starts with HUTCH_DISK_POOL=0"
sleep 0.5
is "$(spares | wc -l)" 0 "... and drops its spares"
create '{"templateID":"base","timeout":300}' && [ -n "$(inode_of "$SB")" ] && ok "... a create still gets its disk" ||
    not_ok "... a create still gets its disk"
is "$(sh_out "$SB" "$TK" 'echo ok')" ok "... and runs"
kill "$daemon"
wait "$daemon"
# a spare of another size (as a daemon with another default made it) is dropped and made again
mkdir -m 700 "$POOL/0"
truncate -s 256M "$POOL/0/disk.img"
/usr/sbin/mke2fs -q -F -t ext4 "$POOL/0/disk.img" >/dev/null 2>&1
start_daemon HUTCH_DISK_POOL=many
sleep 0.3
grep -q 'HUTCH_DISK_POOL=many is not 0 to 64: 4 spares' "$LOG" && ok "a bad HUTCH_DISK_POOL is named, the default kept" ||
    not_ok "a bad HUTCH_DISK_POOL is named, the default kept"
wait_spares 4 && ok "... and 4 spares are made again" || not_ok "... and 4 spares are made again"
is "$(stat -c %s "$POOL/0/disk.img")" $((1 << 30)) "a spare of 256 MB left in the pool is made again at 1 GiB"

# --- nothing left running ---
for id in "${made[@]}"; do api -o /dev/null -X DELETE "$U/sandboxes/$id" >/dev/null; done
made=()
kill "$daemon"
wait "$daemon"
is "$?" 0 "SIGTERM stops the daemon"
daemon=
is "$(pgrep -f "mke2fs.*$POOL" | wc -l)" 0 "no mke2fs is left running"
is "$(ls "$SBXS" | wc -l)" 0 "no sandbox's layer is left"
grep -q "ERROR: AddressSanitizer\|runtime error" "$LOG" && { not_ok "the sanitizers found nothing in the daemon"; cat "$LOG"; } ||
    ok "the sanitizers found nothing in the daemon"
done_testing
