"""src/interp/java_kernel.py on its own (PROTOCOL.md), outside any sandbox: values as IJava
shows them, state, streaming, errors, env_vars (as E2B's Java contexts give them: system
properties, and System.getenv too), interrupts, big output, the ends of a kernel. jshell is slow
to start: one kernel serves the file, and one more is ended by System.exit. TAP."""
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from kernel import Kernel, Tap  # noqa: E402

KERNEL = ["/usr/bin/python3", os.path.join(HERE, "..", "..", "src", "interp", "java_kernel.py")]

if shutil.which("jshell", path=os.environ.get("PATH", "") + ":/usr/bin") is None:
    print("1..0 # SKIP jshell is not installed")
    sys.exit(0)


def start(**env):
    return Kernel(KERNEL, env=dict(os.environ, **env), cwd="/tmp", ready_timeout=60)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


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


def text(msgs):
    res = Kernel.results(msgs)
    return res[0]["text"] if res else None


t = Tap()
t0 = time.monotonic()
k = start(HUTCH_SANDBOX_VAR="supertest")
ready_s = time.monotonic() - t0
print("# Java kernel ready in %.2f s" % ready_s, flush=True)
t.is_(k.language, "java", "ready names the language java")
t.ok(ready_s < 20, "it starts in under 20 s", "%.1f s" % ready_s)

# --- values and state -------------------------------------------------------------------------

m = k.execute("1+1")
t.is_([(r["text"], r["is_main_result"]) for r in k.results(m)], [("2", True)],
      "1+1: one main result, text 2")
t.is_(k.results(k.execute("int x = 40;")), [], "a declaration shows nothing")
t.is_(text(k.execute("x + 2")), "42", "a variable persists across executions")
t.is_(k.results(k.execute("x = 41")), [], "an assignment shows nothing (as IJava)")
t.is_(text(k.execute("x")), "41", "a variable's value")
m = k.execute("int square(int n) {\n    return n * n;\n}\nint total = 0;\n"
              "for (int i = 1; i <= 4; i++) {\n    total += square(i);\n}\ntotal")
t.is_(text(m), "30", "multi-line code: a method, a loop, the last expression")
t.is_(text(k.execute("square(9)")), "81", "a method persists")
k.execute("class Point {\n    final int x, y;\n    Point(int x, int y) { this.x = x; this.y = y; }\n"
          "    public String toString() { return \"(\" + x + \", \" + y + \")\"; }\n}")
t.is_(text(k.execute("new Point(1, 2)")), "(1, 2)", "a class persists; a value shows as toString()")
k.execute("import java.time.Duration;")
t.is_(text(k.execute("Duration.ofSeconds(90)")), "PT1M30S", "an import persists")
t.is_(text(k.execute("List.of(1, 2, 3)")), "[1, 2, 3]", "jshell's default imports: java.util.*")
t.is_(text(k.execute('BigInteger.TWO.pow(70) + " " + Pattern.matches("a+", "aaa")')),
      "1180591620717411303424 true", "java.math.*, java.util.regex.*")
t.is_(text(k.execute('"a \\"quoted\\"\\tword"')), 'a "quoted"\tword',
      "a String shows without its quotes or escapes, as IJava shows it")
t.is_(text(k.execute("'c'")), "c", "a char too")
t.is_(text(k.execute('Object o = "held as an Object"; o')), "held as an Object",
      "and a String held as an Object")
t.is_(k.results(k.execute("(String) null")), [], "null shows nothing (as IJava)")
t.is_(text(k.execute('"caf\u00e9"')), "caf\u00e9", "UTF-8 text in a value")
t.is_(text(k.execute('System.getProperty("user.dir")')), "/tmp", "user.dir is the kernel's cwd")
t.is_(text(k.execute('System.getProperty("HUTCH_SANDBOX_VAR")')), "supertest",
      "the kernel's env vars are system properties (E2B: env vars on sandbox)")
t.is_(text(k.execute('System.getenv("HUTCH_SANDBOX_VAR")')), "supertest", "and env vars")

# --- printing ---------------------------------------------------------------------------------

