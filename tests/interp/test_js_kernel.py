"""The JavaScript and TypeScript kernel (src/interp/js_kernel.mjs), driven outside any sandbox
through its protocol (src/interp/PROTOCOL.md). Prints TAP."""
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel import Kernel, KernelGone, Tap  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
KERNEL = os.path.join(ROOT, "src", "interp", "js_kernel.mjs")
NODE = "/usr/bin/node"
HAVE_TS = os.path.isdir(os.path.join(ROOT, "src", "interp", "node_modules", "typescript"))

t = Tap()


def start(*args, **kw):
    return Kernel([NODE, KERNEL, *args], **kw)


def text(msgs):
    results = Kernel.results(msgs)
    return results[0].get("text") if results else None


def alive_pids(pids):
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
    """Every process under pid (by parent links in /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().split(") ", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


# --- state, values, output ---

k = start(cwd="/tmp")
t.is_(k.language, "javascript", "ready says javascript")
m = k.execute("1 + 1")
t.is_(text(m), "2", "last expression's value")
t.ok(Kernel.results(m)[0]["is_main_result"] is True and Kernel.results(m)[0]["extra"] == {},
     "a main result, extra {}")
t.is_(Kernel.results(k.execute("let a = 1"))[:1], [], "a declaration has no value")

k.execute("var v = 1; let l = 2; const c = 3; function f() { return 4 } class C { five() { return 5 } }")
t.is_(text(k.execute("v + l + c + f() + new C().five()")), "15",
      "var, let, const, function and class outlive their cell")
m = k.execute("const c = 30; c")
t.ok(Kernel.error(m) is None and text(m) == "30", "a const declared again in a later cell", m)
t.is_(text(k.execute("x = 1")), "1", "an assignment's value")
t.is_(text(k.execute("x += 1; x")), "2", "statefulness (E2B's test)")

t.is_(text(k.execute("'abc'")), "abc", "a string's text has no quotes (as E2B's server strips them)")
t.is_(text(k.execute("\"it's\"")), "it's", "a string with a quote in it")
t.is_(text(k.execute("({a: 1, b: [1, 2], s: 'x'})")), "{ a: 1, b: [ 1, 2 ], s: 'x' }",
      "an object is shown by util.inspect")
t.is_(Kernel.results(k.execute("undefined")), [], "undefined is no result (IJavascript hides it)")
t.is_(text(k.execute("null")), "null", "null is a result")
t.is_(text(k.execute("Promise.resolve(42)")), "42", "a promise's value is what it resolves to")

m = k.execute("""
    import { readFileSync } from 'fs'
    console.log(typeof readFileSync)
    """)
t.is_(Kernel.stdout(m), "function\n", "ES module import (E2B's test)")
k.execute("import fs from 'node:fs'; import * as pathNs from 'path'; import { join as j } from 'node:path'")
t.is_(text(k.execute("[typeof fs.existsSync, pathNs.sep, j('a', 'b')]")), "[ 'function', '/', 'a/b' ]",
      "default, namespace and renamed imports outlive their cell")
t.is_(text(k.execute("typeof require('os').cpus")), "function", "require")
t.is_(text(k.execute("\n    await Promise.resolve('Hello World!')\n    ")), "Hello World!",
      "top-level await (E2B's test)")
k.execute("const w = await Promise.resolve(7); let [p, q] = [await 8, 9]; class D { d() { return w } }")
t.is_(text(k.execute("w + p + q + new D().d()")), "31", "declarations in a cell with await outlive it")
t.is_(text(k.execute("process.cwd()")), "/tmp", "the cwd is the kernel's")

m = k.execute('console.log("Hello World!")')
t.is_([x["text"] for x in Kernel.of_type(m, "stdout")], ["Hello World!\n"],
      "console.log arrives as stdout (E2B's test)")
m = k.execute("console.error('e1'); console.warn('w1'); console.info('i1'); process.stdout.write('raw')")
t.is_((Kernel.stdout(m), Kernel.stderr(m)), ("i1\nraw", "e1\nw1\n"),
      "console.error/warn go to stderr, console.info and process.stdout.write to stdout")
m = k.execute("console.log(1); await new Promise(r => setTimeout(r, 2000)); console.log(2)")
outs = Kernel.of_type(m, "stdout")
t.ok(len(outs) == 2 and outs[0]["text"] == "1\n" and outs[1]["_at"] - outs[0]["_at"] > 1.5,
     "output streams as it is written (1 arrives 2 s before 2)", m)
m = k.execute("require('child_process').execSync('echo from-child; echo child-err >&2', "
              "{stdio: 'inherit'}); 'after'")
t.is_((Kernel.stdout(m), Kernel.stderr(m), text(m)), ("from-child\n", "child-err\n", "after"),
      "a child process's fd 1 and 2 are captured, before the cell's value")
m = k.execute("process.stdout.write('nul at the end\\0'); process.stdout.write('\\0hutch-barrier:forged:1\\0')")
t.is_(Kernel.stdout(m), "nul at the end\0\0hutch-barrier:forged:1\0",
      "output ending in NUL, and a mark without the execution's token, are output")
m = k.execute("process.stdout.write(Buffer.from([0x66, 0xff, 0x6f]))")
t.is_(Kernel.stdout(m), "f\ufffdo", "bytes that are not UTF-8 arrive as replacement characters")

m = k.execute("const big = 'x'.repeat(1023) + '\\n'; for (let i = 0; i < 10240; i++) process.stdout.write(big)")
outs = Kernel.of_type(m, "stdout")
t.ok(Kernel.stdout(m) == ("x" * 1023 + "\n") * 10240, "10 MB of output arrives whole")
t.ok(all(len(o["text"].encode()) <= 65536 for o in outs) and len(outs) >= 160,
     "in messages of at most 64 KiB (%d of them)" % len(outs))
m = k.execute("'y'.repeat(20000)")
t.ok((text(m) or "").endswith("... 10000 more characters"),
     "a long string value is cut as util.inspect cuts it (as in IJavascript)", text(m)[-60:])
m = k.execute("({ _toMime: () => ({ 'text/plain': 'y'.repeat(3 << 20), 'text/html': '<b>y</b>' }) })")
t.is_((len(text(m) or ""), Kernel.results(m)[0].get("html")), (3 << 20, "<b>y</b>"),
      "a value's own MIME bundle (IJavascript's _toMime), 3 MB of text whole")
m = k.execute("({ _toHtml: () => '<i>h</i>', _toPng: () => 'iVBORw0KGgo=', toString() { return 'o' } })")
r = Kernel.results(m)[0]
t.ok(r.get("html") == "<i>h</i>" and r.get("png") == "iVBORw0KGgo=" and "text" in r,
     "_toHtml and _toPng give html and png beside text", r)

m = k.execute("$$.html('<b>x</b>'); 5")
t.is_([(r.get("html"), r.get("text"), r["is_main_result"]) for r in Kernel.results(m)], [("<b>x</b>", None, True)],
      "IJavascript's $$.html() is the cell's result, instead of its value")
m = k.execute("const disp = $$.display(); disp.png('iVBORw0KGgo='); disp.text('shown'); 6")
t.is_([(r.get("png"), r.get("text"), r["is_main_result"]) for r in Kernel.results(m)],
      [("iVBORw0KGgo=", None, False), (None, "shown", False), (None, "6", True)],
      "$$.display() sends displays (is_main_result false), then the value")
m = k.execute("$$.async(); setTimeout(() => $$.done({ late: 1 }), 300); 'not this'")
t.is_(text(m), "{ late: 1 }", "$$.async() waits for $$.done(value)")
m = k.execute("$$.async(); setTimeout(() => $$.sendError(new Error('async boom')), 50)")
t.ok(Kernel.error(m) and Kernel.error(m)["value"] == "async boom", "or for $$.sendError()", m)
m = k.execute("setTimeout(() => disp.text('too late'), 10); 'kept'")
time.sleep(0.2)
t.is_(Kernel.results(k.execute("undefined")), [], "a display handle kept past its execution sends nothing")

# --- errors ---

m = k.execute("undefinedThing")
e = Kernel.error(m)
t.ok(e is not None and e["name"] == "ReferenceError" and e["value"] == "undefinedThing is not defined",
     "a ReferenceError: name and message", e)
t.ok(e is not None and "at cell-" in e["traceback"] and "js_kernel" not in e["traceback"],
     "its traceback is the cell's stack, without the kernel's frames", e)
t.is_(m[-1]["type"], "end_of_execution", "the execution still ends")
e = Kernel.error(k.execute("function g() { throw new TypeError('bad') }\ng()"))
t.ok(e and e["name"] == "TypeError" and "at g (cell-" in e["traceback"], "a TypeError thrown in a function", e)
e = Kernel.error(k.execute("let broken = ;"))
t.ok(e and e["name"] == "SyntaxError" and e["value"] == "Unexpected token ';'", "a SyntaxError", e)
e = Kernel.error(k.execute("throw 'plain'"))
t.ok(e and e["name"] == "string" and e["value"] == "'plain'", "a thrown string (as IJavascript names it)", e)
e = Kernel.error(k.execute("await Promise.reject(new RangeError('r'))"))
t.ok(e and e["name"] == "RangeError" and e["value"] == "r", "a rejected await", e)
m = k.execute("Promise.reject(new Error('nobody')); setTimeout(() => { throw new Error('late') }, 50); 'ok'")
t.is_(text(m), "ok", "a cell that leaves an unhandled rejection and a throwing timer")
time.sleep(0.3)
m = k.execute("'still'")
t.ok(text(m) == "still" and "Error: late" in Kernel.stderr(m),
     "the kernel survives them; the late throw is reported on stderr (of the next execution)", m)
t.ok(len(Kernel.of_type(k.execute("throw 1"), "error")) == 1, "one error per execution")

# --- env vars ---

m = k.execute("process.env.FOO", env_vars={"FOO": "bar"})
t.is_(text(m), "bar", "env_vars are set for the execution (E2B's test)")
t.is_(text(k.execute("process.env.FOO || 'default'")), "default", "and removed afterwards")
os.environ["HUTCH_TEST_ENV"] = "global"
k2 = start(env=dict(os.environ))
t.is_(text(k2.execute("process.env.HUTCH_TEST_ENV", env_vars={"HUTCH_TEST_ENV": "overwrite"})),
      "overwrite", "env_vars override the kernel's environment")
t.is_(text(k2.execute("process.env.HUTCH_TEST_ENV")), "global", "which is restored afterwards")
t.is_(text(k2.execute("await new Promise(r => setTimeout(r, 10)); process.env.A + process.env.B",
                      env_vars={"A": "1", "B": "2"})), "12", "env_vars in a cell that awaits")
t.is_(text(k2.execute("[process.env.A, process.env.B]")), "[ undefined, undefined ]", "removed again")
# a warm pool's kernel, given its sandbox's env vars once the sandbox is claimed: for good, in the
# worker and in one started after it (process.exit in a cell replaces the worker)
k2.send({"type": "environment", "env_vars": {"HUTCH_TEST_LATER": "claimed", "HUTCH_TEST_ENV": "new"}})
t.is_(text(k2.execute("[process.env.HUTCH_TEST_LATER, process.env.HUTCH_TEST_ENV]")),
      "[ 'claimed', 'new' ]", "an environment request sets env vars for good")
t.is_(text(k2.execute("require('node:child_process').execSync('echo $HUTCH_TEST_LATER').toString().trim()")),
      "claimed", "... for a child too")
k2.execute("process.exit(3)")
t.is_(text(k2.execute("process.env.HUTCH_TEST_LATER")), "claimed", "... and for a worker started after it")
k2.send({"type": "environment", "env_vars": {"A": ["x"]}})
t.is_(text(k2.execute("process.env.A ?? 'unset'")), "unset",
      "an environment request that is not strings only is ignored")
k2.close()

# --- interrupts ---

rid = k.start("let spins = 0; while (true) { spins++ }")
time.sleep(0.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
e = Kernel.error(m)
t.ok(e and "interrupted" in e["value"], "SIGINT interrupts a busy loop", m)
t.is_(text(k.execute("spins > 0 && v")), "1", "the state is kept and the next execution works")

rid = k.start("let spun = 0; while (true) { spun++ }; await null")
time.sleep(0.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
e = Kernel.error(m)
t.ok(e and "interrupted" in e["value"] and "state cleared" not in e["value"],
     "SIGINT interrupts a busy loop before a cell's first await, state kept", m)

rid = k.start("console.log('waiting'); await new Promise(() => {})")
time.sleep(0.5)
start_at = time.monotonic()
k.interrupt()
m = k.until_end(rid, timeout=10)
e = Kernel.error(m)
t.ok(e and "interrupted" in e["value"] and time.monotonic() - start_at < 1.5,
     "SIGINT abandons a pending await at once", m)
t.is_(text(k.execute("v + 1")), "2", "the state is kept")

rid = k.start("require('child_process').execSync('sleep 30'); 'not reached'")
time.sleep(0.5)
start_at = time.monotonic()
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(Kernel.error(m) is not None and time.monotonic() - start_at < 3,
     "SIGINT interrupts a child process the cell waits for", m)

rid = k.start("await null; while (true) {}")
time.sleep(0.5)
k.interrupt()
m = k.until_end(rid, timeout=10)
e = Kernel.error(m)
t.ok(e and "state cleared" in e["value"],
     "a busy loop after an await cannot be reached: its process is replaced, the error says so", m)
t.is_(text(k.execute("typeof v")), "undefined", "the context works again, with its state cleared")

k.interrupt()
time.sleep(0.3)
t.is_(text(k.execute("'idle SIGINT ignored'")), "idle SIGINT ignored", "SIGINT while idle is ignored")

rid = k.start("$$.async()")
time.sleep(0.3)
k.interrupt()
m = k.until_end(rid, timeout=10)
t.ok(Kernel.error(m) and "interrupted" in Kernel.error(m)["value"], "SIGINT ends a $$.async() wait", m)

# --- hostile cells ---

m = k.execute("process.exit(3)")
e = Kernel.error(m)
t.ok(e and e["name"] == "ContextRestarting" and "exit code 3" in e["value"],
     "process.exit in a cell ends the execution with an error", m)
t.is_(text(k.execute("1 + 2")), "3", "and the context works again")
k4 = start()
m = k4.execute("const process = 'shadowed'; console.log('out'); 7")
t.is_((Kernel.stdout(m), text(m)), ("out\n", "7"), "a cell that declares a global named process")
t.is_(text(k4.execute("8", env_vars={"E": "1"})), "8", "the kernel does not use the global process")
k4.close()
m = k.execute("require('fs').writeSync(3, 'garbage\\n{\"type\":\"bogus\"}\\n'); 'after garbage'")
t.is_(text(m), "after garbage", "garbage on the worker's control fd is dropped")
m = k.execute("require('fs').closeSync(1); require('fs').closeSync(2); 'closed'")
t.is_(text(m), "closed", "a cell that closes fds 1 and 2 still ends, with its value")
m = k.execute("process.exit(0)")
t.ok(Kernel.error(m) is not None, "a worker without fds 1 and 2 is replaced at its exit")
m = k.execute("console.log('back'); 4")
t.is_((Kernel.stdout(m), text(m)), ("back\n", "4"), "and output works again")
m = k.execute("setTimeout(() => process.exit(1), 50); 'bye later'")
time.sleep(0.8)
t.is_(text(k.execute("5")), "5", "a worker that exits while idle is replaced before the next execution")
k.execute("setTimeout(() => process.exit(1), 20); 'exits soon'")
time.sleep(0.1)
t.is_(text(k.execute("'right after'")), "right after",
      "an execution sent while the exited worker's output drains waits for the new worker")
m = k.execute("process.kill(process.pid, 'SIGKILL')")
t.ok(Kernel.error(m) is not None and text(k.execute("6")) == "6", "SIGKILL of the worker")

pid = k.proc.pid
k.execute("require('child_process').spawn('sleep', ['300'], {stdio: 'ignore'}); 1")
tree = descendants(pid)
t.ok(len(tree) >= 2, "the worker and a process a cell left behind", tree)
t.is_(k.close(), 0, "the kernel exits at the end of fd 0")
deadline = time.monotonic() + 5
while alive_pids(tree) and time.monotonic() < deadline:
    time.sleep(0.05)
t.is_(alive_pids(tree), [], "with its worker and what the cells started")

# A kernel killed with SIGKILL (not the daemon's way, but possible): its worker follows.
k3 = start()
tree = descendants(k3.proc.pid)
os.kill(k3.proc.pid, signal.SIGKILL)
k3.proc.wait()
deadline = time.monotonic() + 5
while alive_pids(tree) and time.monotonic() < deadline:
    time.sleep(0.05)
t.is_(alive_pids(tree), [], "a worker whose launcher died exits")
k3.close()

# --- TypeScript ---

if not HAVE_TS:
    t.skip("TypeScript", "src/interp/node_modules has no typescript (npm ci in src/interp)")
else:
    ts = start("--typescript")
    t.is_(ts.language, "typescript", "ready says typescript")
    m = ts.execute('const message: string = "Hello World!"; console.log(message)')
    t.is_([x["text"] for x in Kernel.of_type(m, "stdout")], ["Hello World!\n"], "the TS kernel (E2B's test)")
    m = ts.execute("""
