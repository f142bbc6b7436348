"""The Python kernel (src/interp/python_kernel.py) against src/interp/PROTOCOL.md and what E2B's
SDK expects of its results, driven outside any sandbox. Prints TAP.

Run: bash tests/integration/interp_python.sh
 (or /usr/bin/python3 tests/interp/test_python_kernel.py)
"""
import atexit
import base64
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel import Kernel, KernelGone, Tap  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL = [sys.executable, os.path.join(ROOT, "src", "interp", "python_kernel.py")]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

t = Tap()
home = tempfile.mkdtemp(prefix="hutch-pykernel-")   # IPython's and matplotlib's files go here
atexit.register(shutil.rmtree, home, True)
cwd = os.path.join(home, "work")
os.mkdir(cwd)
env = {k: v for k, v in os.environ.items() if not k.startswith(("MPL", "PYTHON", "IPYTHON"))}
env.update(HOME=home, HUTCH_TEST_PRESET="kept")
env.pop("HUTCH_TEST_ABSENT", None)


problems = []   # every execution of every kernel is checked against the protocol


def protocol_problems(msgs):
    """What the daemon would reject in an execution's messages (PROTOCOL.md)."""
    found = []
    types = [m["type"] for m in msgs]
    if types.count("error") > 1 or types.count("end_of_execution") != 1 \
            or types[-1] != "end_of_execution":
        found.append("message types %s" % types[:5])
    for m in msgs:
        kind = m["type"]
        if kind in ("stdout", "stderr") and not (isinstance(m.get("text"), str) and m["text"]):
            found.append("%s without text" % kind)
        elif kind == "error" and not all(isinstance(m.get(f), str)
                                         for f in ("name", "value", "traceback")):
            found.append("error fields %r" % m)
        elif kind == "result":
            strings = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex",
                       "javascript")
            if not (isinstance(m.get("extra"), dict) and isinstance(m.get("is_main_result"), bool)
                    and all(isinstance(m[f], str) for f in strings if f in m)
                    and all(isinstance(m[f], dict) for f in ("data", "chart") if f in m)
                    and isinstance(m.get("json", {}), (dict, list))):
                found.append("result fields %r" % {k: type(v).__name__ for k, v in m.items()})
        elif kind not in ("stdout", "stderr", "error", "result", "end_of_execution"):
            found.append("unknown type %r" % kind)
    return found


class CheckedKernel(Kernel):
    def until_end(self, rid, timeout=30.0):
        msgs = super().until_end(rid, timeout)
        problems.extend(protocol_problems(msgs))
        return msgs


def start_kernel():
    return CheckedKernel(KERNEL, cwd=cwd, env=env)


def clean(msgs):
    return [{k: v for k, v in m.items() if k != "_at"} for m in msgs]


def main_result(msgs):
    mains = [r for r in Kernel.results(msgs) if r.get("is_main_result")]
    return mains[0] if mains else None


def text_of(msgs):
    r = main_result(msgs)
    return r.get("text") if r else None


def png_ok(b64):
    try:
        return base64.b64decode(b64, validate=True).startswith(PNG_SIGNATURE)
    except Exception:
        return False


def check_protocol(msgs, name):
    return t.is_(protocol_problems(msgs), [], name + ": a well-formed execution")


started = time.monotonic()
k = start_kernel()
ready_s = time.monotonic() - started
t.is_(k.language, "python", "ready says language python")
t.ok(ready_s < 5, "ready within 5 s (took %.2f s)" % ready_s)
print("# ready after %.3f s" % ready_s)

# -- values, state, display ---------------------------------------------------------------------

t.is_(text_of(k.execute("1+1")), "2", "last expression 1+1 -> text '2'")
m = k.execute("'abc'")
t.is_(text_of(m), "abc", "a str's repr loses its quotes, as E2B does")
t.is_(main_result(m)["extra"], {}, "extra is {} when there is nothing else")
t.is_(main_result(m)["is_main_result"], True, "the value is the main result")
m = k.execute("x = 41\nx += 1")
t.is_(Kernel.results(m), [], "an assignment gives no result")
t.is_(text_of(k.execute("x")), "42", "state is kept across executions")
t.is_(text_of(k.execute("x;")), None, "a trailing ';' hides the value, as in IPython")

