"""src/interp/r_kernel.py on its own (PROTOCOL.md), outside any sandbox: values as IRkernel
shows them, state, streaming, errors, env_vars, interrupts, big output, the ends of a kernel.
One kernel serves the file; the tests that end a kernel start their own. TAP."""
import base64
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from kernel import Kernel, KernelGone, Tap  # noqa: E402

KERNEL = ["/usr/bin/python3", os.path.join(HERE, "..", "..", "src", "interp", "r_kernel.py")]

if shutil.which("Rscript", path=os.environ.get("PATH", "") + ":/usr/bin") is None:
    print("1..0 # SKIP R is not installed")
    sys.exit(0)


def start(**env):
    e = dict(os.environ, **env)
    return Kernel(KERNEL, env=e, cwd="/tmp")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def text_of(msgs):
    res = Kernel.results(msgs)
    return res[0]["text"] if res else None


def gone(pid, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(") ")[-1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


t = Tap()
t0 = time.monotonic()
t0_wall = time.time()
k = start(HUTCH_SANDBOX_VAR="supertest")
print("# R kernel ready in %.2f s" % (time.monotonic() - t0), flush=True)
t.is_(k.language, "r", "ready names the language r")

# --- values and state -------------------------------------------------------------------------

m = k.execute("1+1")
res = k.results(m)
t.is_([(r["text"], r["is_main_result"]) for r in res], [("[1] 2", True)],
      "1+1: one main result, text [1] 2 (R's print)")
t.is_(k.stdout(m), "", "a value is a result, not stdout")
t.is_(k.results(k.execute("x <- 40")), [], "an assignment shows nothing")
t.is_(k.results(k.execute("x + 2"))[0]["text"], "[1] 42", "a variable persists across executions")
m = k.execute("sq <- function(n) {\n  n * n\n}\ntotal <- 0\nfor (i in 1:4) {\n  total <- total + sq(i)\n}\ntotal")
t.is_(k.results(m)[0]["text"], "[1] 30", "multi-line code: a function, a loop, the last value")
t.is_(k.results(k.execute("sq(9)"))[0]["text"], "[1] 81", "a function persists")
m = k.execute("1\n'two'\ninvisible(3)")
t.is_([(r["text"], r["is_main_result"]) for r in k.results(m)],
      [("[1] 1", False), ('[1] "two"', False)],
      "each visible top-level value is a result; the main one only for the last expression")
m = k.execute('data.frame(a = 1:2, b = c("x", "y"))')
t.is_(k.results(m)[0]["text"], "  a b\n1 1 x\n2 2 y", "a data.frame prints as R prints it")
m = k.execute('print.money <- function(x, ...) cat("$", unclass(x), "\\n")\nstructure(5, class = "money")')
t.is_(text_of(m), "$ 5 ", "a value shows through the user's own print method")
m = k.execute('setClass("P", representation(v = "numeric"))\n'
              'setMethod("show", "P", function(object) cat("P of", object@v, "\\n"))\nnew("P", v = 3)')
t.is_(text_of(m), "P of 3 ", "an S4 object through its show method")
t.is_(k.results(k.execute('"caf\u00e9"'))[0]["text"], '[1] "caf\u00e9"', "UTF-8 text in a value")
t.is_(k.results(k.execute("getwd()"))[0]["text"], '[1] "/tmp"', "the kernel's cwd is R's")
t.is_(k.results(k.execute('Sys.getenv("HUTCH_SANDBOX_VAR")'))[0]["text"], '[1] "supertest"',
      "the kernel's env vars are R's (E2B: env vars on sandbox)")

# --- printing ---------------------------------------------------------------------------------

m = k.execute('print("Hello, World!")')
t.is_([x["text"] for x in k.of_type(m, "stdout")], ['[1] "Hello, World!"\n'],
      "print() is one stdout message, as E2B's test has it")
t.is_(k.results(m), [], "print()'s value is invisible")
m = k.execute('cat("a", "b\\n", sep = ""); cat("no newline")')
t.is_(k.stdout(m), "ab\nno newline", "cat() writes to stdout as written")
m = k.execute('message("to stderr"); warning("careful"); 5')
t.like(k.stderr(m), "to stderr\n", "message() goes to stderr")
t.like(k.stderr(m), "Warning message:\ncareful", "warning() goes to stderr, as R words it")
t.is_(k.results(m)[0]["text"], "[1] 5", "a warning does not stop the execution")
m = k.execute('system("echo from a child; echo child err >&2")')
t.is_((k.stdout(m), k.stderr(m)), ("from a child\n", "child err\n"),
      "a child process's stdout and stderr are captured at the fd level")
start_at = time.monotonic()
m = k.execute('cat("first\\n"); Sys.sleep(1.5); cat("second\\n")')
outs = k.of_type(m, "stdout")
t.ok(len(outs) == 2 and outs[0]["text"] == "first\n" and outs[0]["_at"] - start_at < 1.0
     and m[-1]["_at"] - outs[0]["_at"] > 1.0,
     "output is streamed as it is written, not held to the end",
     [(o["text"], round(o["_at"] - start_at, 3)) for o in outs])
m = k.execute('cat("before\\n"); 7; cat("after\\n")')
t.is_([x["type"] for x in m], ["stdout", "result", "stdout", "end_of_execution"],
      "output and results come in the order they happen")

# --- plots ------------------------------------------------------------------------------------

m = k.execute('plot(1:10, main = "one"); hist(c(1, 2, 2, 3)); 5')
res = k.results(m)
pngs = [r for r in res if "png" in r]
t.is_([(r.get("text"), r["is_main_result"]) for r in res],
      [("[1] 5", True), ("plot without title", False), ("plot without title", False)],
      "each plot is a display result after the value, as IRkernel's")
t.ok(len(pngs) == 2 and all(base64.b64decode(r["png"])[:8] == b"\x89PNG\r\n\x1a\n" for r in pngs),
     "a plot's png is bare base64 of a PNG")
t.is_(k.results(k.execute("invisible(7)")), [], "a plot is shown once")
t.ok(not os.path.exists("/tmp/Rplots.pdf") or os.path.getmtime("/tmp/Rplots.pdf") < t0_wall,
     "no Rplots.pdf is left in the cwd")

# --- errors -----------------------------------------------------------------------------------

m = k.execute('f <- function() stop("boom")\ng <- function() f()\ncat("ran\\n")\ng()\ncat("not reached\\n")')
e = k.error(m)
t.ok(e is not None and e["name"] == "ERROR" and e["value"] == "Error in f(): boom",
     "stop() in a function: an error named ERROR (IRkernel's), R's message", e)
t.ok(e is not None and "Traceback:" in e["traceback"] and "g()" in e["traceback"]
     and "f()" in e["traceback"], "its traceback names the calls", e)
t.is_(k.stdout(m), "ran\n", "output before the error is kept; the code after it does not run")
t.is_(m[-1]["type"], "end_of_execution", "an error still ends with end_of_execution")
t.is_(k.error(k.execute('stop("top")'))["value"], "Error: top",
      "stop() at the top level names no call, as R's REPL")
e = k.error(k.execute("x y"))
t.ok(e is not None and "unexpected symbol" in e["value"], "a syntax error is an error", e)
t.is_(k.results(k.execute("x"))[0]["text"], "[1] 40", "the session survives errors")
m = k.execute("print <- function(...) stop('mine')\nswitch <- function(...) stop('mine')\n"
              "paste <- function(...) stop('mine')\n41")
t.is_(text_of(m), "[1] 41", "the user's own print, switch, paste do not break the kernel")
k.execute("rm(print, switch, paste)")

# --- env_vars ---------------------------------------------------------------------------------

m = k.execute('Sys.getenv("FOO")', env_vars={"FOO": "bar"})
t.is_(k.results(m)[0]["text"], '[1] "bar"', "env_vars are set for the execution (E2B's test)")
m = k.execute('Sys.getenv("FOO", unset = "default")')
t.is_(k.results(m)[0]["text"], '[1] "default"', "and removed after it")
m = k.execute('Sys.getenv("HUTCH_SANDBOX_VAR")', env_vars={"HUTCH_SANDBOX_VAR": "overwrite"})
t.is_(k.results(m)[0]["text"], '[1] "overwrite"', "an env var of the sandbox is overwritten")
t.is_(k.results(k.execute('Sys.getenv("HUTCH_SANDBOX_VAR")'))[0]["text"], '[1] "supertest"',
      "and restored after it")
m = k.execute('system("echo $FOO")', env_vars={"FOO": "inherited"})
t.is_(k.stdout(m), "inherited\n", "a child process inherits the execution's env_vars")
m = k.execute('Sys.getenv("A")', env_vars={"A": "x = \"quoted\" 'q' \\ $HOME"})
t.is_(k.results(m)[0]["text"], '[1] "x = \\"quoted\\" \'q\' \\\\ $HOME"',
      "an env var's value is passed as it is, quotes and all")

m = k.execute('Sys.getenv("EMPTY", unset = "unset")', env_vars={"EMPTY": ""})
t.is_(text_of(m), '[1] ""', "an env var may be empty")
for code in ("", "   \n", '# a comment'):
    m = k.execute(code)
    t.ok(k.error(m) is None and k.results(m) == [], "code %r runs, shows nothing" % code, m)

# --- interrupts -------------------------------------------------------------------------------

rid = k.start('kept <- "yes"; cat("sleeping\\n"); Sys.sleep(30); cat("woke\\n")')
first = k.next_message(10)
t.is_(first and first.get("text"), "sleeping\n", "a long execution started")
sent = time.monotonic()
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(time.monotonic() - sent < 5, "SIGINT ends Sys.sleep(30) at once",
     "took %.1f s" % (time.monotonic() - sent))
e = k.error(m)
t.is_(e and e["name"], "KeyboardInterrupt", "an interrupt is an error named KeyboardInterrupt")
t.ok("woke" not in k.stdout(m), "the code after the interrupt does not run")
t.is_(k.results(k.execute("kept"))[0]["text"], '[1] "yes"', "the state is kept after an interrupt")
rid = k.start("n <- 0; repeat { n <- n + 1 }")
time.sleep(1)
k.interrupt()
m = k.until_end(rid, timeout=10)
t.is_(k.error(m) and k.error(m)["name"], "KeyboardInterrupt", "SIGINT ends a busy loop")
t.is_(k.results(k.execute("n > 0"))[0]["text"], "[1] TRUE", "its work so far is kept")
k.interrupt()
time.sleep(0.3)
m = k.execute("1 + 2")
t.ok(k.error(m) is None and k.results(m)[0]["text"] == "[1] 3",
     "SIGINT while idle is ignored: the next execution runs whole", m)

# SIGINTs that race with the end of an execution, at every moment around it: each is that
# execution's or none's, and never reaches the next one. (That one is sent once the kernel has
# surely taken the SIGINT: one that comes as the next request is already there may be taken as
# that request's, as the daemon's interrupts are meant.)
bad = []
for i in range(40):
    rid = k.start('Sys.sleep(0.01); cat("x")')
    time.sleep(random.uniform(0, 0.03))
    k.interrupt()
    k.until_end(rid, timeout=10)
    time.sleep(0.05)
    m = k.execute('1 + 1')
    if k.error(m) is not None or not k.results(m) or k.results(m)[0]["text"] != '[1] 2':
        bad.append(m)
t.ok(not bad, "40 SIGINTs racing the end of an execution reach no later execution", bad[:2])

# --- big output -------------------------------------------------------------------------------

m = k.execute('cat(strrep("x", 3e6)); cat("\\nend\\n")', timeout=60)
text = k.stdout(m)
t.is_((len(text), text[-5:]), (3000005, "\nend\n"), "3 MB of output arrives whole")
t.ok(all(len(x["text"].encode()) <= 64 << 10 for x in k.of_type(m, "stdout")),
     "in messages of at most 64 KiB")
m = k.execute("1:90000", timeout=60)
t.ok(k.results(m) and k.results(m)[0]["text"].endswith(" 90000"), "a big value's text arrives whole")

# --- the ends of a kernel ---------------------------------------------------------------------

repl = children(k.proc.pid)
status = k.close()
t.is_(status, 0, "the end of fd 0 ends the kernel, status 0")
t.ok(repl and all(gone(p) for p in repl), "and its R process", repl)

k2 = start()
repl = children(k2.proc.pid)
m = k2.execute('cat("bye\\n"); quit(status = 3)')
e = k2.error(m)
t.is_(e and e["name"], "KernelDied", "R exiting mid-execution: an error, then the end")
t.is_(k2.stdout(m), "bye\n", "with what it wrote before")
try:
    status = k2.proc.wait(10)
except Exception:
    status = None
t.ok(status not in (0, None), "and the kernel exits non-zero (the daemon restarts it)", status)
t.ok(all(gone(p) for p in repl), "leaving no R process behind", repl)
k2.close()

# A process R started in the background holds R's pipes open; R's end is seen all the same.
k3 = start()
pidfile = "/tmp/hutch-test-r-bg.%d" % os.getpid()
m = k3.execute('system("sleep 30 & echo $! > %s"); quit(status = 4)' % pidfile)
t.is_(k3.error(m) and k3.error(m)["name"], "KernelDied",
      "R exiting while its background child holds its pipes: the end comes")
try:
    status = k3.proc.wait(10)
except Exception:
    status = None
t.ok(status not in (0, None), "and the kernel exits", status)
try:
    with open(pidfile) as f:
        os.kill(int(f.read()), 9)
    os.unlink(pidfile)
except (OSError, ValueError):
    pass
k3.close()

t.done()
