"""The bash kernel (PROTOCOL.md): `python3 bash_kernel.py`, one persistent bash per context.

One `bash --noprofile --norc` runs for the context's life, so its cwd, variables, functions,
aliases and `set` options carry from one execution to the next. It reads its commands from a
pipe that only this kernel writes; each execution is one line on it:

    trap 'return 130' INT; . CELL_FILE </dev/null; { status=$?; restore env; printf MARK >FIFO; }

The cell is sourced, not eval'd, so it runs at the shell's top level (`declare` is global,
`return` ends the cell) with stdin /dev/null. Its fds 1 and 2 are pipes this kernel reads and
streams as stdout / stderr. The end of the execution is the mark on a FIFO of this kernel's
own (a random token per execution and `$?`): written after the cell, on another channel than
its output, so no output can fake it; a cell that closes fds cannot close it, since each mark
opens it again. When the mark arrives, the output pipes are drained (what the cell wrote before
is in them already) and the execution ends.

A failing last command is an error as E2B's bash context (bash_kernel) reports it: name "",
value the exit status. `exit` ends the shell: the execution reports it (an error when the status
is not 0) and a fresh shell takes its place. SIGINT while executing goes to the shell's process
group: the foreground command dies, and the shell's INT trap returns from the sourced cell
(from the innermost function, when one runs; the rest of the cell then goes on), state kept.
A cell that does not end within INTERRUPT_GRACE_S of it is killed with its shell, replaced.
"""
import codecs
import json
import os
import re
import secrets
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHUNK = 65536                  # output bytes per message at most
IDLE_OUTPUT_MAX = 1 << 20      # output of background jobs kept while idle, for the next execution
INTERRUPT_GRACE_S = 2.0        # under the daemon's 3 s, so the kernel replaces its own shell
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def diagnostic(text):
    try:
        os.write(2, ("bash_kernel: %s\n" % text).encode())
    except OSError:
        pass


def quote(s):
    """s as one bash word, with no expansion."""
    return "'" + s.replace("'", "'\\''") + "'"


class Protocol:
    """Fds 0 and 1 of the kernel, moved away (close-on-exec) so that no child has them."""

    def __init__(self):
        self.inp = os.dup(0)   # os.dup: not inheritable
        self.out = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        self.pending = b""

    def send(self, msg):
        data = (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(self.out, view):]


