#!/usr/bin/env python3
"""The daemon's benchmark (`make bench-serve`; bench/README.md, "hutch serve"): what E2B's API
costs a client of `hutch serve`, each figure next to a baseline measured in the same run.

  create   POST /v2/sandboxes until its 201, then a first command's output (Start `true` to its
           end event), against `hutch run -- /bin/true` (a whole throwaway sandbox).
  exec     Start `/bin/true` in a running sandbox until its end event, against a bare
           fork+exec+wait of /bin/true from this process.
  sdk      the same through the real E2B SDK (bench/serve_sdk.mjs): Sandbox.create() and
           commands.run('echo x') to its first stdout byte, BENCH_N in a row and BENCH_TOGETHER
           (50) at once (with the warm pool, the default), against the same in a row with
           HUTCH_POOL=0, `hutch run -- /bin/echo x` (and `docker run -d` + `docker exec` where a
           docker daemon answers).
  pause    pause and resume (POST /sandboxes/ID/pause, then /resume) of a sandbox with a command
           running, against GET /sandboxes/ID (the API's own round trip) in the same rounds.
  idle     BENCH_IDLE_N (1000) idle sandboxes held: MemAvailable and the daemon's RSS a sandbox,
           and the API's latency (GET /sandboxes/ID, envd's List through init, the whole list)
           while they are held, against the same calls with one sandbox.
  restart  N sandboxes live, the daemon killed with SIGKILL and started again: the time until all
           N answer again (an envd List each, and a filesystem Stat through init for each), against
           the same daemon's start with no sandboxes.

Environment: BENCH_SERVE="create exec sdk pause idle restart" (which), BENCH_N (rounds, 100),
BENCH_WARMUP (5), BENCH_TOGETHER (50), BENCH_IDLE_N (1000), BENCH_RESTART_N (sandboxes held for
restart, 200; the issue's target is 1000), HUTCH (the binary, build/hutch). Only loopback is used;
every sandbox made is killed and the daemon stopped at the end, also after Ctrl-C.
"""
import base64, http.client, json, os, signal, socket, statistics, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUTCH = os.environ.get("HUTCH", os.path.join(ROOT, "build/hutch"))
N = int(os.environ.get("BENCH_N", "100"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "5"))
RESTART_N = int(os.environ.get("BENCH_RESTART_N", "200"))
TOGETHER = int(os.environ.get("BENCH_TOGETHER", "50"))
IDLE_N = int(os.environ.get("BENCH_IDLE_N", "1000"))
WHICH = os.environ.get("BENCH_SERVE", "create exec sdk pause idle restart").split()
KEY = "bench-key-%d" % os.getpid()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Daemon:
    def __init__(self, tmp, **env):
        self.tmp, self.port, self.proc = tmp, free_port(), None
        self.env = {**os.environ, "HUTCH_API_KEY": KEY, "HUTCH_STATE_DIR": tmp + "/state",
                    "HUTCH_RUN_DIR": tmp + "/run", **env}
        self.log = open(tmp + "/serve.log", "ab")

    def start(self):
        """Starts it; returns seconds until /health answers."""
        t = time.monotonic()
        self.proc = subprocess.Popen([HUTCH, "serve", "--listen", "127.0.0.1:%d" % self.port],
                                     env=self.env, stdout=self.log, stderr=self.log)
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return time.monotonic() - t
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise SystemExit("bench: hutch serve exited: see " + self.tmp + "/serve.log")
            time.sleep(0.002)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


