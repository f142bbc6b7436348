#!/usr/bin/env python3
"""The code interpreter's benchmark (`make bench-interp`; bench/README.md, "code interpreter"):
what `@e2b/code-interpreter`'s calls cost against `hutch serve`, measured in the same run by
three daemons, in turn, each figure for:

  host     the host's zygote (the default for code-interpreter-v1 and one-shot runs: one per
           daemon, kernels forked into each sandbox, host_zygote.h)
  own      each sandbox's own zygote, the data stack imported in it (a daemon with
           HUTCH_ENTER_LIB="": how code-interpreter-v1 and one-shot runs were served before the
           host's zygote; base sandboxes still are, without the data stack)
  cold     no zygote (HUTCH_KERNEL_STUB="": every kernel starts cold)

  context  POST /contexts (python) until its 200: the kernel is ready; 0.3 s after the last
           create's end (untimed: the sandbox's spare kernel, forked after each create, is
           ready by then), then back to back
  contextjs  POST /contexts of javascript, then typescript, in a base sandbox of the host's
           daemon, 0.6 s apart: with the default cwd (the language's spare kernel, started after
           the last create, is taken) against a cwd of its own (a kernel started for it)
  runcode  POST /execute "1+1" on a warm context, to its last line
  error    POST /execute "1/0" twice in a new context each round: its first error against its
           second (the first once parsed the source of every file in the traceback)
  first    create a code-interpreter-v1 sandbox, then runCode returning a value with pandas
           imported (`import pandas as pd; pd.DataFrame({"a": [1]}).shape`), to its last line;
           with the zygote, the daemon's warm pool (HUTCH_POOL, pool.h) is on, and each round
           waits 3 s (untimed) for the pool's next sandbox
  firstjs  the same with a first runCode in javascript (its default context's kernel: node,
           running in a pool's sandbox; "cold" has no pool, so node starts at that runCode)
  memory   100 python contexts alive in one sandbox: the sandbox's memory (its cgroup's, without
           page cache) over them, per context, and the kernels' PSS
  oneshot  POST /run of `1+1` (hutch's one-shot runs: a fresh sandbox each, docs/API.md) at
           concurrency 1, 8 and 32: runs per second, against `hutch run --lang python --code
           'print(1+1)'` at the same concurrency; then both with `import pandas` first, at 8

Environment: BENCH_INTERP="context contextjs runcode error first firstjs memory oneshot"
(which), BENCH_N (rounds, 30), BENCH_WARMUP (3), BENCH_CONTEXTS (for memory, 100), HUTCH (the
binary, build/hutch). Only loopback is used; every sandbox made is killed and the daemons
stopped at the end.
"""
import json, os, sys, tempfile, time
import glob

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve as base  # noqa: E402  (Daemon, Client, pct)

N = int(os.environ.get("BENCH_N", "30"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "3"))
CONTEXTS = int(os.environ.get("BENCH_CONTEXTS", "100"))
WHICH = os.environ.get("BENCH_INTERP",
                       "context contextjs runcode error first firstjs memory oneshot").split()
ONESHOT_RUNS = int(os.environ.get("BENCH_ONESHOT_RUNS", "48"))


class Interp:
    def __init__(self, cl, template="base", memory_mb=None):
        req = {"templateID": template, "timeout": 3600}
        if memory_mb:
            req["memoryMB"] = memory_mb
        st, b = cl.call("POST", "/v2/sandboxes", json.dumps(req),
                        {"X-API-KEY": base.KEY, "Content-Type": "application/json"})
        if st != 201:
            raise SystemExit("bench: create answered %d: %s" % (st, b[:300]))
        d = json.loads(b)
        self.cl, self.id = cl, d["sandboxID"]
        self.h = {"E2b-Sandbox-Id": self.id, "E2b-Sandbox-Port": "49999",
                  "X-Access-Token": d["envdAccessToken"], "Content-Type": "application/json"}

    def context(self, language="python", cwd=None):
        req = {"language": language, **({"cwd": cwd} if cwd else {})}
        st, b = self.cl.call("POST", "/contexts", json.dumps(req), self.h)
        if st != 200:
            raise SystemExit("bench: POST /contexts answered %d: %s" % (st, b[:300]))
        return json.loads(b)["id"]

    def run(self, code, ctx=None, language=None, error=False):
        """Its results; with error, the execution must end in an error instead."""
        body = {"code": code}
        if ctx:
            body["context_id"] = ctx
        if language:
            body["language"] = language
        st, b = self.cl.call("POST", "/execute", json.dumps(body), self.h)
        lines = [json.loads(x) for x in b.split(b"\n") if x]
        if st != 200 or not lines or lines[-1].get("type") != "end_of_execution" or \
                any(x.get("type") == "error" for x in lines) != error:
            raise SystemExit("bench: execute answered %d: %s" % (st, b[:500]))
        return [x for x in lines if x.get("type") == "result"]

    def kill(self):
        self.cl.kill(self.id)