m = k.execute("display(1)\ndisplay('b')\nprint('between')\ndisplay(2)\n3")
t.is_([(r["text"], r["is_main_result"]) for r in Kernel.results(m)],
      [("1", False), ("b", False), ("2", False), ("3", True)],
      "display() results in order, not main; the value last and main")
t.is_([x["type"] for x in m[:5]], ["result", "result", "stdout", "result", "result"],
      "output written between two displays comes between them")

m = k.execute("{'a': 1, 'b': [1.5, None]}")
t.is_(main_result(m).get("json"), {"a": 1, "b": [1.5, None]}, "a dict value has a json format")
t.is_(text_of(m), "{'a': 1, 'b': [1.5, None]}", "...and its repr as text")
t.is_(main_result(k.execute("[1, {'a': [2]}]")).get("json"), [1, {"a": [2]}],
      "a list value has a json format too, as E2B's")
t.is_(main_result(k.execute("[1, object()]")).get("json"), None,
      "a list that is not JSON data has none")
t.is_(main_result(k.execute("(1, 2)")).get("json"), None, "a tuple has none (E2B's: lists, dicts)")
m = k.execute("list(range(2000))")
t.ok(text_of(m).endswith("1999]"), "long lists are not cut short (E2B's max_seq_length = 0)")

formats = k.execute(r'''
class Everything:
    def _repr_html_(self): return "<b>h</b>"
    def _repr_markdown_(self): return "**m**"
    def _repr_svg_(self): return "<svg></svg>"
    def _repr_png_(self): return b"\x89PNG\r\n\x1a\nfake"
    def _repr_jpeg_(self): return b"\xff\xd8\xff"
    def _repr_pdf_(self): return b"%PDF-1.4"
    def _repr_latex_(self): return r"$x^2$"
    def _repr_json_(self): return {"j": 1}
    def _repr_javascript_(self): return "console.log(1)"
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/vnd.custom+json": {"c": 2}}
    def __repr__(self): return "Everything()"
Everything()
''')
r = main_result(formats) or {}
want = {"text": "Everything()", "html": "<b>h</b>", "markdown": "**m**", "svg": "<svg></svg>",
        "png": base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode(),
        "jpeg": base64.b64encode(b"\xff\xd8\xff").decode(),
        "pdf": base64.b64encode(b"%PDF-1.4").decode(), "latex": "$x^2$", "json": {"j": 1},
        "javascript": "console.log(1)", "extra": {"application/vnd.custom+json": {"c": 2}}}
for key, value in want.items():
    t.is_(r.get(key), value, "format %s" % key)

m = k.execute("from IPython.display import display\n"
              "display({'text/latex': r'\\text{CustomReprObject}'}, raw=True)")
t.is_(clean(Kernel.results(m)), [{"type": "result", "latex": "\\text{CustomReprObject}",
                                  "extra": {}, "is_main_result": False}],
      "a raw display has exactly its formats (no text)")
m = k.execute("from IPython.display import HTML, Markdown, Image\n"
              "display(HTML('<i>x</i>'), Markdown('# t'))\n"
              "Image(data=b'\\x89PNG\\r\\n\\x1a\\nabc', format='png')")
rs = Kernel.results(m)
t.is_([r.get("html") or r.get("markdown") for r in rs[:2]], ["<i>x</i>", "# t"],
      "IPython.display.HTML and Markdown")
t.ok(len(rs) == 3 and png_ok(rs[2].get("png", "")) and rs[2]["is_main_result"],
     "IPython.display.Image as the value: png, base64", rs[-1:])

# -- errors ----------------------------------------------------------------------------------------

m = k.execute("y_undefined")
e = Kernel.error(m) or {}
t.is_((e.get("name"), e.get("value")), ("NameError", "name 'y_undefined' is not defined"),
      "NameError: name and value")
t.like(e.get("traceback"), "----> 1 y_undefined", "the traceback is one string, IPython's")
t.ok("\x1b[" not in e.get("traceback", "\x1b["), "no ANSI colours (E2B's kernels: NoColor)")
check_protocol(m, "an error")
m = k.execute("def f():\n    return 1 / 0\nf()")
e = Kernel.error(m) or {}
t.is_(e.get("name"), "ZeroDivisionError", "an error raised in a function")
t.like(e.get("traceback"), "in f()", "...its traceback shows the function")
m = k.execute("x = (")
t.is_((Kernel.error(m) or {}).get("name"), "SyntaxError", "a syntax error")
m = k.execute("def r(): return r()\nr()")
t.is_((Kernel.error(m) or {}).get("name"), "RecursionError", "a recursion error")
t.is_(text_of(k.execute("x")), "42", "the kernel goes on after errors, state kept")
m = k.execute("input()")
t.is_((Kernel.error(m) or {}).get("name"), "EOFError", "stdin is /dev/null: input() gets EOF")
m = k.execute("import sys\nsys.exit(3)")
t.is_(((Kernel.error(m) or {}).get("name"), (Kernel.error(m) or {}).get("value")),
      ("SystemExit", "3"), "sys.exit(3) is reported as SystemExit")