class Client:
    def __init__(self, port):
        self.port, self.c = port, None

    def call(self, method, path, body=None, headers=None):
        for attempt in (0, 1):  # one reconnect: a keep-alive connection the daemon closed
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                self.c.request(method, path, body, headers or {})
                r = self.c.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                self.c = None
                if attempt:
                    raise

    def create(self):
        st, b = self.call("POST", "/v2/sandboxes", json.dumps({"templateID": "base", "timeout": 3600}),
                          {"X-API-KEY": KEY, "Content-Type": "application/json"})
        if st != 201:
            raise SystemExit("bench: create answered %d: %s" % (st, b[:300]))
        d = json.loads(b)
        return d["sandboxID"], d["envdAccessToken"]

    def kill(self, sid):
        self.call("DELETE", "/sandboxes/" + sid, headers={"X-API-KEY": KEY})

    def envd(self, sb, path, body, stream):
        h = {"E2b-Sandbox-Id": sb[0], "E2b-Sandbox-Port": "49983", "X-Access-Token": sb[1],
             "Content-Type": "application/connect+json" if stream else "application/json"}
        data = json.dumps(body).encode()
        if stream:
            data = b"\0" + struct.pack(">I", len(data)) + data
        return self.call("POST", path, data, h)

    def run_true(self, sb):
        st, raw = self.envd(sb, "/process.Process/Start", {"process": {"cmd": "/bin/true"}, "stdin": False}, True)
        if st != 200 or b'"end"' not in raw:
            raise SystemExit("bench: Start answered %d: %s" % (st, raw[:300]))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(name, xs, base_name, base, label="hutch serve"):
    p50, p99, b50, b99 = pct(xs, .5), pct(xs, .99), pct(base, .5), pct(base, .99)
    print("%-8s %-36s p50 %8.2f ms  p99 %8.2f ms" % (name, label, p50 * 1e3, p99 * 1e3))
    print("%-8s %-36s p50 %8.2f ms  p99 %8.2f ms" % ("", base_name, b50 * 1e3, b99 * 1e3))
    print("%-8s %-36s p50 %8.2fx    p99 %8.2fx" % ("", "ratio", p50 / b50, p99 / b99))