def sandbox_memory(sid):
    """Its cgroup's memory without page cache (v2 memory.stat anon+kernel, v1 rss), in bytes."""
    for stat in glob.glob("/sys/fs/cgroup/memory/hutch/%s/memory.stat" % sid) + \
            glob.glob("/sys/fs/cgroup/hutch/%s/memory.stat" % sid):
        fields = dict(line.split() for line in open(stat))
        if "total_rss" in fields:
            return int(fields["total_rss"]) + int(fields.get("total_mapped_file", 0))
        return int(fields.get("anon", 0)) + int(fields.get("kernel", 0))
    return 0


def kernels_pss(sid):
    total, n = 0, 0
    for procs in glob.glob("/sys/fs/cgroup/memory/hutch/%s/c*/cgroup.procs" % sid) + \
            glob.glob("/sys/fs/cgroup/hutch/%s/c*/cgroup.procs" % sid):
        for pid in open(procs).read().split():
            try:
                for line in open("/proc/%s/smaps_rollup" % pid):
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) << 10
                        n += 1
            except OSError:
                pass
    return total, n


def ms(xs, q):
    return base.pct(xs, q) * 1e3


def line(name, what, xs):
    print("%-8s %-40s p50 %8.1f ms  p99 %8.1f ms" % (name, what, ms(xs, .5), ms(xs, .99)))


WHAT = {"host": "the host's zygote", "own": "the sandbox's own zygote",
        "cold": "no zygote (cold kernels)"}


def compare(name, out):
    for i, (mode, xs) in enumerate(out.items()):
        line(name if i == 0 else "", WHAT[mode], xs)
    for mode in [m for m in out if m != "cold"]:
        print("%-8s %-40s p50 %8.2fx" % ("", "ratio %s / cold" % mode,
                                         base.pct(out[mode], .5) / base.pct(out["cold"], .5)))
    if "host" in out and "own" in out:
        print("%-8s %-40s p50 %8.2fx" % ("", "ratio host / own",
                                         base.pct(out["host"], .5) / base.pct(out["own"], .5)))


def bench_context(sbs):
    for name, pause in (("context", 0.3), ("context", 0.0)):
        out = {}
        for mode, sb in sbs.items():
            sb.run("1")  # the default context, and the zygote started with it
            time.sleep(4.0 if mode != "cold" else 0)  # the zygote ready (its imports)
            xs = []
            for i in range(WARMUP + N):
                time.sleep(pause)  # untimed: the spare kernel forked after the last create
                t = time.monotonic()
                ctx = sb.context()
                d = time.monotonic() - t
                sb.cl.call("DELETE", "/contexts/" + ctx, None, sb.h)
                if i >= WARMUP:
                    xs.append(d)
            out[mode] = xs
        print("%-8s %s" % (name, "a create 0.3 s after the last one's end" if pause else
                           "back to back: each create right after the last one's end"))
        compare("", out)