m = k.execute('System.out.println("Hello, World!")')
t.is_([x["text"] for x in k.of_type(m, "stdout")], ["Hello, World!", "\n"],
      "println's text and its newline come as two stdout messages, as IJava's (E2B's test)")
t.is_(k.results(m), [], "a void call shows nothing")
m = k.execute('System.err.println("to stderr"); System.out.print("no newline");')
t.is_((k.stdout(m), k.stderr(m)), ("no newline", "to stderr\n"), "System.err is stderr")
m = k.execute('new ProcessBuilder("sh", "-c", "echo from a child; echo child err >&2")'
              '.inheritIO().start().waitFor()')
t.is_((k.stdout(m), k.stderr(m), text(m)), ("from a child\n", "child err\n", "0"),
      "a child process's stdout and stderr are captured at the fd level")
start_at = time.monotonic()
m = k.execute('System.out.println("first"); Thread.sleep(1500); System.out.println("second");')
outs = [o for o in k.of_type(m, "stdout") if o["text"] != "\n"]
t.ok(len(outs) == 2 and outs[0]["text"] == "first" and outs[0]["_at"] - start_at < 1.0
     and m[-1]["_at"] - outs[0]["_at"] > 1.0,
     "output is streamed as it is written, not held to the end",
     [(o["text"], round(o["_at"] - start_at, 3)) for o in outs])
m = k.execute('System.out.println("before"); 7')
t.is_([x["type"] for x in m], ["stdout", "stdout", "result", "end_of_execution"],
      "output comes before the value")

# --- errors -----------------------------------------------------------------------------------

m = k.execute('System.out.println("ran");\nint boom() { return 1 / 0; }\nboom();\n'
              'System.out.println("not reached");')
e = k.error(m)
t.ok(e is not None and e["name"] == "java.lang.ArithmeticException" and e["value"] == "/ by zero",
     "an exception: its class and message", e)
t.ok(e is not None and "java.lang.ArithmeticException: / by zero" in e["traceback"]
     and "boom" in e["traceback"], "its stack trace", e)
t.is_(k.stdout(m), "ran\n", "output before the exception is kept; the code after it does not run")
t.is_(m[-1]["type"], "end_of_execution", "an error still ends with end_of_execution")
e = k.error(k.execute('throw new IllegalStateException("bad state");'))
t.is_(e and (e["name"], e["value"]), ("java.lang.IllegalStateException", "bad state"),
      "a thrown exception")
e = k.error(k.execute('int z = "text";'))
t.ok(e is not None and e["name"] == "CompilationException" and "incompatible types" in e["value"],
     "a compile error is a CompilationException with javac's message", e)
e = k.error(k.execute("undefinedThing + 1"))
t.ok(e is not None and "cannot find symbol" in e["value"], "an unknown name too", e)
e = k.error(k.execute("void open() {"))
t.is_(e and e["name"], "IncompleteSourceException", "incomplete code")
t.is_(text(k.execute("x")), "41", "the session survives errors")

# --- env_vars ---------------------------------------------------------------------------------

m = k.execute('System.getProperty("FOO")', env_vars={"FOO": "bar"})
t.is_(text(m), "bar", "env_vars are system properties for the execution (E2B's test)")
t.is_(text(k.execute('System.getProperty("FOO", "default")')), "default", "removed after it")
t.is_(text(k.execute('System.getenv("FOO")', env_vars={"FOO": "bar"})), "bar",
      "and System.getenv sees them")
t.is_(text(k.execute('System.getenv().getOrDefault("FOO", "default")')), "default",
      "and not after")
m = k.execute('System.getProperty("HUTCH_SANDBOX_VAR")', env_vars={"HUTCH_SANDBOX_VAR": "overwrite"})
t.is_(text(m), "overwrite", "an env var of the sandbox is overwritten")
t.is_(text(k.execute('System.getProperty("HUTCH_SANDBOX_VAR") + " " + System.getenv("HUTCH_SANDBOX_VAR")')),
      "supertest supertest", "and restored after it")
m = k.execute('var pb = new ProcessBuilder("sh", "-c", "echo $FOO"); pb.environment(); '
              'pb.inheritIO().start().waitFor();', env_vars={"FOO": "inherited"})
