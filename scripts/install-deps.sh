#!/usr/bin/env bash
# Installs what hutch needs to build, run and test, from Debian's archive. Run as root.
# Debian 12 (bookworm) or newer.
set -euo pipefail
packages=(
    # build
    build-essential pkg-config
    libseccomp-dev   # seccomp: compiles the sandbox's syscall policy to BPF
    libjansson-dev   # JSON: `hutch run --json`, `hutch doctor --json`, HTTP error bodies
    libsqlite3-dev   # the daemon's state: sandboxes, their event logs, API keys (src/sandbox)
    libsodium-dev    # API keys kept as hashes; random tokens
    libuv1-dev       # the daemon's event loop, sockets and timers (src/http/)
    libhttp-parser-dev # HTTP/1.1 request parsing (src/http/)
    zlib1g-dev       # gzip bodies of envd's /files, both ways (src/api/gzip_body.c)
    # (all, and glibc, are linked statically into build/hutch: libc6-dev has libc.a)
    nftables         # `hutch doctor` checks it; egress rules for sandboxes will use it
    # what sandboxes run, and what the tests drive
    python3 nodejs bash coreutils procps iproute2 util-linux bsdutils
    curl git ncurses-bin # in every sandbox, as in E2B's base template; curl also drives the tests
    jq strace        # the tests: fields of --json output (lib.sh), kill points held in setup
    # baseline for the benchmark
    bubblewrap
    # writable roots (hutch run --writable-root): mke2fs makes each disk layer; the tests
    # install a .deb (dpkg-deb, from dpkg), a wheel (Debian's pip) and an npm tarball inside
    e2fsprogs python3-pip
    # the code interpreter's Python contexts (src/interp/python_kernel.py): IPython, and the data
    # stack its zygote preloads for code-interpreter-v1 (numpy, pandas, matplotlib; PIL images)
    python3-ipython python3-numpy python3-pandas python3-matplotlib python3-pil
    # ... and what else E2B's code-interpreter template has that Debian packages, for the cells
    # that import it (none is preloaded: each would make every fork of the zygote dearer)
    python3-scipy python3-sympy python3-sklearn python3-seaborn python3-plotly python3-xarray
    python3-skimage python3-opencv python3-imageio python3-soundfile python3-nltk python3-joblib
    python3-requests python3-aiohttp python3-bs4 python3-tornado python3-tqdm python3-pytest
    python3-openpyxl python3-xlrd python3-docx python3-tz
    r-base-core      # the code interpreter's R contexts (src/interp/r_kernel.py)
    openjdk-17-jdk-headless # its Java contexts: jshell's API (src/interp/java_kernel.py)
)
# npm: Debian's nodejs lacks it (package npm); NodeSource's nodejs bundles it, and conflicts with
# Debian's npm.
command -v npm >/dev/null || packages+=(npm)
# The test guest (tests/guest/), which `make test` boots: qemu (TCG), Debian's own kernel (its
# vmlinuz and modules are used as files; on Debian 12 that is 6.1), busybox and cpio for its
# initramfs, mkfs.ext4 for its scratch disk. Always installed, so that CI always runs it.
packages+=(qemu-system-x86 linux-image-amd64 busybox-static cpio e2fsprogs)
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The end-to-end suite's npm packages (tests/e2e: the E2B SDKs, pinned by its package-lock.json),
# installed when node_modules is missing or older than the lock; npm ci writes
# node_modules/.package-lock.json, the stamp compared here.
e2e=$(cd "$(dirname "$0")/../tests/e2e" && pwd)
if [ ! -f "$e2e/node_modules/.package-lock.json" ] ||
    [ "$e2e/package-lock.json" -nt "$e2e/node_modules/.package-lock.json" ]; then
    (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$e2e/node_modules/.package-lock.json"
fi
# The code contexts' kernels' npm packages (src/interp: the TypeScript transpiler, pinned by its
# package-lock.json), the same way.
interp=$(cd "$(dirname "$0")/../src/interp" && pwd)
if [ ! -f "$interp/node_modules/.package-lock.json" ] ||
    [ "$interp/package-lock.json" -nt "$interp/node_modules/.package-lock.json" ]; then
    (cd "$interp" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$interp/node_modules/.package-lock.json"
fi
