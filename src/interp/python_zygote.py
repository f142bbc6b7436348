"""hutch's Python zygote: a warm process that forks Python kernels (python_kernel.py).

    /usr/bin/python3 python_zygote.py NAME [--preload MODULE,MODULE...]

One per sandbox, started by the daemon as a command of its own. It imports the kernel module (and
IPython with it: most of a kernel's 0.4 s start-up) and the modules to preload (the data stack
for code-interpreter-v1: another 0.7 s), then listens on the abstract unix socket
a unix socket. A new context's command is hutch-kernel-stub (src/kstub/main.c): it connects,
hands over its cwd, its environment and its fds 0, 1 and 2, and, once the daemon has allowed
that stub ("allow PID" on the zygote's stdin: the daemon started it; a connection from anything
else is closed unserved after 5 s), the zygote forks a child that
takes them and becomes the kernel (python_kernel.main()). The socket is /tmp/.hutch-zygote-NAME
in the sandbox's own /tmp (an abstract name cannot be reached across the Landlock domains that
each command is). The parent answers the stub with the
child's pid ("pid N"), and once it has reaped the child, with how it ended ("exit N" or
"signal N"). The child says its pid in its ready message; the daemon then moves it into the
context's command cgroup, so that killing the context takes it and all it starts.

What a forked kernel shares with its zygote, and why that is safe (src/interp/README.md,
"Zygotes"): the zygote lives in the sandbox it serves and nowhere else (the socket's name is in
the sandbox's own network namespace), so a kernel only ever shares memory with kernels of its own
sandbox; it has run no user code and holds no secret (the daemon gives it the sandbox's env
vars, as every command has them, and each child replaces its environment with its own
command's). Each child reseeds `random` (and numpy's global generator, when imported) from
os.urandom, so that two contexts do not draw the same numbers.

The zygote's stdin is the daemon's pipe: at its end (the daemon closed it) the zygote exits; the
kernels it forked live on, as the commands they are.

    /usr/bin/python3 python_zygote.py --host LIBHUTCH_ENTER [--preload MODULE,MODULE...]

The host's zygote (host_main below): one per daemon, outside every sandbox, as host root, serving
the kernels of all of them (src/interp/README.md, "The host's zygote", says why that is safe).
Its stdin is a SOCK_SEQPACKET socket to the daemon and nothing else reaches it. Each request is a
fork into one sandbox: the zygote makes the sandbox's pid namespace the one its children are born
in, forks, and takes its own back; the child takes the stub's fds 0-4 (pidfd_getfd; fd 4 holds
the stub's cwd and environment, which the zygote never sees), enters the
sandbox (hutch_enter_prepare in build/libhutch-enter.so: rlimits, cgroups, namespaces), confines
itself as any command is (hutch_enter_confine), takes the command's environment, and becomes
the kernel. The zygote, its parent, reaps it.
"""
import array
import ctypes
import fcntl
import os
import select
import signal
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import python_kernel  # noqa: E402  (IPython, and the kernel's code, warm in every fork)

_libc = ctypes.CDLL(None, use_errno=True)
MESSAGE_MAX = 64 << 10
ALLOW_SECONDS = 5.0  # how long an allowed stub, or a waiting handover, is kept
LOOP = {}  # what the main loop holds, for a fork to close
FDS = 3


def preload(modules):
    for name in modules:
        try:
            __import__(name)
        except Exception as e:  # a module the template lacks is no reason not to serve
            print("python_zygote: preload %s: %s" % (name, e), file=sys.stderr, flush=True)


def warm(modules):
    """What each fork finds done: the modules imported and the shell made, all of it out of
    the collector's sight."""
    preload(modules)
    python_kernel.make_shell()
    freeze()


def freeze():
    """What the imports made is moved out of the collector's sight (gc.freeze), so that no
    collection in a kernel walks it: each object a walk touches is a page the kernel copies from
    the zygote. Measured here: a forked kernel's ready and first execution about 2x sooner."""
    import gc
    gc.collect()
    gc.freeze()