def bench_contextjs(sb):
    """javascript and typescript creates 0.6 s apart: with the default cwd (the spare started
    after the last create is taken) against a cwd of its own (/tmp: a kernel started for it, as
    every create was before the spares), in the same sandbox, alternated."""
    for lang in ("javascript", "typescript"):
        sb.context(lang)  # the first: its spare is wanted from now on
        out = {"spare": [], "own": []}
        for i in range(WARMUP + N):
            for kind in ("spare", "own"):
                time.sleep(0.6)  # untimed: the spare started after the last create, ready
                t = time.monotonic()
                ctx = sb.context(lang, None if kind == "spare" else "/tmp")
                d = time.monotonic() - t
                sb.cl.call("DELETE", "/contexts/" + ctx, None, sb.h)
                if i >= WARMUP:
                    out[kind].append(d)
        name = "contextjs" if lang == "javascript" else ""
        line(name, "%s, the spare taken" % lang, out["spare"])
        line("", "%s, a kernel started for it" % lang, out["own"])
        print("%-8s %-40s p50 %8.2fx" % ("", "ratio spare / started",
                                         base.pct(out["spare"], .5) / base.pct(out["own"], .5)))


def bench_runcode(sbs):
    out = {}
    for mode, sb in sbs.items():
        ctx = sb.context()
        xs = []
        for i in range(WARMUP + N * 3):
            t = time.monotonic()
            r = sb.run("1+1", ctx)
            d = time.monotonic() - t
            assert r and r[0].get("text") == "2", r
            if i >= WARMUP:
                xs.append(d)
        out[mode] = xs
    compare("runcode", out)


def bench_error(sbs):
    """A context's first error against its second, in a new context each round."""
    for mode, sb in sbs.items():
        firsts, seconds = [], []
        for i in range(WARMUP + N):
            ctx = sb.context()
            xs = []
            for _ in range(2):
                t = time.monotonic()
                sb.run("1/0", ctx, error=True)
                xs.append(time.monotonic() - t)
            sb.cl.call("DELETE", "/contexts/" + ctx, None, sb.h)
            if i >= WARMUP:
                firsts.append(xs[0])
                seconds.append(xs[1])
        line("error" if mode == "host" else "", "%s: the first" % WHAT[mode], firsts)
        line("", "%s: the second" % WHAT[mode], seconds)
        print("%-8s %-40s p50 %8.2fx" % ("", "ratio first / second",
                                         base.pct(firsts, .5) / base.pct(seconds, .5)))


FIRSTS = {  # round: (language, code, its value's text)
    "first": (None, 'import pandas as pd; pd.DataFrame({"a": [1]}).shape', "(1, 1)"),
    "firstjs": ("javascript", "[1, 2].map(x => x * 2).length", "2"),
}


def bench_first(clients, made, name="first"):
    language, code, want = FIRSTS[name]
    out = {}
    for mode, cl in clients.items():
        xs = []
        if mode != "cold":  # the warm pool is filled from the first create of the template
            Interp(cl, "code-interpreter-v1").kill()
        for i in range(max(3, N // 3)):
            time.sleep(3.0)  # the pool's next sandbox made and its zygote warm (not timed)
            t = time.monotonic()
            sb = Interp(cl, "code-interpreter-v1")
            made.append((cl, sb))
            r = sb.run(code, language=language)
            xs.append(time.monotonic() - t)
            assert r and r[0].get("text") == want, r
            sb.kill()
            made.remove((cl, sb))
        out[mode] = xs
    compare(name, out)


def bench_memory(sbs_of, made):
    for mode, (cl, template) in sbs_of.items():
        sb = Interp(cl, template, memory_mb=8192)  # 100 kernels started cold take 3 GiB
        made.append((cl, sb))
        sb.run("1")
        time.sleep(2.0)
        before = sandbox_memory(sb.id)
        ctxs = [sb.context() for _ in range(CONTEXTS)]
        for c in ctxs[:: max(1, CONTEXTS // 10)]:
            sb.run("x = 1", c)
        time.sleep(1.0)
        after = sandbox_memory(sb.id)
        pss, n = kernels_pss(sb.id)
        print("%-8s %-40s %8.1f MiB per context (%d contexts; the kernels' PSS %.1f MiB each)"
              % ("memory" if mode == "host" else "", WHAT[mode],
                 (after - before) / CONTEXTS / 2**20, CONTEXTS, pss / max(1, n) / 2**20))
        sb.kill()
        made.remove((cl, sb))


def oneshot_rate(port, concurrency, runs, code="1+1"):
    import concurrent.futures, http.client

    def one(_):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/run", json.dumps({"code": code}), {"X-API-KEY": base.KEY})
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 200 or b'"text":"2"' not in body:
            raise SystemExit("bench: /run answered %d: %s" % (r.status, body[:300]))

    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(runs)))
    return runs / (time.monotonic() - t)


def run_rate(concurrency, runs, tmp, code="print(1+1)"):
    import concurrent.futures, subprocess
    env = {**os.environ, "HUTCH_STATE_DIR": tmp + "/run-state", "HUTCH_RUN_DIR": tmp + "/run-run"}

    def one(_):
        p = subprocess.run([base.HUTCH, "run", "--lang", "python", "--code", code], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True)
        if p.returncode != 0 or p.stdout.strip() != b"2":
            raise SystemExit("bench: hutch run: %s" % p.stderr[:300])

    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(runs)))
    return runs / (time.monotonic() - t)


