"""The bash kernel (src/interp/bash_kernel.py), driven outside any sandbox through its protocol
(src/interp/PROTOCOL.md). Prints TAP."""
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel import Kernel, Tap  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
KERNEL = os.path.join(ROOT, "src", "interp", "bash_kernel.py")

t = Tap()


def start(**kw):
    return Kernel(["/usr/bin/python3", KERNEL], **kw)


def alive(pids):
    out = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(") ", 1)[1][0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    children.setdefault(int(f.read().split(") ", 1)[1].split()[1]), []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def wait_gone(pids, seconds=5):
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive(pids)


k = start(cwd="/tmp")
t.is_(k.language, "bash", "ready says bash")

# --- state ---

m = k.execute("echo hello")
t.is_([x["text"] for x in Kernel.of_type(m, "stdout")], ["hello\n"], "echo arrives as stdout")
t.is_(Kernel.results(m) + Kernel.of_type(m, "error"), [], "and nothing else")
t.is_(Kernel.stdout(k.execute("pwd")), "/tmp\n", "the cwd is the kernel's")
k.execute("cd /usr")
t.is_(Kernel.stdout(k.execute("pwd")), "/usr\n", "cd outlives its execution")
k.execute("x=5; declare -A map=([k]=v); greet() { echo \"hi $1\"; }; set -o pipefail; shopt -s extglob")
m = k.execute("echo $x ${map[k]}; greet you; shopt -o pipefail | cut -f2; shopt extglob | cut -f2")
t.is_(Kernel.stdout(m), "5 v\nhi you\non\non\n", "variables, declare -A, functions, set and shopt options persist")
m = k.execute("cat <<EOF\nheredoc $x\nEOF\nfor i in 1 2; do\n  echo line$i\ndone")
t.is_(Kernel.stdout(m), "heredoc 5\nline1\nline2\n", "heredocs and multi-line code")
m = k.execute("cat; read -r line; echo \"read:$?\"")
t.is_(Kernel.stdout(m), "read:1\n", "stdin is /dev/null: a read gets EOF")
t.is_(Kernel.stdout(k.execute("echo -n partial")), "partial", "output without a newline")
m = k.execute("echo 'it''s'; echo \"$((6 * 7))\"; echo `echo backticks`")
t.is_(Kernel.stdout(m), "its\n42\nbackticks\n", "quoting and substitutions as bash does them")
t.is_(Kernel.stdout(k.execute("return 3 2>/dev/null; echo not-reached")), "",
      "return ends the cell (it is sourced at the top level)")

# --- errors ---

m = k.execute("echo before; false")
e = Kernel.error(m)
t.ok(e == {"type": "error", "name": "", "value": "1", "traceback": "", "_at": e and e["_at"]},
     "a failing last command is an error named '' with its status (as E2B's bash_kernel)", e)
m = k.execute("ls /nonexistent-hutch")
t.ok(Kernel.error(m)["value"] == "2" and "No such file" in Kernel.stderr(m),
     "a failing command: its stderr, and its status", m)
t.is_(Kernel.error(k.execute("false; true")), None, "only the last command's status counts")
m = k.execute("echo 'unclosed")
t.ok(Kernel.error(m) is not None and "unexpected EOF" in Kernel.stderr(m), "a syntax error", m)
t.is_(Kernel.stdout(k.execute("echo still $x")), "still 5\n", "and the state is kept")

# --- output ---

m = k.execute("echo out; echo err >&2; sh -c 'echo child-out; echo child-err >&2'")
t.is_((Kernel.stdout(m), Kernel.stderr(m)), ("out\nchild-out\n", "err\nchild-err\n"),
      "stdout and stderr apart, a child's too")
m = k.execute("echo 1; sleep 2; echo 2")
outs = Kernel.of_type(m, "stdout")
t.ok(len(outs) == 2 and outs[1]["_at"] - outs[0]["_at"] > 1.5, "output streams as it is written", m)
m = k.execute("printf 'f\\377o'")
t.is_(Kernel.stdout(m), "f\ufffdo", "bytes that are not UTF-8 arrive as replacement characters")
m = k.execute("head -c 10485760 /dev/zero | tr '\\0' x")
outs = Kernel.of_type(m, "stdout")
t.ok(Kernel.stdout(m) == "x" * 10485760, "10 MB of output arrives whole")
t.ok(all(len(o["text"].encode()) <= 65536 for o in outs), "in messages of at most 64 KiB (%d)" % len(outs))
m = k.execute("echo '\\x00 fake mark'; printf 'aaaa 0\\n'")
t.ok(Kernel.stdout(m).endswith("aaaa 0\n") and m[-1]["type"] == "end_of_execution",
     "output that looks like a mark is output")

# --- env vars ---

m = k.execute("echo $FOO", env_vars={"FOO": "bar"})
t.is_(Kernel.of_type(m, "stdout")[0]["text"], "bar\n", "env_vars are set for the execution (E2B's test)")
m = k.execute("echo ${FOO:-default}")
t.is_(Kernel.of_type(m, "stdout")[0]["text"], "default\n", "and unset afterwards (E2B's test)")
k.execute("export KEPT=mine")
m = k.execute("echo $KEPT; sh -c 'echo child:$KEPT'", env_vars={"KEPT": "over", "Q": "a'b\"c $x"})
t.is_(Kernel.stdout(m), "over\nchild:over\n", "they override a shell variable, for children too")
t.is_(Kernel.stdout(k.execute("echo $KEPT; echo \"${Q-unset}\"")), "mine\nunset\n",
      "which is restored afterwards; values are not expanded")
os.environ["HUTCH_TEST_ENV"] = "global"
k2 = start(env=dict(os.environ))
t.is_(Kernel.stdout(k2.execute("echo $HUTCH_TEST_ENV", env_vars={"HUTCH_TEST_ENV": "overwrite"})),
      "overwrite\n", "env_vars override the kernel's environment")
t.is_(Kernel.stdout(k2.execute("echo $HUTCH_TEST_ENV")), "global\n", "which is restored")
k2.close()

# --- interrupts ---

rid = k.start("echo start; sleep 30; echo after-sleep")
time.sleep(0.5)
at = time.monotonic()
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(Kernel.error(m) and Kernel.error(m)["name"] == "ExecutionAborted" and time.monotonic() - at < 1.5,
     "SIGINT interrupts a sleep at once (E2B's ExecutionAborted)", m)
t.ok("after-sleep" not in Kernel.stdout(m), "and the rest of the cell does not run")
t.is_(Kernel.stdout(k.execute("echo $x; pwd")), "5\n/usr\n", "the state is kept and the next execution works")
rid = k.start("n=0; while :; do n=$((n+1)); done")
time.sleep(0.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(Kernel.error(m) is not None and Kernel.stdout(k.execute("[ $n -gt 0 ] && echo counted")) == "counted\n",
     "SIGINT interrupts a busy loop of the shell's own, state kept")
rid = k.start("trap '' INT; sleep 30")
time.sleep(0.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(Kernel.error(m) is not None and "Restarting Bash" in Kernel.stderr(m),
     "a cell that ignores SIGINT is killed with its shell", m)
t.is_(Kernel.stdout(k.execute("echo ${x:-cleared}; echo ok")), "cleared\nok\n",
      "and a fresh shell takes its place")
k.interrupt()
time.sleep(0.3)
t.is_(Kernel.stdout(k.execute("echo idle-ignored")), "idle-ignored\n", "SIGINT while idle is ignored")

# --- exit, hostile cells ---

k.execute("y=1")
m = k.execute("echo bye; exit 3")
e = Kernel.error(m)
t.ok(Kernel.stdout(m) == "bye\n" and e and e["value"] == "3" and "Restarting Bash" in Kernel.stderr(m),
     "exit in a cell: its output, its status as the error, and a restart", m)
t.is_(Kernel.stdout(k.execute("echo ${y:-fresh}")), "fresh\n", "the next execution runs in a fresh shell")
m = k.execute("exit")
t.is_(Kernel.error(m), None, "exit 0 is no error")
m = k.execute("exec 1>&- 2>&-; echo lost")
t.ok(m[-1]["type"] == "end_of_execution", "a cell that closes fds 1 and 2 still ends")
m = k.execute("echo again")
t.ok(m[-1]["type"] == "end_of_execution", "and the next one too (its output is gone: the shell closed it)")
k.execute("exit")
m = k.execute("marks=$(dirname \"$BASH_SOURCE\")/marks; [ -p \"$marks\" ] && echo garbage > \"$marks\" && echo fine")
t.is_(Kernel.stdout(m), "fine\n", "garbage written to the mark FIFO is ignored")
m = k.execute("kill -9 $$")
t.ok(Kernel.error(m) and Kernel.error(m)["value"] == "137", "a shell killed by a signal", m)
t.is_(Kernel.stdout(k.execute("echo up")), "up\n", "is replaced")
m = k.execute("(sleep 0.2; echo late) & echo now")
time.sleep(0.5)
m2 = k.execute("echo next")
t.ok(Kernel.stdout(m) == "now\n" and Kernel.stdout(m2) == "late\nnext\n",
     "a background job's output after the end goes to the next execution", (m, m2))
t.is_(Kernel.stdout(k.execute("")), "", "empty code")

k.execute("sleep 300 & disown; echo started")
tree = descendants(k.proc.pid)
t.ok(len(tree) >= 2, "the shell and a job it left running", tree)
t.is_(k.close(), 0, "the kernel exits at the end of fd 0")
t.is_(wait_gone(tree), [], "with its shell and the jobs")
t.done()
