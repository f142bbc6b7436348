#!/usr/bin/env bash
# Escape attempts through the network: the sandbox must not reach a service of the host's, be it
# TCP on the host's 127.0.0.1, an abstract unix socket or a unix socket file, must see no
# interface but its own loopback, and must not open packet, vsock, netlink or raw sockets.
# The host services log every connection; a control from the host proves they answer, and a
# server started inside on the very same port and name proves the sandbox's loopback works and
# is its own. Traffic only ever goes to loopback.
. "$(dirname "$0")/lib.sh"

if [ ! -x "$PROBES/escape" ]; then
    not_ok "probe escape is built (make build/probe/escape)"
    done_testing
    exit 1
fi

line() { awk -v op="$2" '$1 == op { print; exit }' <<<"$1"; }
expect() { like "$(line "$1" "$2")" "^[^ ]+ errno=($3)( |\$)" "$4"; }
esc() { echo "--file=$PROBES/escape:/tmp/escape"; }

work=$(mktemp -d /tmp/hutch-escape-net.XXXXXX)
server_pid=
cleanup() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null
    [ -z "$server_pid" ] || wait "$server_pid" 2>/dev/null
    rm -rf "$work"
    [ -z "${HUTCH_TEST_TMP:-}" ] || rm -rf "$HUTCH_TEST_TMP"
}
trap cleanup EXIT

# --- host services: TCP on 127.0.0.1 (a free port), an abstract unix name, a unix socket file ---
token="host-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
abstract="hutch-escape-$$-$RANDOM"
sock=$work/host.sock
cat >"$work/server.py" <<'EOF'
import os, select, socket, sys, time
work, token, abstract, path = sys.argv[1:5]
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.bind(("127.0.0.1", 0))
abst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abst.bind("\0" + abstract)
unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
unix.bind(path)
names = {}
for s, name in ((tcp, "tcp"), (abst, "abstract"), (unix, "path")):
    s.listen(8)
    names[s] = name
with open(work + "/port.tmp", "w") as f:
    f.write("%d\n" % tcp.getsockname()[1])
os.rename(work + "/port.tmp", work + "/port")
deadline = time.monotonic() + 120  # never outlive the test by long
while time.monotonic() < deadline:
    ready, _, _ = select.select(list(names), [], [], 1)
    for s in ready:
        c, _ = s.accept()
        with open(work + "/connections", "a") as log:
            log.write(names[s] + "\n")
        c.sendall((token + "\n").encode())
        c.close()
EOF
python3 "$work/server.py" "$work" "$token" "$abstract" "$sock" &
server_pid=$!
for _ in $(seq 100); do
    [ -s "$work/port" ] && break
    sleep 0.05
done
port=$(cat "$work/port" 2>/dev/null)
if [ -z "$port" ]; then
    not_ok "host test server started"
    done_testing
    exit 1
fi
connections() { [ -f "$work/connections" ] && wc -l <"$work/connections" | tr -d ' ' || echo 0; }

# Control: from the host, all three answer with the token, and each connection is logged.
host=$("$PROBES/escape" "tcp_connect:$port" "abstract_connect:$abstract" "unix_connect:$sock" 2>&1)
like "$host" "tcp_connect:$port ok read=$token" "control: the host's TCP server on 127.0.0.1:$port answers the host"
like "$host" "abstract_connect:$abstract ok read=$token" "control: the host's abstract unix socket answers the host"
like "$host" "unix_connect:$sock ok read=$token" "control: the host's unix socket file answers the host"
is "$(connections)" 3 "control: the host servers logged the three connections"
hexport=$(printf ':%04X' "$port")
if awk '{print $2}' /proc/net/tcp | grep -q "$hexport\$"; then
    ok "control: the host's /proc/net/tcp lists the listening port"
else
    not_ok "control: the host's /proc/net/tcp lists the listening port"
fi
before=$(connections)