def bench_oneshot(daemons, tmp):
    for mode in ("host", "own"):
        oneshot_rate(daemons[mode].port, 1, 2)  # the pool wanted, and warm
    time.sleep(3)
    for conc in (1, 8, 32):
        runs = max(ONESHOT_RUNS, conc * 2)
        a = oneshot_rate(daemons["host"].port, conc, runs)
        o = oneshot_rate(daemons["own"].port, conc, runs)
        b = run_rate(conc, runs, tmp)
        print("%-8s %-40s host %6.2f runs/s, own %6.2f, hutch run --lang python %6.2f; "
              "host / hutch run %.2fx, host / own %.2fx"
              % ("oneshot" if conc == 1 else "", "concurrency %d (%d runs)" % (conc, runs), a, o,
                 b, a / b, a / o))
    # code that uses the data stack: `import pandas` first (the zygote has it imported; a fresh
    # python3 imports it, about 1.4 s of CPU)
    runs = max(16, ONESHOT_RUNS // 2)
    a = oneshot_rate(daemons["host"].port, 8, runs, "import pandas\n1+1")
    b = run_rate(8, runs, tmp, "import pandas\nprint(1+1)")
    print("%-8s %-40s host %6.2f runs/s, hutch run --lang python %6.2f; host / hutch run %.2fx"
          % ("", "import pandas, concurrency 8 (%d runs)" % runs, a, b, a / b))


def main():
    tmp = tempfile.mkdtemp(prefix="hutch-bench-interp.")
    os.chmod(tmp, 0o755)
    daemons, clients, made = {}, {}, []
    try:
        for mode in ("host", "own", "cold"):
            os.makedirs(tmp + "/" + mode)
            d = base.Daemon(tmp + "/" + mode)
            if mode == "own":
                d.env["HUTCH_ENTER_LIB"] = ""
            if mode == "cold":
                d.env["HUTCH_KERNEL_STUB"] = ""
                d.env["HUTCH_POOL"] = "0"
            d.start()
            daemons[mode] = d
            clients[mode] = base.Client(d.port)
        print("hutch serve, the code interpreter (%s; N=%d)" % (base.HUTCH, N))
        # code-interpreter-v1 in each: its kernels from the host's zygote, from the sandbox's own
        # (with the data stack: as before the host's), or cold
        templates = {m: (clients[m], "code-interpreter-v1") for m in clients}
        if "context" in WHICH or "runcode" in WHICH or "error" in WHICH:
            sbs = {m: Interp(c, t) for m, (c, t) in templates.items()}
            made += [(s.cl, s) for s in sbs.values()]
            if "context" in WHICH:
                bench_context(sbs)
            if "runcode" in WHICH:
                bench_runcode(sbs)
            if "error" in WHICH:
                bench_error(sbs)
        if "contextjs" in WHICH:
            sb = Interp(clients["host"])
            made.append((sb.cl, sb))
            bench_contextjs(sb)
        for name in FIRSTS:
            if name in WHICH:
                bench_first(clients, made, name)
        if "memory" in WHICH:
            bench_memory(templates, made)
        if "oneshot" in WHICH:
            bench_oneshot(daemons, tmp)
    finally:
        for cl, sb in made:
            try:
                sb.kill()
            except Exception:
                pass
        for d in daemons.values():
            d.stop()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
