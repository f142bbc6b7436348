#!/usr/bin/env python3
"""The daemon's benchmark (`make bench-serve`; bench/README.md, "hutch serve"): what E2B's API
costs a client of `hutch serve`, each figure next to a baseline measured in the same run.

  create   POST /v2/sandboxes until its 201, then a first command's output (Start `true` to its
           end event), against `hutch run -- /bin/true` (a whole throwaway sandbox).
  exec     Start `/bin/true` in a running sandbox until its end event, against a bare
           fork+exec+wait of /bin/true from this process.
  restart  N sandboxes live, the daemon killed with SIGKILL and started again: the time until all
           N answer again (an envd List each, and a filesystem Stat through init for each), against
           the same daemon's start with no sandboxes.

Environment: BENCH_SERVE="create exec restart" (which), BENCH_N (rounds, 100), BENCH_WARMUP (5),
BENCH_RESTART_N (sandboxes held for restart, 200; the issue's target is 1000), HUTCH (the binary,
build/hutch). Only loopback is used; every sandbox made is killed and the daemon stopped at the
end, also after Ctrl-C.
"""
import base64, http.client, json, os, signal, socket, statistics, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUTCH = os.environ.get("HUTCH", os.path.join(ROOT, "build/hutch"))
N = int(os.environ.get("BENCH_N", "100"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "5"))
RESTART_N = int(os.environ.get("BENCH_RESTART_N", "200"))
WHICH = os.environ.get("BENCH_SERVE", "create exec restart").split()
KEY = "bench-key-%d" % os.getpid()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Daemon:
    def __init__(self, tmp):
        self.tmp, self.port, self.proc = tmp, free_port(), None
        self.env = {**os.environ, "HUTCH_API_KEY": KEY, "HUTCH_STATE_DIR": tmp + "/state",
                    "HUTCH_RUN_DIR": tmp + "/run"}
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


def report(name, xs, base_name, base):
    p50, p99, b50, b99 = pct(xs, .5), pct(xs, .99), pct(base, .5), pct(base, .99)
    print("%-8s %-36s p50 %8.2f ms  p99 %8.2f ms" % (name, "hutch serve", p50 * 1e3, p99 * 1e3))
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