m = k.execute("exit()")
t.is_((Kernel.error(m) or {}).get("name"), "SystemExit", "exit() too")
t.is_(text_of(k.execute("x")), "42", "the kernel survives sys.exit() and exit()")

# -- output ----------------------------------------------------------------------------------------

m = k.execute("print(1)")
t.is_([(x["type"], x.get("text")) for x in m[:-1]], [("stdout", "1\n")],
      "print(1) is one stdout message '1\\n' (E2B's streaming test)")
m = k.execute("import sys\nprint(1, file=sys.stderr)")
t.is_([(x["type"], x.get("text")) for x in m[:-1]], [("stderr", "1\n")], "print to stderr")
m = k.execute("import os\nos.write(1, b'fd1\\n')\nos.write(2, b'fd2\\n')\n"
              "os.system('echo child; echo childerr >&2')\n!echo bang\nNone")
t.is_(Kernel.stdout(m), "fd1\nchild\nbang\n", "fd 1 is captured: os.write, os.system, !cmd")
t.is_(Kernel.stderr(m), "fd2\nchilderr\n", "fd 2 is captured too, apart from fd 1")
m = k.execute("import ctypes, sys\nctypes.CDLL(None).printf(b'from C\\n')\n"
              "sys.stdout.buffer.write(b'buffer\\n')\nNone")
t.is_(Kernel.stdout(m), "buffer\nfrom C\n",
      "sys.stdout.buffer at once; C printf too, when the cell ends flushes libc's buffer")
m = k.execute("import time\nprint('a')\ntime.sleep(1.5)\nprint('b')")
outs = [x for x in m if x["type"] == "stdout"]
t.ok(len(outs) == 2 and outs[0]["text"] == "a\n" and outs[1]["_at"] - outs[0]["_at"] > 1.2,
     "output streams as it is written: 'a' arrives ~1.5 s before 'b'",
     [(x.get("text"), x["_at"]) for x in outs])
m = k.execute("import sys, time\nsys.stdout.write('partial')\ntime.sleep(0.8)\nprint()")
outs = [x for x in m if x["type"] == "stdout"]
t.ok(outs and outs[0]["text"] == "partial" and m[-1]["_at"] - outs[0]["_at"] > 0.5,
     "a partial line is not held until its newline", [x.get("text") for x in outs])
m = k.execute("import os\nos.write(1, b'\\xff\\xfeok\\n')")
t.is_(Kernel.stdout(m), "\ufffd\ufffdok\n", "bytes that are not UTF-8 arrive as U+FFFD")
m = k.execute("print('\u00e9' * 100000, end='')")
t.is_(Kernel.stdout(m), "\u00e9" * 100000, "two-byte characters split between chunks arrive whole")
started = time.monotonic()
m = k.execute("print('x' * (20 << 20))", timeout=60)
outs = [x for x in m if x["type"] == "stdout"]
t.is_(Kernel.stdout(m), "x" * (20 << 20) + "\n", "20 MiB printed at once arrives whole")
t.ok(len(outs) > 100 and all(len(x["text"].encode()) <= 64 << 10 for x in outs),
     "...in chunks of at most 64 KiB (%d messages, %.2f s)"
     % (len(outs), time.monotonic() - started))
m = k.execute("import threading, time\n"
              "threading.Thread(target=lambda: (time.sleep(0.5), print('late'))).start()")
t.is_(Kernel.stdout(m), "", "a thread's print after the end is not in that execution")
m = k.execute("time.sleep(1)")
t.is_(Kernel.stdout(m), "late\n", "...it comes in the next one")
m = k.execute("%timeit -n1 -r1 pass")
t.like(Kernel.stdout(m), "per loop", "%timeit")
m = k.execute("%%bash\necho from bash")
t.is_(Kernel.stdout(m), "from bash\n", "%%bash")
m = k.execute("lines = !echo one; echo two\nlines")
t.is_(text_of(m), "['one', 'two']", "x = !cmd captures the lines")
m = k.execute("import asyncio\nawait asyncio.sleep(0.01)\n'awaited'")
t.is_(text_of(m), "awaited", "top-level await")
m = k.execute("import os\n(os.readlink('/proc/self/fd/0'), os.readlink('/proc/self/fd/1')[:5],"
              " os.readlink('/proc/self/fd/2')[:5])")
