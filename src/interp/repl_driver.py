"""The part of a kernel (PROTOCOL.md) that drives a language's REPL in a child process: the R and
Java kernels (r_kernel.py, java_kernel.py) are this plus the language's own side.

The child runs the user's code with stdin /dev/null and fds 1 and 2 on pipes this process reads,
so anything that writes to them (the language's printing, a subprocess) comes back as `stdout` /
`stderr` messages. Requests and replies between this process and the child go over two more
pipes, which user code cannot reach by printing (it would have to find and write to them itself,
and then it only breaks its own context).

Requests are lines (a language without JSON reads them with what it has): a kind, the
execution's number SEQ, and fields hex-encoded, so that no field holds a space or a newline
("-" for an empty one, which a split at spaces could lose):

    exec SEQ CODE [NAME VALUE]...   run CODE with these env vars, then put them back
    stop SEQ                        (Java) interrupt the execution
    ack SEQ                         (R) a result was handled
    fence SEQ                       (R) the answer to done and again

Replies are frames:  KIND LEN1 LEN2 ...\\n  then the fields' bytes, LEN1 + LEN2 + ..., back to back

    ready INFO                      it can take an exec (INFO: a diagnostic line)
    result SEQ MAIN TEXT            a value (MAIN "1": the cell's value)
    display SEQ PNG                 (R) a plot, a PNG image
    error SEQ NAME VALUE TRACEBACK  the execution raised
    end SEQ                         the execution is over
    started SEQ / done SEQ / again SEQ   (R) see below

Output and replies travel on different pipes, so their order is only known for what was written
before a reply: the driver reads all the output there is before it handles a reply. A child
that goes on after a result (R: a cell's earlier values) waits for the ack of each result, so
that its later output cannot overtake the result.

SEQ is the execution's number (this process counts them): a reply whose SEQ is not the running
execution's is dropped, and so is a request line the child does not expect, so a late duplicate
on either side can never touch the next execution.

Interrupts by signal (R): R takes SIGINT as a flag that raises an interrupt at its next check,
wherever it is; one that came while R was reading a request would lose that request. So SIGINT
is forwarded only between the child's `started` (it has the request) and its `done` (the user's
code is over); one that comes before `started` waits for it. After `done` the driver sends no
more and answers with a fence: once R has read the fence, every SIGINT sent before it has
reached R, and R clears them before it reads another request. R says `again` when an interrupt
may have cost it the fence, and gets another (a spare fence is a line it skips).
"""
import array
import base64
import codecs
import ctypes
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time

CHUNK = 64 << 10           # at most this many bytes of output in one stdout/stderr message
RESULT_MAX = 16 << 20      # a value's text is cut here (a message line is at most 32 MiB)
HEADER_MAX = 4096          # a frame's header line; the child's are short
FIELD_MAX = 64 << 20       # one field of a frame from the child


def log(msg):
    """The kernel's own diagnostics (fd 2): the daemon logs them."""
    try:
        os.write(2, ("%s: %s\n" % (os.path.basename(sys.argv[0]), msg)).encode(errors="replace"))
    except OSError:
        pass


def pipe_holds(fd):
    """How many bytes wait in a pipe."""
    n = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, n)
    except OSError:
        return 0
    return n[0]


def request(kind, seq, *fields):
    """A request line: kind, SEQ, then each field (str) as the hex of its UTF-8, "-" if empty."""
    hexed = [f.encode("utf-8", "surrogatepass").hex() or "-" for f in fields]
    return (" ".join([kind, str(seq)] + hexed) + "\n").encode()


