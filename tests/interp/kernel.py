"""Drives one kernel (src/interp/PROTOCOL.md) outside any sandbox, for the kernels' own tests,
and prints TAP. A test script:

    from kernel import Kernel, Tap
    t = Tap()
    k = Kernel(["/usr/bin/python3", "src/interp/python_kernel.py"])
    msgs = k.execute("1+1")
    t.is_(k.results(msgs)[0]["text"], "2", "last expression's value")
    k.close()
    t.done()
"""
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid

LINE_MAX = 32 << 20


class KernelGone(Exception):
    pass


class Kernel:
    def __init__(self, argv, cwd=None, env=None, ready_timeout=30.0):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=env,
                                     start_new_session=True)
        self._buf = b""
        self.stderr_lines = []
        ready = self.next_message(ready_timeout)
        if ready is None or ready.get("type") != "ready":
            raise KernelGone("no ready message: %r; stderr: %s" % (ready, self.stderr_text()))
        self.language = ready.get("language")

    def stderr_text(self):
        try:
            os.set_blocking(self.proc.stderr.fileno(), False)
            data = self.proc.stderr.read() or b""
        except Exception:
            data = b""
        return data.decode(errors="replace")

    def next_message(self, timeout):
        """The next message (a dict), or None at the deadline or at EOF. Each comes with the
        monotonic time it was read, under the key "_at"."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
            if len(self._buf) > LINE_MAX and b"\n" not in self._buf:
                raise KernelGone("a line longer than %d bytes" % LINE_MAX)
        line, self._buf = self._buf.split(b"\n", 1)
        msg = json.loads(line)
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise KernelGone("not a message: %r" % line[:200])
        msg["_at"] = time.monotonic()
        return msg

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def start(self, code, env_vars=None):
        """Sends an execute; returns its id. Read its messages with until_end()."""
        rid = uuid.uuid4().hex
        req = {"type": "execute", "id": rid, "code": code}
        if env_vars is not None:
            req["env_vars"] = env_vars
        self.send(req)
        return rid

    def until_end(self, rid, timeout=30.0):
        """The execution's messages, its end_of_execution last; raises KernelGone at the
        deadline or when the kernel ends first."""
        deadline = time.monotonic() + timeout
        out = []
        while True:
            msg = self.next_message(max(0.0, deadline - time.monotonic()))
            if msg is None:
                raise KernelGone("no end_of_execution after %r; stderr: %s" %
                                 (out[-5:], self.stderr_text()))
            out.append(msg)
            if msg["type"] == "end_of_execution":
                if msg.get("id") != rid:
                    raise KernelGone("end_of_execution for id %r, not %r" % (msg.get("id"), rid))
                return out

    def execute(self, code, env_vars=None, timeout=30.0):
        return self.until_end(self.start(code, env_vars), timeout)

    def interrupt(self):
        self.proc.send_signal(signal.SIGINT)

    @staticmethod
    def of_type(msgs, type_):
        return [m for m in msgs if m["type"] == type_]

    @staticmethod
    def results(msgs):
        return Kernel.of_type(msgs, "result")

    @staticmethod
    def stdout(msgs):
        return "".join(m["text"] for m in msgs if m["type"] == "stdout")

    @staticmethod
    def stderr(msgs):
        return "".join(m["text"] for m in msgs if m["type"] == "stderr")

    @staticmethod
    def error(msgs):
        errs = Kernel.of_type(msgs, "error")
        return errs[0] if errs else None

    def close(self, timeout=10.0):
        """Closes its stdin and waits for it to exit; returns its exit status."""
        try:
            self.proc.stdin.close()
        except Exception:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None
        finally:
            for f in (self.proc.stdout, self.proc.stderr):
                f.close()


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag=None):
        self.n += 1
        if not cond:
            self.failed += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name), flush=True)
        if not cond and diag is not None:
            for line in str(diag).splitlines()[:30]:
                print("#   " + line, flush=True)
        return cond

    def is_(self, got, want, name):
        return self.ok(got == want, name, "got:  %r\nwant: %r" % (got, want))

    def like(self, got, needle, name):
        return self.ok(isinstance(got, str) and needle in got, name,
                       "got: %r\nwanted it to contain: %r" % (got, needle))

    def skip(self, name, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, why), flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        sys.exit(1 if self.failed else 0)