t.is_(text_of(m), "('/dev/null', 'pipe:', 'pipe:')",
      "the cell's fd 0 is /dev/null, fds 1 and 2 pipes")
m = k.execute("!ls /proc/self/fd")
t.ok(set(Kernel.stdout(m).split()) <= {"0", "1", "2", "3"},
     "a child inherits fds 0-2 only: the kernel's own are close-on-exec", Kernel.stdout(m))
m = k.execute("import os, sys\n(os.getcwd(), sys.path[0])")
t.is_(text_of(m), repr((cwd, "")), "cwd is the context's; sys.path[0] is '' (not the kernel's dir)")

# -- env_vars --------------------------------------------------------------------------------------

m = k.execute("import os\n(os.environ.get('HUTCH_TEST_ABSENT'), os.environ['HUTCH_TEST_PRESET'],"
              " os.popen('echo $HUTCH_TEST_ABSENT').read())",
              env_vars={"HUTCH_TEST_ABSENT": "set", "HUTCH_TEST_PRESET": "over"})
t.is_(text_of(m), "('set', 'over', 'set\\n')", "env_vars are set for the execution (and children)")
m = k.execute("(os.environ.get('HUTCH_TEST_ABSENT', 'default'), os.environ['HUTCH_TEST_PRESET'])")
t.is_(text_of(m), "('default', 'kept')", "...then removed again, or restored")
m = k.execute("os.getenv('FOO')", env_vars={"FOO": "bar"})
t.is_(text_of(m), "bar", "E2B's env var test: os.getenv('FOO') with FOO=bar")
# a warm pool's kernel, given its sandbox's env vars once the sandbox is claimed: for good
k.send({"type": "environment", "env_vars": {"HUTCH_TEST_LATER": "claimed", "HUTCH_TEST_PRESET": "new"}})
m = k.execute("(os.environ.get('HUTCH_TEST_LATER'), os.environ['HUTCH_TEST_PRESET'],"
              " os.popen('echo $HUTCH_TEST_LATER').read())")
t.is_(text_of(m), "('claimed', 'new', 'claimed\\n')",
      "an environment request sets env vars for good (and for children); no message of its own")
m = k.execute("os.environ['HUTCH_TEST_LATER']", env_vars={"HUTCH_TEST_LATER": "once"})
m = k.execute("os.environ['HUTCH_TEST_LATER']")
t.is_(text_of(m), "claimed", "an execution's env_vars over it are restored to it")
k.send({"type": "environment", "env_vars": {"HUTCH_TEST_PRESET": "kept"}})

# -- matplotlib ------------------------------------------------------------------------------------

m = k.execute("import matplotlib.pyplot as plt\nimport numpy as np\n"
              "xs = np.linspace(0, 20, 100)\nplt.plot(xs, np.sin(xs))\nplt.show()\nxs[:2].tolist()")
rs = Kernel.results(m)
t.is_([r["is_main_result"] for r in rs], [False, True],
      "plt.show() displays the figure then; the value comes after (E2B's streaming test)")
t.is_(rs[0].get("text"), "<Figure size 640x480 with 1 Axes>", "a figure's text")
t.ok(png_ok(rs[0].get("png", "")), "a figure's png (base64 of a PNG)")
t.is_((rs[0].get("chart") or {}).get("type"), "line", "...and its chart")
t.is_(rs[0].get("extra"), {}, "...and empty extra (E2B's display data test)")
m = k.execute("1")
t.is_(len(Kernel.results(m)), 1, "a shown figure is closed: the next cell shows nothing more")
m = k.execute("fig, ax = plt.subplots()\nax.plot([1, 2, 3], [4, 5, 6], label='up')\n"
              "ax.set_title('T')\nax.set_xlabel('Time (s)')\nax.set_ylabel('Speed [m/s]')\n'value'")
rs = Kernel.results(m)
t.is_([(r.get("text"), r["is_main_result"]) for r in rs],
      [("value", True), ("<Figure size 640x480 with 1 Axes>", False)],
      "a figure left open is shown after the cell, after its value")