t.is_(k.stdout(m), "inherited\n", "a ProcessBuilder whose environment() was read passes them on")

m = k.execute('System.getenv("EMPTY") + "|" + System.getProperty("EMPTY")', env_vars={"EMPTY": ""})
t.is_(text(m), '|', "an env var may be empty")
for code in ("", "   \n", '// a comment'):
    m = k.execute(code)
    t.ok(k.error(m) is None and k.results(m) == [], "code %r runs, shows nothing" % code, m)

# --- interrupts -------------------------------------------------------------------------------

rid = k.start('String kept = "yes"; System.out.println("sleeping"); Thread.sleep(30000); '
              'System.out.println("woke");')
first = k.next_message(10)
t.is_(first and first.get("text"), "sleeping", "a long execution started")
sent = time.monotonic()
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(time.monotonic() - sent < 5, "SIGINT ends Thread.sleep(30000) at once",
     "took %.1f s" % (time.monotonic() - sent))
e = k.error(m)
t.is_(e and e["name"], "KeyboardInterrupt", "an interrupt is an error named KeyboardInterrupt")
t.ok("woke" not in k.stdout(m), "the code after the interrupt does not run")
t.is_(text(k.execute("kept")), "yes", "the state is kept after an interrupt")
rid = k.start("long n = 0; while (true) { n++; }")
time.sleep(1.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
t.is_(k.error(m) and k.error(m)["name"], "KeyboardInterrupt", "SIGINT ends an infinite loop")
t.is_(text(k.execute("n > 0")), "true", "its work so far is kept")
k.interrupt()
time.sleep(0.3)
m = k.execute("1 + 2")
t.ok(k.error(m) is None and text(m) == "3", "SIGINT while idle is ignored", m)

# SIGINTs that race with the end of an execution, at every moment around it: each is that
# execution's or none's, and never reaches the next one. (That one is sent once the kernel has
# surely taken the SIGINT: one that comes as the next request is already there may be taken as
# that request's, as the daemon's interrupts are meant.)
bad = []
for i in range(40):
    rid = k.start('Thread.sleep(10); System.out.print("x");')
    time.sleep(random.uniform(0, 0.03))
    k.interrupt()
    k.until_end(rid, timeout=10)
    time.sleep(0.05)
    m = k.execute('1 + 1')
    if k.error(m) is not None or not k.results(m) or k.results(m)[0]["text"] != '2':
        bad.append(m)
t.ok(not bad, "40 SIGINTs racing the end of an execution reach no later execution", bad[:2])

# --- big output -------------------------------------------------------------------------------

m = k.execute('System.out.print("x".repeat(3000000)); System.out.print("\\nend\\n");', timeout=60)
out = k.stdout(m)
t.is_((len(out), out[-5:]), (3000005, "\nend\n"), "3 MB of output arrives whole")
t.ok(all(len(x["text"].encode()) <= 64 << 10 for x in k.of_type(m, "stdout")),
     "in messages of at most 64 KiB")
m = k.execute('"y".repeat(2000000)', timeout=60)
t.is_(len(text(m) or ""), 2000000, "a big value's text arrives whole")

# --- the ends of a kernel ---------------------------------------------------------------------

jvm = children(k.proc.pid)
m = k.execute('System.out.println("bye"); System.exit(3);')
e = k.error(m)
t.is_(e and e["name"], "KernelDied", "the JVM exiting mid-execution: an error, then the end")
t.like(k.stdout(m), "bye", "with what it wrote before")
try:
    status = k.proc.wait(10)
except Exception:
    status = None
t.ok(status not in (0, None), "and the kernel exits non-zero (the daemon restarts it)", status)
t.ok(jvm and all(gone(p) for p in jvm), "leaving no JVM behind", jvm)
k.close()

k2 = start()
jvm = children(k2.proc.pid)
status = k2.close()
t.is_(status, 0, "the end of fd 0 ends the kernel, status 0")
t.ok(jvm and all(gone(p) for p in jvm), "and its JVM", jvm)

t.done()