interface Point { x: number; y?: number }
type Pair<T> = [T, T]
enum Color { Red, Green = 5 }
const enum Flag { On = 1 }
function add(a: number, b: number): number { return a + b }
class Box<T> { constructor(public value: T) {} }
const pt: Point = { x: 3 }
""")
    t.is_(Kernel.error(m), None, "types, interfaces, enums, generics, parameter properties")
    m = ts.execute("const pair: Pair<number> = [1, 2]; [add(pt.x, pair[1]), Color.Green, Color[0], Flag.On, new Box<string>('b').value]")
    t.is_(text(m), "[ 5, 5, 'Red', 1, 'b' ]", "and they work in the next cell")
    m = ts.execute("import { join } from 'node:path'\nconst joined: string = await Promise.resolve(join('a', 'b')); joined")
    t.is_(text(m), "a/b", "imports and top-level await in TypeScript")
    t.is_(text(ts.execute("join('c', 'd')")), "c/d", "an import outlives its cell")
    e = Kernel.error(ts.execute("let y: = 5"))
    t.ok(e and e["name"] == "SyntaxError" and e["value"] == "Type expected." and "TS1110" in e["traceback"],
         "a TypeScript syntax error is an error", e)
    e = Kernel.error(ts.execute("const n: number = 1; n.nope()"))
    t.ok(e and e["name"] == "TypeError", "a runtime error in TypeScript (types are not checked)", e)
    ts.close()

# Without the transpiler the TypeScript context still starts, and says what is missing.
import shutil  # noqa: E402
import tempfile  # noqa: E402
with tempfile.TemporaryDirectory() as d:
    for name in ("js_kernel.mjs", "js_kernel_worker.mjs"):
        shutil.copy(os.path.join(ROOT, "src", "interp", name), d)
    bare = Kernel([NODE, os.path.join(d, "js_kernel.mjs"), "--typescript"])
    e = Kernel.error(bare.execute("const a: number = 1"))
    t.ok(e and e["name"] == "TypeScriptUnavailable" and "npm ci" in e["value"],
         "without the transpiler a TypeScript execution is a clear error", e)
    t.is_(bare.close(), 0, "not a crash")

k.close()
t.done()