c = rs[-1].get("chart") or {}
t.is_((c.get("title"), c.get("x_label"), c.get("x_unit"), c.get("y_label"), c.get("y_unit")),
      ("T", "Time (s)", "s", "Speed [m/s]", "m/s"), "line chart: title, labels, units")
t.is_(c.get("elements"), [{"label": "up", "points": [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]}],
      "line chart: the points")
t.ok(c.get("x_scale") == "linear" and all(isinstance(v, float) for v in c.get("x_ticks", [None]))
     and len(c.get("x_ticks")) == len(c.get("x_tick_labels", [])), "line chart: ticks, scale")
m = k.execute("fig")
rs = Kernel.results(m)
t.ok(len(rs) == 1 and rs[0]["is_main_result"] and png_ok(rs[0].get("png", "")) and
     rs[0].get("chart", {}).get("type") == "line", "a closed figure as the value: png and chart")


def chart_of(code):
    rs = [r for r in Kernel.results(k.execute(code)) if "chart" in r]
    return rs[0]["chart"] if rs else {}


c = chart_of("""
plt.figure(figsize=(10, 6))
plt.bar(['Author A', 'Author B', 'Author C', 'Author D'], [100, 200, 300, 400], label='Books Sold')
plt.xlabel('Authors'); plt.ylabel('Number of Books Sold'); plt.title('Book Sales by Authors')
plt.show()""")
t.is_((c.get("type"), c.get("title"), c.get("x_label"), c.get("y_label")),
      ("bar", "Book Sales by Authors", "Authors", "Number of Books Sold"), "bar chart")
t.is_([(b["label"], b["value"], b["group"]) for b in c.get("elements", [])],
      [("Author A", 100, "Books Sold"), ("Author B", 200, "Books Sold"),
       ("Author C", 300, "Books Sold"), ("Author D", 400, "Books Sold")], "bar chart: the bars")
c = chart_of("plt.barh(['p', 'q'], [3, 7])\nplt.xlabel('count')\nplt.ylabel('name')\nplt.show()")
t.is_(([(b["label"], b["value"]) for b in c.get("elements", [])], c.get("x_label")),
      ([("p", 3.0), ("q", 7.0)], "name"), "horizontal bars: categories and values, x names them")
c = chart_of("xs = np.arange(2)\nplt.bar(xs - 0.2, [1, 2], 0.4, label='a')\n"
             "plt.bar(xs + 0.2, [3, 4], 0.4, label='b')\nplt.xticks(xs, ['p', 'q'])\nplt.show()")
t.is_([(b["label"], b["group"], b["value"]) for b in c.get("elements", [])],
      [("p", "a", 1), ("q", "a", 2), ("p", "b", 3), ("q", "b", 4)],
      "grouped bars: each bar named by its group's tick")
c = chart_of("plt.bar([1, 2, 3], [4, 5, 6])\nplt.show()")
t.is_([(b["label"], b["group"]) for b in c.get("elements", [])],
      [("1", "Group 0"), ("2", "Group 0"), ("3", "Group 0")], "bars on a numeric axis: their x")
c = chart_of("""
fig, ax = plt.subplots(figsize=(8, 8))
ax.pie([90, 10], labels=["No", "No, in blue"], autopct='%1.1f%%', startangle=90)
plt.title('Will I wake up early tomorrow?')
plt.show()""")
t.is_((c.get("type"), c.get("title"), c.get("elements")),
      ("pie", "Will I wake up early tomorrow?",
       [{"label": "No", "angle": 324, "radius": 1},
        {"label": "No, in blue", "angle": 36, "radius": 1}]),
      "pie chart: labels, angles, radii")
c = chart_of("""
data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87],
        'Class C': [75, 82, 88, 79, 86]}
fig, ax = plt.subplots(figsize=(10, 6))
ax.set_title('Exam Scores Distribution'); ax.set_xlabel('Class'); ax.set_ylabel('Score')
ax.boxplot(data.values(), labels=data.keys(), patch_artist=True)
plt.show()""")
t.is_((c.get("type"), c.get("title"), c.get("x_label"), c.get("y_label")),
      ("box_and_whisker", "Exam Scores Distribution", "Class", "Score"), "box and whisker chart")