class Shell:
    """One bash, its output pipes and its process group."""

    def __init__(self):
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=out_w,
            stderr=err_w, start_new_session=True)  # its own group, for SIGINT and SIGKILL
        os.close(out_w)
        os.close(err_w)
        for fd in (self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.pidfd = os.pidfd_open(self.proc.pid)
        self.decoders = {
            self.out_r: codecs.getincrementaldecoder("utf-8")("replace"),
            self.err_r: codecs.getincrementaldecoder("utf-8")("replace"),
        }

    def run(self, line):
        """Sends one command line; False when the shell is gone."""
        try:
            self.proc.stdin.write(line.encode("utf-8", "surrogateescape") + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def interrupt(self, sig=signal.SIGINT):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def close(self):
        self.interrupt(signal.SIGKILL)  # with the jobs it left running
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self.proc.wait()
        for fd in (self.out_r, self.err_r, self.pidfd):
            os.close(fd)


class Kernel:
    def __init__(self):
        self.protocol = Protocol()
        self.dir = tempfile.mkdtemp(prefix="hutch-bash-")
        self.cell_path = os.path.join(self.dir, "cell")
        self.fifo_path = os.path.join(self.dir, "marks")
        os.mkfifo(self.fifo_path, 0o600)
        # Read end non-blocking; a write end of the kernel's own keeps it from reading EOF each
        # time a mark's writer closes it.
        self.fifo_r = os.open(self.fifo_path, os.O_RDONLY | os.O_NONBLOCK)
        self.fifo_keep = os.open(self.fifo_path, os.O_WRONLY)
        self.marks = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.protocol.inp, selectors.EVENT_READ, "requests")
        self.sel.register(self.fifo_r, selectors.EVENT_READ, "marks")
        # A SIGINT wakes the loop up, so that the interrupt's grace is timed from it.
        self.wakeup_r, wakeup_w = os.pipe()
        for fd in (self.wakeup_r, wakeup_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)
        self.sel.register(self.wakeup_r, selectors.EVENT_READ, "signal")
        self.shell = None
        self.current = None       # the execution running: dict(id, token, interrupted_at, ...)
        self.requests = []
        self.idle_output = []
        self.idle_size = 0
        self.start_shell()

    # --- the shell ---

    def start_shell(self):
        self.shell = Shell()
        for fd in (self.shell.out_r, self.shell.err_r):
            self.sel.register(fd, selectors.EVENT_READ, "output")
        self.sel.register(self.shell.pidfd, selectors.EVENT_READ, "shell exit")
        # The shell is ready when a first mark comes back.
        token = secrets.token_hex(16)
        self.shell.run("printf '%%s %%s\\n' %s 0 >%s" % (token, quote(self.fifo_path)))
        deadline = time.monotonic() + 30
        while True:
            for line in self.read_marks(wait=max(0.0, deadline - time.monotonic())):
                if line.split(" ")[0] == token:
                    return
            if time.monotonic() >= deadline or self.shell.proc.poll() is not None:
                raise SystemExit("bash_kernel: bash did not start")

    def read_marks(self, wait):
        if wait:
            select.select([self.fifo_r], [], [], wait)
        try:
            data = os.read(self.fifo_r, 4096)
        except BlockingIOError:
            data = b""
        self.marks += data
        lines = self.marks.split(b"\n")
        self.marks = lines.pop()
        return [line.decode("ascii", "replace") for line in lines]

    def drop_shell(self):
        for fd in (self.shell.out_r, self.shell.err_r, self.shell.pidfd):
            if fd in self.sel.get_map():
                self.sel.unregister(fd)
        self.shell.close()
        self.shell = None

    # --- output ---

    def deliver(self, kind, text):
        if not text:
            return
        if self.current is not None:
            self.protocol.send({"type": kind, "text": text})
        elif self.idle_size + len(text) <= IDLE_OUTPUT_MAX:
            self.idle_output.append((kind, text))
            self.idle_size += len(text)

    def read_output(self, fd, limit=None):
        """Reads what fd holds now (up to limit bytes); False at its end."""
        kind = "stdout" if fd == self.shell.out_r else "stderr"
        got = 0
        while limit is None or got < limit:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return True
            if not data:
                self.deliver(kind, self.shell.decoders[fd].decode(b"", final=True))
                return False
            got += len(data)
            self.deliver(kind, self.shell.decoders[fd].decode(data))
            if limit is None:
                return True
        return True

    def drain_output(self):
        """Everything the pipes hold now; a job that keeps writing does not hold the end."""
        for fd in (self.shell.out_r, self.shell.err_r):
            self.read_output(fd, limit=16 << 20)

    # --- executions ---

    def start_next(self):
        if self.current is not None or not self.requests:
            return
        req = self.requests.pop(0)
        held, self.idle_output, self.idle_size = self.idle_output, [], 0
        self.current = {"id": req["id"], "token": secrets.token_hex(16), "interrupted_at": None}
        for kind, text in held:
            self.protocol.send({"type": kind, "text": text})
        if self.shell is None:
            self.start_shell()
        with open(self.cell_path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(req["code"])
            if not req["code"].endswith("\n"):
                f.write("\n")
        set_env, restore_env = [], []
        env_vars = req.get("env_vars") or {}
        for i, (name, value) in enumerate(env_vars.items()):
            if not NAME_RE.match(name):
                self.deliver("stderr", "env var %r is not a bash variable name: not set\n" % name)
                continue
            saved, had = "__hutch_env_%d" % i, "__hutch_had_%d" % i
            set_env.append("if [[ -v %s ]]; then %s=1 %s=$%s; else %s=; fi; export %s=%s" % (
                name, had, saved, name, had, name, quote(str(value))))
            restore_env.append("if [[ -n $%s ]]; then %s=$%s; else unset %s; fi; unset %s %s" % (
                had, name, saved, name, had, saved))
        line = "{ %s trap 'return 130' INT; } 2>/dev/null; . %s </dev/null; " \
               "{ __hutch_status=$?; %s printf '%%s %%s\\n' %s \"$__hutch_status\" >%s; } 2>/dev/null" % (
                   "".join(s + "; " for s in set_env), quote(self.cell_path),
                   "".join(s + "; " for s in restore_env), self.current["token"],
                   quote(self.fifo_path))
        if not self.shell.run(line):
            self.shell_ended()

    def finish(self, status):
        cur = self.current
        if cur["interrupted_at"] is not None:
            self.protocol.send({"type": "error", "name": "ExecutionAborted",
                                "value": "Execution was aborted", "traceback": ""})
        elif status != 0:
            self.protocol.send({"type": "error", "name": "", "value": str(status), "traceback": ""})
        self.protocol.send({"type": "end_of_execution", "id": cur["id"]})
        self.current = None
        self.start_next()

    def on_marks(self):
        for line in self.read_marks(wait=0):
            parts = line.split(" ")
            if self.current is None or len(parts) != 2 or parts[0] != self.current["token"]:
                continue  # a stale or forged line
            self.drain_output()
            self.finish(int(parts[1]) if parts[1].isdigit() else 1)

    def shell_ended(self):
        """The shell exited (`exit` in a cell, a signal): its output is passed on, the
        execution ends, and a new shell is started when one is needed."""
        self.drain_output()
        status = self.shell.proc.wait()
        self.drop_shell()
        if self.current is None:
            diagnostic("the shell ended while idle (status %s)" % status)
            return
        self.deliver("stderr", "Restarting Bash: the shell exited (status %d); its variables, "
                     "functions and cwd are reset\n" % status)
        if self.current["interrupted_at"] is None and status < 0:
            status = 128 - status
        self.finish(status)

    def on_sigint(self, signum, frame):
        if self.current is None or self.shell is None:
            return  # idle: ignored
        if self.current["interrupted_at"] is None:
            self.current["interrupted_at"] = time.monotonic()
        self.shell.interrupt()

    # --- requests ---

    def on_requests(self):
        data = os.read(self.protocol.inp, CHUNK)
        if not data:
            return False
        self.protocol.pending += data
        lines = self.protocol.pending.split(b"\n")
        self.protocol.pending = lines.pop()
        for line in lines:
            try:
                req = json.loads(line)
            except ValueError:
                diagnostic("a request that is not JSON; ignored")
                continue
            if (isinstance(req, dict) and req.get("type") == "execute" and
                    isinstance(req.get("id"), str) and isinstance(req.get("code"), str)):
                self.requests.append(req)
            else:
                diagnostic("a request that is not an execute request; ignored")
        self.start_next()
        return True

    def loop(self):
        self.protocol.send({"type": "ready", "language": "bash"})
        while True:
            timeout = None
            cur = self.current
            if cur is not None and cur["interrupted_at"] is not None:
                timeout = max(0.0, cur["interrupted_at"] + INTERRUPT_GRACE_S - time.monotonic())
            events = self.sel.select(timeout)
            if not events and cur is not None and cur is self.current and self.shell is not None:
                # The cell ignored the interrupt: the shell goes, with its state.
                self.shell.interrupt(signal.SIGKILL)
                cur["interrupted_at"] = time.monotonic() + 3600
            for key, _ in events:
                if key.data == "requests":
                    if not self.on_requests():
                        return
                elif key.data == "marks":
                    self.on_marks()
                elif key.data == "signal":
                    os.read(self.wakeup_r, 256)
                elif key.data == "output" and self.shell is not None:
                    if not self.read_output(key.fd):
                        self.sel.unregister(key.fd)
                elif key.data == "shell exit" and self.shell is not None:
                    self.shell_ended()

    def close(self):
        if self.shell is not None:
            self.shell.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    kernel = Kernel()
    signal.signal(signal.SIGINT, kernel.on_sigint)
    try:
        kernel.loop()
    finally:
        kernel.close()


if __name__ == "__main__":
    main()