def bench_create(cl, tmp, made):
    env = {**os.environ, "HUTCH_STATE_DIR": tmp + "/run-state", "HUTCH_RUN_DIR": tmp + "/run-run"}
    serve, run = [], []
    for i in range(WARMUP + N):  # interleaved: the same noise for both
        t = time.monotonic()
        sb = cl.create()
        made.append(sb[0])
        cl.run_true(sb)
        a = time.monotonic() - t
        cl.kill(sb[0])
        made.remove(sb[0])
        t = time.monotonic()
        subprocess.run([HUTCH, "run", "--", "/bin/true"], env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        b = time.monotonic() - t
        if i >= WARMUP:
            serve.append(a)
            run.append(b)
    report("create", serve, "hutch run -- /bin/true", run)


def bench_exec(cl, made):
    sb = cl.create()
    made.append(sb[0])
    serve, bare = [], []
    for i in range(WARMUP + N):
        t = time.monotonic()
        cl.run_true(sb)
        a = time.monotonic() - t
        t = time.monotonic()
        pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
        os.waitpid(pid, 0)
        b = time.monotonic() - t
        if i >= WARMUP:
            serve.append(a)
            bare.append(b)
    report("exec", serve, "bare posix_spawn+wait of /bin/true", bare)


def summary(xs):
    return "p50 %8.2f ms  p99 %8.2f ms" % (pct(xs, .5) * 1e3, pct(xs, .99) * 1e3)


def hutch_run_echo(env):
    t = time.monotonic()
    out = subprocess.run([HUTCH, "run", "--", "/bin/echo", "x"], env=env, check=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE).stdout
    if out != b"x\n":
        raise SystemExit("bench: hutch run printed %r" % out)
    return time.monotonic() - t


def docker_image():
    """A local image docker can run /bin/echo in, or None (no daemon, or no image: nothing is pulled)."""
    try:
        r = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                           capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    images = [i for i in r.stdout.decode().split() if "<none>" not in i] if r.returncode == 0 else []
    for want in ("debian", "ubuntu", "busybox", "alpine"):
        for i in images:
            if i.split(":")[0].endswith(want):
                return i
    return images[0] if images else None


def docker_round(image):
    t = time.monotonic()
    cid = subprocess.run(["docker", "run", "-d", image, "sleep", "600"], check=True,
                         capture_output=True).stdout.decode().strip()
    out = subprocess.run(["docker", "exec", cid, "echo", "x"], check=True, capture_output=True).stdout
    took = time.monotonic() - t
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    if out != b"x\n":
        raise SystemExit("bench: docker exec printed %r" % out)
    return took


def sdk_rounds(d, row, together):
    """serve_sdk.mjs against daemon d: its JSON (ms in a row, ms together, the wall of those)."""
    url = "http://127.0.0.1:%d" % d.port
    sdk_env = {**os.environ, "E2B_API_URL": url, "E2B_SANDBOX_URL": url, "E2B_API_KEY": KEY}
    r = subprocess.run(["node", os.path.join(ROOT, "bench/serve_sdk.mjs"), str(row), str(together),
                        str(WARMUP)], env=sdk_env, capture_output=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit("bench: serve_sdk.mjs failed: %s" % r.stderr.decode()[-2000:])
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def bench_sdk(d, tmp):
    node_sdk = os.path.join(ROOT, "tests/e2e/node_modules/e2b/package.json")
    if not os.path.exists(node_sdk):
        print("sdk      skipped: no E2B SDK in tests/e2e/node_modules (bash scripts/install-deps.sh)")
        return
    env = {**os.environ, "HUTCH_STATE_DIR": tmp + "/run-state", "HUTCH_RUN_DIR": tmp + "/run-run"}
    before = [hutch_run_echo(env) for _ in range(WARMUP + N // 2)][WARMUP:]
    got = sdk_rounds(d, N, TOGETHER)
    after = [hutch_run_echo(env) for _ in range(N - N // 2)]
    # the previous version's way: every create starts its own sandbox (no warm pool)
    os.makedirs(tmp + "/no-pool", mode=0o755)
    cold = Daemon(tmp + "/no-pool", HUTCH_POOL="0")
    try:
        cold.start()
        unpooled = [ms / 1e3 for ms in sdk_rounds(cold, N, 0)["row"]]
    finally:
        cold.stop()
    base = before + after
    row = [ms / 1e3 for ms in got["row"]]
    together = [ms / 1e3 for ms in got["together"]]
    print("sdk      %-36s %s" % ("SDK create + first output, in a row", summary(row)))
    print("sdk      %-36s %s  (all %d in %.0f ms)" % ("... %d at once" % TOGETHER, summary(together),
                                                     TOGETHER, got["together_wall"]))
    print("sdk      %-36s %s" % ("... without the pool (HUTCH_POOL=0)", summary(unpooled)))
    print("sdk      %-36s %s" % ("hutch run -- /bin/echo x", summary(base)))
    print("sdk      %-36s p50 %8.2fx    p99 %8.2fx" % ("ratio in a row / hutch run",
                                                       pct(row, .5) / pct(base, .5), pct(row, .99) / pct(base, .99)))
    image = docker_image()
    if image:
        dk = [docker_round(image) for _ in range(min(N, 20))]
        print("sdk      %-36s %s  (%d rounds)" % ("docker run -d + exec (%s)" % image, summary(dk), len(dk)))
        print("sdk      %-36s p50 %8.2fx" % ("ratio in a row / docker", pct(row, .5) / pct(dk, .5)))
    else:
        print("sdk      docker: skipped (no docker daemon answers, or it has no local image)")
    print("sdk      target: p50 in a row < 30 ms: %s" % ("met" if pct(row, .5) < 0.030 else "missed"))


def bench_pause(cl, made):
    sb = cl.create()
    made.append(sb[0])
    # a command that goes on running through every pause: its Start stream is left open
    c = http.client.HTTPConnection("127.0.0.1", cl.port, timeout=60)
    body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "while :; do sleep 0.01; done"]},
                       "stdin": False}).encode()
    c.request("POST", "/process.Process/Start", b"\0" + struct.pack(">I", len(body)) + body,
              {"E2b-Sandbox-Id": sb[0], "E2b-Sandbox-Port": "49983", "X-Access-Token": sb[1],
               "Content-Type": "application/connect+json"})
    if c.getresponse().status != 200:
        raise SystemExit("bench: the running command did not start")
    hdr = {"X-API-KEY": KEY, "Content-Type": "application/json"}
    pause, resume, get = [], [], []
    for i in range(WARMUP + N):
        t = time.monotonic()
        st, b = cl.call("POST", "/sandboxes/%s/pause" % sb[0], "", hdr)
        a = time.monotonic() - t
        if st != 204:
            raise SystemExit("bench: pause answered %d: %s" % (st, b[:200]))
        t = time.monotonic()
        st, b = cl.call("POST", "/sandboxes/%s/resume" % sb[0], json.dumps({"timeout": 3600}), hdr)
        r = time.monotonic() - t
        if st != 201:
            raise SystemExit("bench: resume answered %d: %s" % (st, b[:200]))
        t = time.monotonic()
        st, b = cl.call("GET", "/sandboxes/" + sb[0], None, hdr)
        g = time.monotonic() - t
        if st != 200:
            raise SystemExit("bench: get answered %d" % st)
        if i >= WARMUP:
            pause.append(a)
            resume.append(r)
            get.append(g)
    c.close()
    report("pause", pause, "GET /sandboxes/ID", get)
    report("resume", resume, "GET /sandboxes/ID", get)
    ok = max(pct(pause, .5), pct(pause, .99), pct(resume, .5), pct(resume, .99)) < 0.010
    print("pause    target: p50 and p99 of each < 10 ms: %s" % ("met" if ok else "missed"))


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def api_rounds(cl, sbs, rounds):
    """GET /sandboxes/ID and envd's List (through init) of sandboxes taken in turn."""
    get, lst = [], []
    hdr = {"X-API-KEY": KEY}
    for i in range(rounds):
        sb = sbs[(i * 7919) % len(sbs)]
        t = time.monotonic()
        st, _ = cl.call("GET", "/sandboxes/" + sb[0], None, hdr)
        get.append(time.monotonic() - t)
        t = time.monotonic()
        st2, _ = cl.envd(sb, "/process.Process/List", {}, False)
        lst.append(time.monotonic() - t)
        if st != 200 or st2 != 200:
            raise SystemExit("bench: GET %d, List %d" % (st, st2))
    return get, lst


def list_all(cl, rounds):
    out = []
    for _ in range(rounds):
        t = time.monotonic()
        st, b = cl.call("GET", "/v2/sandboxes?limit=1000", None, {"X-API-KEY": KEY})
        out.append(time.monotonic() - t)
        if st != 200:
            raise SystemExit("bench: list answered %d" % st)
    return out


def settle():
    time.sleep(3)


def bench_idle(d, cl, made):
    first = cl.create()
    made.append(first[0])
    base_get, base_list = api_rounds(cl, [first], 200)
    base_all = list_all(cl, 20)
    settle()
    mem0, rss0 = mem_available_kib(), rss_kib(d.proc.pid)
    sbs = [first]
    t = time.monotonic()
    for _ in range(IDLE_N - 1):
        sbs.append(cl.create())
        made.append(sbs[-1][0])
    took = time.monotonic() - t
    settle()
    mem1, rss1 = mem_available_kib(), rss_kib(d.proc.pid)
    held_get, held_list = api_rounds(cl, sbs, 500)
    held_all = list_all(cl, 20)
    n = IDLE_N - 1
    print("idle     %d sandboxes held (%d created in %.1f s)" % (IDLE_N, n, took))
    print("idle     %-36s %8.0f KiB" % ("MemAvailable drop a sandbox", (mem0 - mem1) / n))
    print("idle     %-36s %8.1f KiB" % ("the daemon's RSS a sandbox", (rss1 - rss0) / n))
    report("idle", held_get, "... with 1 sandbox", base_get, "GET /sandboxes/ID, %d held" % IDLE_N)
    report("", held_list, "... with 1 sandbox", base_list, "envd List, %d held" % IDLE_N)
    report("", held_all, "... with 1 sandbox", base_all, "GET /v2/sandboxes?limit=1000, %d held" % IDLE_N)
    t = time.monotonic()
    for sb in sbs:
        cl.kill(sb[0])
        made.remove(sb[0])
    print("idle     %-36s %8.1f s" % ("all killed", time.monotonic() - t))


def bench_restart(d, cl, made):
    sbs = []
    t = time.monotonic()
    for _ in range(RESTART_N):
        sbs.append(cl.create())
        made.append(sbs[-1][0])
    print("restart  %d sandboxes created in %.1f s" % (RESTART_N, time.monotonic() - t))
    d.kill9()
    t0 = time.monotonic()
    up = d.start()
    cl.c = None
    pending = list(sbs)
    while pending:  # each answers envd's List (the daemon holds it again) ...
        sb = pending.pop(0)
        st, _ = cl.envd(sb, "/process.Process/List", {}, False)
        if st != 200:
            pending.append(sb)
            time.sleep(0.001)
    listed = time.monotonic() - t0
    for sb in sbs:  # ... and a Stat, which init's files worker answers
        st, b = cl.envd(sb, "/filesystem.Filesystem/Stat", {"path": "/home/user"}, False)
        if st != 200:
            raise SystemExit("bench: Stat after the restart answered %d: %s" % (st, b[:200]))
    statted = time.monotonic() - t0
    d.stop()
    # the baseline: the same daemon starting with no sandboxes (its state dir fresh)
    empty = tempfile.mkdtemp(prefix="hutch-bench-serve-empty.")
    os.chmod(empty, 0o755)
    e = Daemon(empty)
    base = []
    for _ in range(5):
        base.append(e.start())
        e.stop()
    subprocess.run(["rm", "-rf", empty])
    b = statistics.median(base)
    d.start()
    cl.c = None
    print("restart  %-36s %8.1f ms (%.3f ms a sandbox)" % ("daemon up (/health)", up * 1e3, up * 1e3 / RESTART_N))
    print("restart  %-36s %8.1f ms" % ("all %d answer List" % RESTART_N, listed * 1e3))
    print("restart  %-36s %8.1f ms" % ("all %d answer a Stat through init" % RESTART_N, statted * 1e3))
    print("restart  %-36s %8.1f ms" % ("baseline: daemon up, no sandboxes", b * 1e3))
    print("restart  %-36s %8.2fx" % ("ratio (all answer List / baseline)", listed / b))
    print("restart  target: 1000 sandboxes answering List < 1 s after the restart (BENCH_RESTART_N=1000)")


def main():
    if os.geteuid() != 0:
        raise SystemExit("bench: hutch serve needs root")
    tmp = tempfile.mkdtemp(prefix="hutch-bench-serve.")
    os.chmod(tmp, 0o755)
    d = Daemon(tmp)
    made = []
    try:
        d.start()
        cl = Client(d.port)
        print("bench/serve.py: BENCH_N=%d BENCH_WARMUP=%d, %s" % (N, WARMUP, HUTCH))
        if "create" in WHICH:
            bench_create(cl, tmp, made)
        if "exec" in WHICH:
            bench_exec(cl, made)
        if "sdk" in WHICH:
            bench_sdk(d, tmp)
        if "pause" in WHICH:
            bench_pause(cl, made)
        if "idle" in WHICH:
            bench_idle(d, cl, made)
        if "restart" in WHICH:
            bench_restart(d, cl, made)
    except KeyboardInterrupt:
        print("bench: interrupted; cleaning up", file=sys.stderr)
    finally:
        if d.proc and d.proc.poll() is None:
            cl = Client(d.port)
            for sid in list(made):
                try:
                    cl.kill(sid)
                except OSError:
                    pass
        d.stop()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