def receive(conn):
    """The stub's cwd, environment and fds 0, 1, 2; None when it sent something else."""
    fds = array.array("i")
    data, ancdata, flags, _ = conn.recvmsg(MESSAGE_MAX, socket.CMSG_SPACE(FDS * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    fds = list(fds)
    for fd in fds:
        os.set_inheritable(fd, False)
    parts = data.split(b"\0")
    if len(fds) != FDS or flags & socket.MSG_CTRUNC or not parts or not parts[0].startswith(b"/"):
        for fd in fds:
            os.close(fd)
        return None
    env = {}
    for entry in parts[1:]:
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return os.fsdecode(parts[0]), env, fds


def matplotlib_again(env):
    """matplotlib read its configuration when the zygote imported it, from the zygote's
    environment: a fork takes it again from its own, as a kernel that imported it cold would.
    Its config and cache directories (MPLCONFIGDIR, else XDG's or HOME's), the user's style
    sheets there, and the first matplotlibrc of matplotlib's own order (the cwd's, MATPLOTLIBRC's,
    the config directory's) over the defaults the zygote read; the kernel's backend stays."""
    mpl = sys.modules.get("matplotlib")
    if mpl is None:
        return
    home = env.get("HOME") or "/"

    def xdg(var, default):
        return os.path.join(env.get(var) or os.path.join(home, default), "matplotlib")

    configdir = env.get("MPLCONFIGDIR") or xdg("XDG_CONFIG_HOME", ".config")
    cachedir = env.get("MPLCONFIGDIR") or xdg("XDG_CACHE_HOME", ".cache")
    mpl.get_configdir = lambda: configdir
    mpl.get_cachedir = lambda: cachedir
    style = sys.modules.get("matplotlib.style.core")
    if style is not None:
        style.USER_LIBRARY_PATHS[:] = [os.path.join(configdir, "stylelib")]
        style.reload_library()
    rc = env.get("MATPLOTLIBRC")
    if rc and os.path.isdir(rc):
        rc = os.path.join(rc, "matplotlibrc")
    for fname in (os.path.join(os.getcwd(), "matplotlibrc"), rc,
                  os.path.join(configdir, "matplotlibrc")):
        if fname and os.path.isfile(fname):
            backend = mpl.rcParams["backend"]
            mpl.rcParams.update(mpl.rc_params_from_file(fname, fail_on_error=False,
                                                        use_default_template=False))
            # the environment's over the file's, as matplotlib's own start has it; else the
            # kernel's as it was
            mpl.rcParams["backend"] = env.get("MPLBACKEND") or backend
            break


def environment_again(env):
    """The kernel was given env vars after its start (PROTOCOL.md, "environment"): what a start
    takes from them, taken again."""
    startup_again(env)
    matplotlib_again(env)


def take_environment(env):
    """In a fork: the command's environment as its own (and what Python and matplotlib take from
    it at a start), and randomness of its own, so that two kernels do not draw the same numbers."""
    os.environ.clear()
    os.environ.update(env)
    startup_again(env)
    matplotlib_again(env)
    python_kernel.environment_hook = environment_again
    import random
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def own_landlock_domain():
    """A Landlock domain of the child's own under the zygote's, scoped as hutch scopes every
    command's (src/jail/landlock.c): its code can then signal, or reach the abstract sockets of,
    neither the zygote nor the kernels of the other contexts, as a kernel started cold could not.
    Where the kernel has no such scopes (Landlock ABI < 6) nothing changes."""
    libc = _libc
    SYS_create_ruleset, SYS_restrict_self = 444, 446
    LANDLOCK_CREATE_RULESET_VERSION = 1
    abi = libc.syscall(SYS_create_ruleset, None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 6:
        return
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped (u64 each)
    attr = (ctypes.c_uint64 * 3)(0, 0, 1 | 2)  # SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    fd = libc.syscall(SYS_create_ruleset, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        if libc.syscall(SYS_restrict_self, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)


def become_kernel(cwd, env, fds, sockets, pipes):
    """In the child: the stub's fds as 0, 1, 2, its cwd and environment, fresh randomness, then
    the kernel. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # detached first: a socket object closing its fd later could close a reused number
        for sock in sockets:
            os.close(sock.detach())
        for fd in pipes:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        own_landlock_domain()
        os.chdir(cwd)
        take_environment(env)
    except BaseException as e:
        os.write(2, ("python_zygote: the kernel's start: %s\n" % e).encode(errors="replace"))
        os._exit(1)
    try:
        python_kernel.main()
        os._exit(0)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        os._exit(1)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print("usage: python_zygote.py NAME [--preload MODULE,...]", file=sys.stderr)
        return 2
    name = args[0]
    warm([m for m in args[2].split(",") if m] if len(args) >= 3 and args[1] == "--preload" else [])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    path = "/tmp/.hutch-zygote-" + name
    try:
        os.unlink(path)  # a zygote before us (restarted), or anything in its place
    except FileNotFoundError:
        pass
    old_mask = os.umask(0o077)  # only the user's processes (the stubs) may connect
    try:
        listener.bind(path)
    finally:
        os.umask(old_mask)
    listener.listen(64)
    os.write(1, b'{"type":"ready","language":"python"}\n')  # the daemon's sign to use it
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stubs = {}  # a child's pid -> the connection of the stub that stands for it
    allowed = {}  # a stub's pid the daemon allowed -> until when
    waiting = []  # handovers whose stub is not allowed yet: (conn, pid, handover, until)
    pending_input = b""
    LOOP.update(listener=listener, stubs=stubs, waiting=waiting, wake_r=wake_r, wake_w=wake_w)
    while True:
        try:
            ready, _, _ = select.select([listener, 0, wake_r], [], [], 0.2 if waiting else None)
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while stubs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = stubs.pop(pid, None)
            if conn is not None:
                how = ("signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status)
                       else "exit %d" % os.waitstatus_to_exitcode(status))
                try:
                    conn.send(how.encode())
                except OSError:
                    pass
                conn.close()
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:
                return 0  # the daemon let go of us
            lines = (pending_input + data).split(b"\n")
            pending_input = lines.pop()[-64:]
            for line in lines:
                word, _, value = line.partition(b" ")
                if word == b"allow" and value.isdigit():
                    allowed[int(value)] = time.monotonic() + ALLOW_SECONDS
        now = time.monotonic()
        for pid in [p for p, until in allowed.items() if until < now]:
            del allowed[pid]
        if listener in ready:
            try:
                conn, _ = listener.accept()
                peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))[0]
                handover = receive(conn)
            except OSError:
                continue
            if handover is not None:
                waiting.append((conn, peer, handover, now + ALLOW_SECONDS))
        # A handover is served once the daemon allowed its stub (it started it as a context's
        # command: "allow PID" on our stdin, which may come after the stub connected); one the
        # daemon never allows (a cell's own request) is closed unserved.
        still = []
        for conn, peer, handover, until in waiting:
            if allowed.pop(peer, None) is not None:
                fork_kernel(conn, handover)
            elif until < now:
                for fd in handover[2]:
                    os.close(fd)
                conn.close()
            else:
                still.append((conn, peer, handover, until))
        waiting[:] = still


def fork_kernel(conn, handover):
    """Forks the kernel for one handover; the parent answers the stub with its pid."""
    cwd, env, fds = handover
    others = [w for w in LOOP["waiting"] if w[0] is not conn]
    pid = os.fork()
    if pid == 0:
        # nothing of the zygote's, nor of the other stubs' handovers, stays open in the kernel
        sockets = [LOOP["listener"], conn, *LOOP["stubs"].values(), *(w[0] for w in others)]
        pipes = [LOOP["wake_r"], LOOP["wake_w"], *(fd for w in others for fd in w[2][2])]
        become_kernel(cwd, env, fds, sockets, pipes)
    for fd in fds:
        os.close(fd)
    LOOP["stubs"][pid] = conn
    try:
        conn.send(b"pid %d" % pid)
    except OSError:
        pass


# ---------- the host's zygote ----------

SYS_pidfd_getfd = 438
CLONE_NEWPID = 0x20000000
HOST_FDS_MAX = 2 + 1 + 16  # init's pidfd, the stub's, the cgroup2 directory, v1 "tasks" files
REPORT_SECONDS = 10.0


def _check(rc, what):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return rc


def _only_fds(keep):
    """Closes every fd but those in keep."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def host_request(data, fds):
    """fork ID NUL profile NUL writable NUL has_dir, with fds [init's pidfd, the stub's pidfd,
    (the cgroup2 directory), v1 "tasks" files...]; None when malformed. Nothing of a sandbox's
    own (its environment, its cwd) comes this way: the kernel reads them from the stub."""
    parts = data.split(b"\0")
    if len(parts) != 4 or not parts[0].startswith(b"fork ") or not parts[1].isdigit():
        return None
    has_dir = parts[3] == b"1"
    if len(fds) < 2 + has_dir:
        return None
    return {"id": parts[0][5:], "profile": int(parts[1]), "writable": parts[2] == b"1",
            "init": fds[0], "stub": fds[1], "dir": fds[2] if has_dir else -1,
            "v1": fds[2 + has_dir:]}


def read_stub_message(fd):
    """The stub's cwd NUL then NAME=VALUE NUL...: read whole from its pipe (at most 64 KiB)."""
    data = b""
    while len(data) <= MESSAGE_MAX:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    parts = data.split(b"\0")
    if len(data) > MESSAGE_MAX or not parts[0].startswith(b"/"):
        raise OSError("the stub's message is malformed")
    env = {}
    for entry in parts[1:]:
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return os.fsdecode(parts[0]), env


def host_enter(lib, req, report):
    """In the zygote's fork, born in the sandbox's pid namespace, still host root: the stub's fds,
    the sandbox's rlimits, cgroups and other namespaces, confined as any command is, the
    command's environment, fresh randomness; then the kernel. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        taken = []
        for n in range(5):  # the stub's stdin, stdout, stderr, its handover pipe, its message
            taken.append(_check(_libc.syscall(SYS_pidfd_getfd, ctypes.c_int(req["stub"]),
                                              ctypes.c_int(n), ctypes.c_uint(0)),
                                "take the stub's fd %d" % n))
        # Everything kept above the numbers it is about to take (fds 0-3), the rest closed.
        high = {}
        cgroup_fds = ([req["dir"]] if req["dir"] >= 0 else []) + req["v1"]
        for fd in taken + [req["init"], req["stub"], report] + cgroup_fds:
            high[fd] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
        _only_fds(set(high.values()))
        for n, fd in enumerate(taken[:4]):
            os.dup2(high[fd], n, inheritable=n < 3)  # fd 3, the handover pipe, is not inherited
        cwd, env = read_stub_message(high[taken[4]])
        req = dict(req, init=high[req["init"]], stub=high[req["stub"]],
                   dir=high[req["dir"]] if req["dir"] >= 0 else -1,
                   v1=[high[fd] for fd in req["v1"]])
        report = high[report]
        for fd in set(high.values()) - {req["init"], report, req["dir"], *req["v1"]}:
            os.close(fd)  # the stub's pidfd, and its fds (now 0-3)
        v1 = (ctypes.c_int * max(1, len(req["v1"])))(*req["v1"])
        msg = ctypes.create_string_buffer(512)
        # (It closes the v1 files. /proc is the sandbox's from here on.)
        if lib.hutch_enter_prepare(req["init"], req["dir"], v1, len(req["v1"]), msg,
                                   len(msg)) < 0:
            raise OSError(msg.value.decode(errors="replace"))
        os.close(req["init"])
        if req["dir"] >= 0:
            os.close(req["dir"])
        if lib.hutch_enter_confine(os.fsencode(cwd), req["profile"], int(req["writable"]), msg,
                                   len(msg)) < 0:
            raise OSError(msg.value.decode(errors="replace"))
        take_environment(env)
        os.write(3, b"%d\n" % os.getpid())  # to the stub: the kernel it stands for
        os.close(3)
        os.write(report, b"in\n")
        os.close(report)
    except BaseException as e:
        try:
            os.write(report, ("fail %s\n" % e).encode(errors="replace")[:500])
        finally:
            os._exit(1)
    try:
        python_kernel.main()
        os._exit(0)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        os._exit(1)


def startup_again(env):
    """What Python takes from the environment at its start, as a kernel started cold would have
    it from the kernel's (the zygote started with its own): PYTHONPATH's entries after the
    script's directory, PYTHONDONTWRITEBYTECODE, and the user's site-packages, found from HOME
    (`pip install --user` puts packages there), ahead of the system's."""
    extra = [p for p in env.get("PYTHONPATH", "").split(":") if p]
    sys.path[1:1] = [p for p in extra if p not in sys.path]
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    import site
    old = site.USER_SITE
    site.USER_BASE = site.USER_SITE = None
    if old in sys.path:
        sys.path.remove(old)
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE and os.path.isdir(user_site):
        before = len(sys.path)
        site.addsitedir(user_site)  # appended, with what its .pth files add
        added = sys.path[before:]
        del sys.path[before:]
        # where Python puts it: before the system's site-packages, so that it shadows them
        at = next((i for i, p in enumerate(sys.path)
                   if p.endswith(("dist-packages", "site-packages"))), len(sys.path))
        sys.path[at:at] = added


def fork_into(lib, req, own_pidns):
    """Forks with the sandbox's pid namespace as the one for our children (setns, then back):
    the child is born a process of the sandbox, and there is one fork, not two (a fork of this
    process costs 15-20 ms here, most of it the page tables). Returns the child's pid (as the host
    sees it) and the read end of its report pipe."""
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        _check(_libc.setns(req["init"], CLONE_NEWPID), "enter the sandbox's pid namespace")
    except OSError:
        os.close(r)
        os.close(w)
        raise
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        os.close(r)
        host_enter(lib, req, w)
    # A zygote whose children would go on being born in a sandbox must not go on.
    if _libc.setns(own_pidns, CLONE_NEWPID) < 0:
        os.write(2, b"python_zygote: cannot return to its own pid namespace\n")
        os._exit(1)
    os.close(w)
    if pid < 0:
        os.close(r)
        raise OSError("fork into the sandbox's pid namespace failed")
    return pid, r


def host_main(lib_path, modules):
    _only_fds({0, 1, 2})  # nothing of the daemon's but our socket and its stderr
    lib = ctypes.CDLL(lib_path, use_errno=True)
    lib.hutch_enter_prepare.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.hutch_enter_confine.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_char_p, ctypes.c_size_t]
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    warm(modules)
    daemon = socket.socket(fileno=0)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    daemon.send(b"ready")
    reports = {}  # a report pipe's read end -> [request id, bytes so far, until]
    while True:
        timeout = 0.5 if reports else None
        try:
            ready, _, _ = select.select([daemon, wake_r, *reports], [], [], timeout)
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            while True:  # every kernel it forked, as it ends
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
        for fd in [f for f in ready if isinstance(f, int) and f in reports]:
            entry = reports[fd]
            data = os.read(fd, 1024)
            entry[1] += data
            if data and len(entry[1]) < 4096:
                continue
            del reports[fd]
            os.close(fd)
            host_answer(daemon, entry[0], entry[1])
        now = time.monotonic()
        for fd in [f for f, e in reports.items() if e[2] < now]:
            entry = reports.pop(fd)
            os.close(fd)
            # gone before the answer: the stub then starts the kernel cold, on the same pipes
            try:
                os.kill(entry[3], signal.SIGKILL)
            except OSError:
                pass
            host_answer(daemon, entry[0], entry[1] + b"\nfail no answer in time")
        if daemon in ready:
            fds = array.array("i")
            try:
                data, ancdata, flags, _ = daemon.recvmsg(
                    MESSAGE_MAX, socket.CMSG_SPACE(HOST_FDS_MAX * fds.itemsize))
            except OSError:
                continue
            if not data:
                return 0  # the daemon let go of us
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            fds = list(fds)
            for fd in fds:
                os.set_inheritable(fd, False)
            req = None if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC) else host_request(data, fds)
            if req is None:
                word = data.split(b"\0", 1)[0]
                rid = word[5:] if word.startswith(b"fork ") else b"?"
                daemon.send(b"fail " + rid[:64] + b" a malformed request")
            else:
                try:
                    pid, r = fork_into(lib, req, own_pidns)
                    reports[r] = [req["id"], b"pid %d\n" % pid, now + REPORT_SECONDS, pid]
                except OSError as e:
                    host_answer(daemon, req["id"], ("fail %s" % e).encode(errors="replace"))
            for fd in fds:
                os.close(fd)


def host_answer(daemon, rid, text):
    """"pid ID HOSTPID" once the kernel is in, else "fail ID why"."""
    pid, failure = None, None
    for line in text.split(b"\n"):
        if line.startswith(b"pid ") and line[4:].isdigit():
            pid = line[4:]
        elif line.startswith(b"fail ") and failure is None:
            failure = line[5:]
    inside = b"\nin" in b"\n" + text
    if pid is not None and inside and failure is None:
        answer = b"pid " + rid + b" " + pid
    else:
        answer = b"fail " + rid + b" " + (failure or b"the fork ended without entering")
    try:
        daemon.send(answer[:4096])
    except OSError:
        pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--host"] and len(sys.argv) >= 3:
        mods = sys.argv[4].split(",") if sys.argv[3:4] == ["--preload"] and len(sys.argv) > 4 else []
        sys.exit(host_main(sys.argv[2], [m for m in mods if m]))
    sys.exit(main())