t.is_([(b["label"], b["min"], b["first_quartile"], b["median"], b["third_quartile"], b["max"],
        b["outliers"]) for b in c.get("elements", [])],
      [("Class A", 78, 85, 88, 90, 92, []), ("Class B", 84, 84.75, 88, 90.5, 95, [76]),
       ("Class C", 75, 79, 82, 86, 88, [])], "box and whisker chart: the numbers (E2B's test)")
c = chart_of("plt.boxplot([[1, 2, 3, 4, 5, 6, 50]], vert=False, patch_artist=True,"
             " labels=['only'])\nplt.show()")
t.is_([(b["label"], b["first_quartile"], b["median"], b["third_quartile"], b["outliers"])
       for b in c.get("elements", [])], [("only", 2.5, 4, 5.5, [50])],
      "one box lying down, with an outlier")
c = chart_of("""
plt.xlabel("A"); plt.ylabel("B")
plt.scatter([1, 2, 3], [4, 5, 6], c='blue', label='Dataset 1')
plt.scatter([7], [8], c='red', label='Dataset 2')
plt.show()""")
t.is_((c.get("type"), c.get("title"), c.get("x_label"), c.get("y_label")),
      ("scatter", None, "A", "B"), "scatter chart")
t.is_([(s["label"], s["points"]) for s in c.get("elements", [])],
      [("Dataset 1", [[1, 4], [2, 5], [3, 6]]), ("Dataset 2", [[7, 8]])],
      "scatter chart: the points")
c = chart_of("""
fig, axs = plt.subplots(1, 2)
fig.suptitle('Multiple Charts Example')
axs[0].plot([0, 1, 2], [0, 1, 0], 'r'); axs[0].set_title('Sine Wave'); axs[0].grid(True)
axs[1].scatter([1, 2], [3, 4], label='Dataset 1'); axs[1].set_title('Scatter Plot')
plt.show()""")
t.is_((c.get("type"), c.get("title"), [(e["type"], e["title"], len(e["elements"]))
                                       for e in c.get("elements", [])]),
      ("superchart", "Multiple Charts Example",
       [("line", "Sine Wave", 1), ("scatter", "Scatter Plot", 1)]),
      "superchart: one chart per axes")
c = chart_of("fig, ax = plt.subplots()\nax.add_artist(plt.Circle((0, 0), 1, fill=False))\n"
             "plt.title('Two Concentric Circles')\nplt.show()")
t.is_(c, {"type": "unknown", "title": "Two Concentric Circles", "elements": []}, "unknown chart")
c = chart_of("import datetime\n"
             "plt.plot([datetime.date(2023, 9, d) for d in (1, 2, 3)], [1, 2, 3])\n"
             "plt.yscale('log')\nplt.show()")
t.ok(c.get("x_scale") == "datetime" and c.get("y_scale") == "log" and
     c["elements"][0]["points"][0] == ["2023-09-01", 1.0] and isinstance(c["x_ticks"][0], str),
     "dates on x (ISO strings, scale datetime), log scale on y", c)
c = chart_of("plt.scatter([datetime.date(2024, 1, 1)], [2])\nplt.show()")
t.is_(c.get("elements", [{}])[0].get("points"), [["2024-01-01T00:00:00+00:00", 2.0]],
      "a scatter of dates gives dates back")
c = chart_of("plt.plot([1, 2, 3], ['A', 'B', 'C'])\nplt.show()")
t.is_((c.get("x_scale"), c.get("y_scale")), ("linear", "categorical"), "categorical scale")
m = k.execute("plt.figure()\nplt.show()")
rs = Kernel.results(m)
t.ok(len(rs) == 1 and "png" not in rs[0] and "chart" not in rs[0],
     "an empty figure: text only, no png, no chart", rs)
m = k.execute("%matplotlib inline\nplt.plot([1, 2])\nNone")
t.ok(Kernel.error(m) is None and png_ok((Kernel.results(m) or [{}])[-1].get("png", "")),
     "%matplotlib inline works", clean(m)[-3:])

# -- pandas, PIL -----------------------------------------------------------------------------------

m = k.execute("import pandas as pd\n"
              "pd.DataFrame({'a': [1, 2, 3], 'b': [0.5, float('nan'), 2.5],"
              " 't': pd.to_datetime(['2024-01-02', '2024-01-03', '2024-01-04'])})")