class FrameReader:
    """Frames from the child, parsed out of whatever its reply pipe gave so far."""

    def __init__(self):
        self.buf = bytearray()  # grows in place: a big value comes in many reads

    def feed(self, data):
        self.buf += data

    def next(self):
        """The next whole frame as (kind, [bytes fields]), or None until more arrives. Raises
        ValueError for a malformed one."""
        nl = self.buf.find(b"\n")
        if nl < 0:
            if len(self.buf) > HEADER_MAX:
                raise ValueError("a frame header longer than %d bytes" % HEADER_MAX)
            return None
        parts = self.buf[:nl].decode("ascii", "replace").split(" ")
        kind = parts[0]
        try:
            lens = [int(p) for p in parts[1:]]
        except ValueError:
            raise ValueError("a malformed frame header: %r" % self.buf[:min(nl, 200)])
        if not kind or any(n < 0 or n > FIELD_MAX for n in lens):
            raise ValueError("a malformed frame header: %r" % self.buf[:min(nl, 200)])
        end = nl + 1 + sum(lens)
        if len(self.buf) < end:
            return None
        fields, at = [], nl + 1
        for n in lens:
            fields.append(bytes(self.buf[at:at + n]))
            at += n
        del self.buf[:end]
        return kind, fields


class OutputStream:
    """One of the child's output pipes (its fd 1 or 2) and the message type it becomes.

    coalesce: the REPL writes a line in many small pieces (R writes "[1]", " 2", "\\n" apart), so
    pieces that follow each other within GAP seconds become one message (at most AGE seconds
    late, CHUNK bytes). Without it (Java, on a packet-mode pipe) every write is its own message,
    as IJava gives them."""
    GAP = 0.005
    AGE = 0.05

    def __init__(self, fd, type_, coalesce):
        self.fd = fd
        self.type = type_
        self.coalesce = coalesce
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.pending = b""
        self.first_at = self.last_at = 0.0
        self.open = True

    def read(self, emit):
        """Reads what one read gives (a whole packet on a packet pipe: CHUNK is more than a
        packet holds); returns how many bytes, 0 at EOF, None when there were none."""
        try:
            data = os.read(self.fd, CHUNK)
        except BlockingIOError:
            return None
        if not data:
            self.open = False
            self.flush(emit, final=True)
            return 0
        now = time.monotonic()
        if not self.pending:
            self.first_at = now
        self.last_at = now
        self.pending += data
        if not self.coalesce or len(self.pending) >= CHUNK:
            self.flush(emit)
        return len(data)

    def drain(self, emit):
        """What the pipe holds now, emitted: what the child wrote before a reply frame comes
        before that reply's message. Only that much, so that a process that never stops
        writing (a background one) cannot keep us here."""
        left = pipe_holds(self.fd)
        while self.open and left > 0:
            n = self.read(emit)
            if not n:
                break
            left -= n
        self.flush(emit)

    def due_in(self, now):
        """Seconds until the pending output must go out, or None if nothing is pending."""
        if not self.pending:
            return None
        return max(0.0, min(self.last_at + self.GAP, self.first_at + self.AGE) - now)

    def flush(self, emit, final=False):
        while self.pending:
            piece, self.pending = self.pending[:CHUNK], self.pending[CHUNK:]
            text = self.decoder.decode(piece, final=final and not self.pending)
            if text:
                emit({"type": self.type, "text": text})
        if final:
            tail = self.decoder.decode(b"", final=True)
            if tail:
                emit({"type": self.type, "text": tail})