for who in user root; do
    flag=()
    [ "$who" = root ] && flag=(--root)
    out=$(hrun "${flag[@]}" "$(esc)" -- /bin/bash -c '
        echo "--- listen"; tail -n +2 /proc/net/tcp | awk "{print \$2}"
        /tmp/escape "$@"
        echo "--- dev"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "
        echo "--- routes"; tail -n +2 /proc/net/route | wc -l; grep -vc " lo$" /proc/net/ipv6_route
        echo "--- unix"; grep -c "@'"$abstract"'" /proc/net/unix
        echo "--- ip"; ip -o link 2>&1 | head -n 3
        echo "--- sys"; ls /sys/class/net 2>&1
    ' _ "tcp_connect:$port" "abstract_connect:$abstract" "unix_connect:$sock" \
        "tcp_self:$port" "abstract_self:$abstract" \
        socket_packet socket_vsock socket_netlink socket_raw socket_raw_icmp socket_raw6 2>&1)
    expect "$out" "tcp_connect:$port" "ECONNREFUSED at=connect" "$who: connecting to the host's 127.0.0.1:$port is refused (the loopback is the sandbox's own)"
    expect "$out" "abstract_connect:$abstract" "ECONNREFUSED at=connect" "$who: the host's abstract unix socket is unreachable"
    expect "$out" "unix_connect:$sock" "ENOENT at=connect" "$who: the host's unix socket file does not exist inside"
    unlike_token=ok
    [[ $out == *"$token"* ]] && unlike_token=leaked
    is "$unlike_token" ok "$who: no reply of a host server came out"
    is "$(connections)" "$before" "$who: the host servers received no connection"
    like "$(line "$out" "tcp_self:$port")" "^[^ ]+ ok read=INSIDE$" "$who: control: a server inside on 127.0.0.1:$port (taken on the host) is reachable from inside"
    like "$(line "$out" "abstract_self:$abstract")" "^[^ ]+ ok read=INSIDE$" "$who: control: an abstract socket inside under the host's name is reachable from inside"
    expect "$out" socket_packet EAFNOSUPPORT "$who: AF_PACKET socket fails with EAFNOSUPPORT"
    expect "$out" socket_vsock EAFNOSUPPORT "$who: AF_VSOCK socket fails with EAFNOSUPPORT"
    expect "$out" socket_netlink EAFNOSUPPORT "$who: AF_NETLINK socket fails with EAFNOSUPPORT"
    expect "$out" socket_raw EPERM "$who: raw AF_INET socket (IPPROTO_RAW) fails with EPERM"
    expect "$out" socket_raw_icmp EPERM "$who: raw AF_INET ICMP socket fails with EPERM"
    expect "$out" socket_raw6 EPERM "$who: raw AF_INET6 socket fails with EPERM"
    dev=$(sed -n '/^--- dev$/,/^--- routes$/p' <<<"$out" | sed '1d;$d' | tr '\n' ' ')
    is "$dev" "lo " "$who: /proc/net/dev shows only lo"
    is "$(sed -n '/^--- routes$/,/^--- unix$/p' <<<"$out" | sed '1d;$d' | tr '\n' ' ')" "0 0 " \
        "$who: no IPv4 route at all, no IPv6 route but through lo"
    # read before the probe ran, as its own server on the same port lingers in TIME_WAIT after
    listen=$(sed -n '/^--- listen$/,/^tcp_connect:/p' <<<"$out" | sed '1d;$d')
    if grep -q "$hexport\$" <<<"$listen"; then
        not_ok "$who: the host's listening port is not in the sandbox's /proc/net/tcp"
        diag "$listen"
    else
        ok "$who: the host's listening port is not in the sandbox's /proc/net/tcp"
    fi
    is "$(sed -n '/^--- unix$/{n;p}' <<<"$out")" 0 "$who: the host's abstract name is not in the sandbox's /proc/net/unix"
    # ip needs netlink, which the filter refuses; were it allowed, it must list lo alone
    ip_out=$(sed -n '/^--- ip$/,/^--- sys$/p' <<<"$out" | sed '1d;$d')
    if [[ $ip_out == *"Address family not supported"* ]] || ! grep -qv ': lo:' <<<"$ip_out"; then
        ok "$who: ip link shows none of the host's interfaces"
    else
        not_ok "$who: ip link shows none of the host's interfaces"
        diag "$ip_out"
    fi
    like "$(sed -n '/^--- sys$/,$p' <<<"$out")" "No such file|^--- sys$" "$who: /sys/class/net is absent"
done

# the host servers are still up and answering: the sandboxes did not take them down
host=$("$PROBES/escape" "tcp_connect:$port" 2>&1)
like "$host" "tcp_connect:$port ok read=$token" "control: the host's TCP server still answers the host afterwards"

done_testing