r = main_result(m) or {}
t.is_(r.get("data"), {"a": [1, 2, 3], "b": [0.5, None, 2.5],
                      "t": ["2024-01-02T00:00:00", "2024-01-03T00:00:00", "2024-01-04T00:00:00"]},
      "DataFrame: data as E2B has it (NaN as null, timestamps ISO)")
t.like(r.get("html"), "<table", "DataFrame: html")
t.like(r.get("text"), "2024-01-03", "DataFrame: text")
t.is_(main_result(k.execute("pd.Series([1, 2])")).get("data"), None, "a Series has no data")
m = k.execute("from PIL import Image\nimg = Image.new('RGBA', (16, 16), 'red')\nimg")
r = main_result(m) or {}
t.ok(png_ok(r.get("png", "")), "a PIL image as the value: png")
t.is_(r.get("text"), "<PIL.Image.Image image mode=RGBA size=16x16>", "...and its text")
m = k.execute("display(img)\nimg.show()\nprint('done')")
rs = Kernel.results(m)
t.ok(len(rs) == 2 and all(png_ok(r.get("png", "")) and not r["is_main_result"] for r in rs),
     "display(img) and img.show(): png display results", clean(m))
m = k.execute("import io, os, tempfile\np = os.path.join(tempfile.mkdtemp(), 'a.png')\n"
              "img.save(p)\nimg.save(io.BytesIO(), 'PNG')\nos.path.getsize(p) > 0")
rs = Kernel.results(m)
t.ok(len(rs) == 2 and png_ok(rs[0].get("png", "")) and not rs[0]["is_main_result"] and
     rs[1].get("text") == "True",
     "img.save(path) saves and displays the image (E2B's); a save to a file object does not",
     clean(m))

# -- big results -----------------------------------------------------------------------------------

m = k.execute("class Big:\n    def _repr_html_(self): return 'h' * (40 << 20)\n"
              "    def __repr__(self): return 'Big()'\nBig()", timeout=60)
r = main_result(m) or {}
t.ok(r.get("text") == "Big()" and "html" not in r and "too large" in Kernel.stderr(m),
     "a format too large for one line is left out, and said so", clean(m)[:1])

# -- interrupts ------------------------------------------------------------------------------------

rid = k.start("import time\ntime.sleep(30)")
time.sleep(0.5)
k.interrupt()
sent = time.monotonic()
m = k.until_end(rid, timeout=10)
t.ok(time.monotonic() - sent < 1.0, "SIGINT ends time.sleep(30) within 1 s (%.2f s)"
     % (time.monotonic() - sent))
e = Kernel.error(m) or {}
t.is_(e.get("name"), "KeyboardInterrupt", "...as a KeyboardInterrupt error")
t.ok("time.sleep(30)" in e.get("traceback", "")
     and "python_kernel.py" not in e.get("traceback", ""),
     "...whose traceback shows the cell, not the kernel's signal handler", e.get("traceback"))
t.is_(text_of(k.execute("x")), "42", "...the state is kept and the next execution works")
rid = k.start("!sleep 10")
time.sleep(0.5)
k.interrupt()
sent = time.monotonic()
k.until_end(rid, timeout=10)
t.ok(time.monotonic() - sent < 2.0, "SIGINT ends a `!sleep 10` too")
for _ in range(3):
    k.interrupt()
    time.sleep(0.05)
time.sleep(0.2)
t.ok(k.proc.poll() is None, "SIGINT while idle is ignored")
t.is_(text_of(k.execute("x")), "42", "...and the kernel works on")
k.execute("import signal\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\n"
          "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})")
k.interrupt()
time.sleep(0.2)
t.ok(k.proc.poll() is None,
     "a cell that resets the SIGINT handler cannot get the idle kernel killed")
rid = k.start("time.sleep(10)")
time.sleep(0.3)
k.interrupt()
sent = time.monotonic()
k.until_end(rid, timeout=15)
t.ok(time.monotonic() - sent < 1.0, "...nor, blocking SIGINT, the next cell uninterruptible")
well_formed, interrupted = True, 0
for i in range(30):
    rid = k.start("n = %d" % i)
    k.interrupt()
    e = Kernel.error(k.until_end(rid))
    well_formed &= e is None or e["name"] == "KeyboardInterrupt"
    interrupted += e is not None
t.ok(well_formed and k.proc.poll() is None,
     "SIGINT right after the request (30 times): each execution ends, the kernel lives")
print("# %d of those 30 executions were interrupted" % interrupted)
rid = k.start("for i in range(20000):\n    print(i)\n    display(i)")
for _ in range(40):
    k.interrupt()
    time.sleep(0.005)