class Driver:
    """One kernel: the protocol on fds 0 and 1 (moved away first), one child REPL.

    language:    the "ready" message's language
    argv:        a function of (request fd, reply fd) giving the child's argv; the fds are
                 inherited by the child under those numbers
    interrupt:   "signal" (SIGINT to the child's process group, as a terminal's Ctrl-C) or
                 "request" (a stop request: the child interrupts itself)
    coalesce:    see OutputStream
    packet:      the child's fd 1 and 2 are packet-mode pipes (O_DIRECT): each write is read
                 back alone, so its message boundaries are the program's own writes
    ack_results: the child waits for an ack line after each result frame

    The child has a session (and process group) of its own, so that a signal the daemon sends
    this kernel's group reaches the child only as this driver forwards it.
    """

    def __init__(self, language, argv, interrupt, coalesce, packet=False, ack_results=False):
        self.language = language
        self.ack_results = ack_results
        self.interrupt_by = interrupt
        self.proto_in, self.proto_out = self._move_protocol_fds()
        self.inbuf = b""
        self.in_read = 0           # bytes read from fd 0 so far
        self.inbuf_at = 0          # where in those inbuf starts
        self.seq = 0
        # (seq, request id, where its request line starts on fd 0) of the execution in progress
        self.running = None
        # where it is, for interrupts by signal: "sent" (the child may still be reading the
        # request), "started" (its code runs), "finishing" (done: no more signals); a child
        # interrupted by requests stays "sent", and takes a stop at any time
        self.phase = None
        self.interrupt_asked = False  # a SIGINT came in this execution
        self.errored = False          # it has had its error (PROTOCOL.md: at most one)
        # Each SIGINT is marked with how far fd 0's requests reached when it came (what was
        # read, and what waits in the pipe): it is for the execution whose request was written
        # before it, so that one sent right behind an execute interrupts it, and one sent just
        # before the next execute does not. The handler runs as it comes (it interrupts select);
        # the wakeup fd wakes the loop to act on it.
        self.sigint_marks = []
        self.sigint_r, self.sigint_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.sigint_w)
        signal.signal(signal.SIGINT, self._mark_sigint)
        # SIGPIPE stays ignored (Python's default): a dead child or daemon is an EPIPE here.

        req_r, self.req_w = os.pipe2(os.O_CLOEXEC)
        self.rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        flags = os.O_CLOEXEC | (os.O_DIRECT if packet else 0)
        out_r, out_w = os.pipe2(flags)
        err_r, err_w = os.pipe2(flags)
        self.started = time.monotonic()
        self.child = subprocess.Popen(argv(req_r, rep_w), stdin=subprocess.DEVNULL,
                                      stdout=out_w, stderr=err_w, pass_fds=(req_r, rep_w),
                                      start_new_session=True,
                                      preexec_fn=lambda: self._child_setup(interrupt))
        for fd in (req_r, rep_w, out_w, err_w):
            os.close(fd)
        self.outputs = [OutputStream(out_r, "stdout", coalesce),
                        OutputStream(err_r, "stderr", coalesce)]
        for s in self.outputs:
            os.set_blocking(s.fd, False)
        self.frames = FrameReader()
        # Readable when the child has exited: its reply pipe's EOF is not enough, since a
        # process it started in the background (R's system("... &")) may hold that pipe open.
        self.exited = os.pidfd_open(self.child.pid)

    def _mark_sigint(self, signum, frame):
        self.sigint_marks.append(self.in_read + pipe_holds(self.proto_in))

    @staticmethod
    def _child_setup(interrupt):
        """In the child, before its exec: it dies with this kernel (the daemon kills the whole
        command cgroup, but a kernel killed alone must not leave a busy REPL behind); and a
        child interrupted by requests ignores SIGINT, whoever sends it: a JVM started so keeps
        it ignored, where its default would be to exit."""
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if interrupt == "request":
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    @staticmethod
    def _move_protocol_fds():
        """fd 0 and 1 are the protocol's: keep them on high close-on-exec fds, and leave 0 on
        /dev/null and 1 on our diagnostics (fd 2), so nothing can write into the protocol by
        writing to fd 1."""
        proto_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 100)
        proto_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 100)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        sys.stdin = sys.stdout = None
        return proto_in, proto_out

    def emit(self, msg):
        line = (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(line)
        while view:
            try:
                view = view[os.write(self.proto_out, view):]
            except InterruptedError:
                continue
            except OSError:
                # the daemon went away: nobody to report to
                self.finish(0)

    def send_child(self, data):
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.req_w, view):]
        except OSError:
            self.child_gone("it stopped reading requests")

    def finish(self, status):
        """Ends the child (its whole process group) and this kernel."""
        try:
            os.close(self.req_w)  # the child's EOF: a clean exit if it is idle
        except OSError:
            pass
        try:
            self.child.wait(2)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.child.wait()
        os._exit(status)

    # --- the child's replies

    def child_gone(self, why):
        """The REPL died or broke the framing: the execution in progress (if any) gets an error
        and its end, and the kernel exits non-zero so that the daemon restarts the context."""
        for s in self.outputs:
            s.drain(self.emit)
        try:
            status = self.child.wait(1)
        except subprocess.TimeoutExpired:
            status = None
        text = "%s (the %s process %s)" % (why, self.language,
                                            "is still running" if status is None else
                                            "exited with status %s" % status)
        log(text)
        if self.running is not None:
            self.emit({"type": "error", "name": "KernelDied", "value": text, "traceback": text})
            self.emit({"type": "end_of_execution", "id": self.running[1]})
        self.finish(1)

    def on_frame(self, kind, fields):
        if kind == "ready":
            return
        if not fields:
            raise ValueError("a %s frame without its execution number" % kind)
        seq = int(fields[0])
        if self.running is None or seq != self.running[0]:
            return  # a late duplicate of an earlier execution's reply
        for s in self.outputs:
            s.drain(self.emit)
        text = lambda b: b.decode("utf-8", "replace")
        if kind == "result" and len(fields) == 3:
            value = fields[2]
            if len(value) > RESULT_MAX:
                value = value[:RESULT_MAX] + b"\n[... cut at %d bytes]" % RESULT_MAX
            self.emit({"type": "result", "text": text(value), "extra": {},
                       "is_main_result": fields[1] == b"1"})
            if self.ack_results:
                self.send_child(request("ack", seq))
        elif kind == "display" and len(fields) == 2:
            # IRkernel's plots: display data with the text R gives a plot
            self.emit({"type": "result", "text": "plot without title",
                       "png": base64.b64encode(fields[1]).decode(), "extra": {},
                       "is_main_result": False})
        elif kind == "error" and len(fields) == 4:
            if self.errored:
                return
            self.errored = True
            self.emit({"type": "error", "name": text(fields[1]), "value": text(fields[2]),
                       "traceback": text(fields[3])})
        elif kind == "end":
            self.emit({"type": "end_of_execution", "id": self.running[1]})
            self.running = self.phase = None
            self.interrupt_asked = self.errored = False
        elif kind == "started":
            if self.phase == "sent":
                self.phase = "started"
                if self.interrupt_asked:
                    self.interrupt()
        elif kind in ("done", "again"):
            self.phase = "finishing"
            self.send_child(request("fence", seq))
        else:
            raise ValueError("an unknown frame %r with %d fields" % (kind, len(fields)))

    def read_child(self):
        try:
            data = os.read(self.rep_r, 1 << 16)
        except BlockingIOError:
            raise
        except OSError as e:
            self.child_gone("its reply pipe failed: %s" % e)
        if not data:
            self.child_gone("it closed its reply pipe")
        self.frames.feed(data)
        while True:
            try:
                f = self.frames.next()
                if f is None:
                    return
                self.on_frame(*f)
            except ValueError as e:
                self.child_gone("it sent a bad frame: %s" % e)

    def wait_ready(self):
        """Until the child's ready frame; then our own ready message."""
        while True:
            r, _, _ = select.select([self.rep_r, self.exited] +
                                    [s.fd for s in self.outputs if s.open], [], [])
            if self.exited in r and self.rep_r not in r:
                self.child_gone("it ended before it was ready")
            for s in self.outputs:
                if s.fd in r and s.open:
                    # the REPL's start-up talk is no execution's output: diagnostics
                    try:
                        data = os.read(s.fd, CHUNK)
                    except BlockingIOError:
                        continue
                    if data:
                        log("start-up: " + data.decode(errors="replace").rstrip())
                    else:
                        s.open = False
            if self.rep_r in r:
                data = os.read(self.rep_r, 1 << 16)
                if not data:
                    self.child_gone("it ended before it was ready")
                self.frames.feed(data)
                try:
                    f = self.frames.next()
                except ValueError as e:
                    self.child_gone("it sent a bad frame: %s" % e)
                if f is not None:
                    if f[0] != "ready":
                        self.child_gone("its first frame was %r, not ready" % f[0])
                    log("ready in %.2f s: %s" % (time.monotonic() - self.started,
                                                 b"".join(f[1]).decode(errors="replace")))
                    self.emit({"type": "ready", "language": self.language})
                    return

    # --- requests

    def on_request(self, line, line_at):
        try:
            req = json.loads(line)
        except ValueError:
            log("a request that is not JSON, ignored: %r" % line[:200])
            return
        if not isinstance(req, dict) or req.get("type") != "execute":
            log("an unknown request, ignored: %r" % line[:200])
            return
        rid = req.get("id")
        if not isinstance(rid, str):
            log("an execute without a string id, ignored")
            return
        code = req.get("code")
        env_vars = req.get("env_vars") or {}
        if self.running is not None:
            # the daemon waits for an end_of_execution first; this one cannot run now
            self.emit({"type": "error", "name": "KernelError",
                       "value": "an execute came while another was running", "traceback": ""})
            self.emit({"type": "end_of_execution", "id": rid})
            return
        bad = None
        if not isinstance(code, str):
            bad = "the request's code is not a string"
        elif not isinstance(env_vars, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and "=" not in k and
                "\0" not in k + v for k, v in env_vars.items()):
            bad = "env_vars must map names (no '=' or NUL) to strings"
        if bad:
            self.emit({"type": "error", "name": "KernelError", "value": bad, "traceback": ""})
            self.emit({"type": "end_of_execution", "id": rid})
            return
        self.seq += 1
        fields = [code]
        for k, v in env_vars.items():
            fields += [k, v]
        self.running = (self.seq, rid, line_at)
        self.phase = "sent"
        self.send_child(request("exec", self.seq, *fields))

    def on_sigint(self):
        try:
            while os.read(self.sigint_r, 256):
                pass
        except BlockingIOError:
            pass
        marks, self.sigint_marks = self.sigint_marks, []
        if self.running is None or not any(m > self.running[2] for m in marks):
            return  # idle, or it came before this execution's request: ignored
        self.interrupt_asked = True
        if self.interrupt_by == "request" or self.phase == "started":
            self.interrupt()
        # "sent": forwarded at "started"; "finishing": the code is over already

    def interrupt(self):
        if self.interrupt_by == "request":
            self.send_child(request("stop", self.running[0]))
        else:
            try:
                os.killpg(self.child.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def run(self):
        self.wait_ready()
        while True:
            now = time.monotonic()
            dues = [d for d in (s.due_in(now) for s in self.outputs) if d is not None]
            fds = [self.proto_in, self.rep_r, self.sigint_r, self.exited] + \
                [s.fd for s in self.outputs if s.open]
            try:
                r, _, _ = select.select(fds, [], [], min(dues) if dues else None)
            except InterruptedError:
                continue
            for s in self.outputs:
                if s.fd in r and s.open:
                    s.read(self.emit)
            now = time.monotonic()
            for s in self.outputs:
                d = s.due_in(now)
                if d is not None and d <= 0:
                    s.flush(self.emit)
            if self.rep_r in r:
                self.read_child()
            if self.exited in r:
                # what it replied before it died counts: read the pipe out first
                os.set_blocking(self.rep_r, False)
                try:
                    while True:
                        self.read_child()
                except BlockingIOError:
                    pass
                self.child_gone("it exited")
            if self.proto_in in r:
                data = os.read(self.proto_in, 1 << 16)
                if not data:
                    log("end of requests: exiting")
                    self.finish(0)
                self.in_read += len(data)
                self.inbuf += data
                while b"\n" in self.inbuf:
                    line, self.inbuf = self.inbuf.split(b"\n", 1)
                    line_at, self.inbuf_at = self.inbuf_at, self.inbuf_at + len(line) + 1
                    if line.strip():
                        self.on_request(line, line_at)
            # after the requests, which the marks are measured against
            if self.sigint_r in r:
                self.on_sigint()