m = k.until_end(rid, timeout=30)
check_protocol(m, "SIGINT storm while the kernel sends messages")
t.is_(text_of(k.execute("x")), "42", "...the kernel works on")

# -- hostile cells ---------------------------------------------------------------------------------

m = k.execute("import sys\nsys.stdout = None\nsys.stderr = None")
check_protocol(m, "sys.stdout = None")
t.is_(Kernel.stdout(k.execute("print('back')")), "back\n", "...print works again in the next cell")
m = k.execute("import os\nos.close(1)\nos.close(2)\nprint('lost')")
check_protocol(m, "closing fds 1 and 2")
m = k.execute("print('restored'); import os; os.write(2, b'e\\n')")
t.is_((Kernel.stdout(m), Kernel.stderr(m)), ("restored\n", "e\n"),
      "...they are restored for the next")
check_protocol(k.execute("import sys\nsys.stdout.close()\nsys.stdin.close()"), "closing sys.stdout")
t.is_(Kernel.stdout(k.execute("print('reopened')")), "reopened\n",
      "...it is open again in the next")
m = k.execute("import os\nos.write = None\nprint('still')")
t.is_(Kernel.stdout(m), "still\n", "os.write = None does not stop output")
check_protocol(k.execute("raise KeyboardInterrupt"), "raise KeyboardInterrupt")
t.is_(k.stderr_text(), "", "the kernel wrote no diagnostics of its own all along")
rc = k.close()
t.is_(rc, 0, "end of fd 0: the kernel exits 0")

# A cell that breaks builtins wrecks its own context, not the kernel: every execution still ends.
k = start_kernel()
m = k.execute("import builtins\n"
              "for name in ('len', 'isinstance', 'str', 'print', 'list', 'dict'):\n"
              "    delattr(builtins, name)")
check_protocol(m, "deleting builtins")
m = k.execute("1+1", env_vars={"HUTCH_TEST_ABSENT": "x"})
check_protocol(m, "the next execution, with env_vars")
t.is_(k.close(), 0, "...and the kernel exits 0 at the end of fd 0")

k = start_kernel()
rid = k.start("import os\nos._exit(3)")
try:
    k.until_end(rid, timeout=10)
    t.ok(False, "os._exit ends the kernel")
except KernelGone:
    t.is_(k.proc.wait(10), 3, "os._exit(3) ends the kernel with status 3 (the daemon restarts it)")
k.close()

k = start_kernel()
rid = k.start("import os\nos.closerange(3, 1 << 16)")
try:
    k.until_end(rid, timeout=10)
    t.ok(False, "closing the kernel's own fds ends it")
except KernelGone:
    t.ok(k.proc.wait(10) not in (0, None), "closing the kernel's own fds ends it, not 0 (no hang)")
k.close()

for bad in (b"not json\n", b'{"type":"execute","id":1,"code":"1"}\n', b'{"type":"other"}\n',
            b'{"type":"execute","id":"a","code":"1","env_vars":{"A":1}}\n',
            b'{"type":"environment","env_vars":{"A":["x"]}}\n',
            b'{"type":"environment","env_vars":"A=1"}\n'):
    k = start_kernel()
    k.proc.stdin.write(bad)
    k.proc.stdin.flush()
    rc = k.proc.wait(10)
    err = k.stderr_text()
    t.ok(rc not in (0, None) and "malformed request" in err,
         "a malformed request (%r): diagnostic on fd 2, exit %s" % (bad[:30], rc), err)
    k.close()

k = CheckedKernel(KERNEL, cwd=cwd, env=dict(env, HOME="/proc/hutch-test-no-home"))
m = k.execute("1")
time.sleep(0.1)
t.ok(Kernel.stderr(m) == "" and "not a writable location" in k.stderr_text(),
     "IPython's start-up warnings (an unwritable HOME) go to fd 2, not to the first execution")
k.close()

# Start-up cost, kernel and cell: python3 imports IPython only.
k = start_kernel()
m = k.execute("import sys\n"
              "sorted(m for m in ('matplotlib', 'pandas', 'numpy', 'PIL') if m in sys.modules)")
t.is_(text_of(m), "[]", "a fresh kernel has not imported matplotlib, pandas, numpy or PIL")
k.close()

t.is_(problems, [], "every execution of every kernel was well-formed")
t.done()
