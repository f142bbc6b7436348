"""hutch's Python kernel: one code context, speaking src/interp/PROTOCOL.md.

Run as `/usr/bin/python3 python_kernel.py` with the context's cwd. Requests arrive on fd 0, messages
leave on fd 1, one JSON object per line; fd 2 is for the kernel's own diagnostics. The code of a
cell runs in IPython's InteractiveShell (no Jupyter kernel, no zmq) with a stdin of /dev/null and
fds 1 and 2 that are pipes this process reads in threads, so output written by any means (print,
os.write, a `!cmd` child, C code) comes back as stdout / stderr messages as it is written.

Module level only imports (stdlib and IPython) and defines; everything that makes the process a
kernel (fds, threads, the shell) is in Kernel(): a zygote could import this module once and fork,
each child then calling main().
"""
import _thread   # raw locks and threads: C code only, usable whatever a cell did
import base64
import builtins
import codecs
import datetime
import faulthandler
import fcntl
import importlib.util
import io
import itertools
import json
import math
import numbers
import os
import queue
import re
import signal
import sys
import traceback
# Private references to what the kernel calls while user code runs: a cell may replace the module
# attributes (`os.write = None`) but not these names.
from os import read as _read, write as _write, dup2 as _dup2, environ as _environ
from types import TracebackType as _TracebackType
from select import select as _select
from time import monotonic as _monotonic
# _signal is signal.py's C core: the wrappers in signal.py go through enum, which needs builtins
from _signal import signal as _set_signal, pthread_sigmask as _sigmask

# IPython's completer imports jedi (70 ms of a 400 ms start) only to offer completions, which
# this kernel never asks for; hiding it during the import keeps start-up quicker, and user code
# can still import jedi afterwards.
sys.modules.setdefault("jedi", None)
try:
    from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
    from IPython.core.displayhook import DisplayHook  # noqa: E402
    from IPython.core.displaypub import DisplayPublisher  # noqa: E402
    from IPython.core.formatters import BaseFormatter  # noqa: E402
    from IPython.core.display_functions import display  # noqa: E402
    from traitlets import ObjectName, Unicode  # noqa: E402
    from traitlets.config import Config  # noqa: E402
finally:
    if sys.modules.get("jedi", 0) is None:
        del sys.modules["jedi"]

# The kernel's own functions resolve builtins from this private copy (CPython takes a function's
# builtins from its module's __builtins__ when the function is created, so this comes before
# them), so a cell that deletes or replaces builtins (`del builtins.len`) cannot break the
# kernel's own code.
__builtins__ = dict(vars(builtins))

LANGUAGE = "python"
CHUNK = 64 << 10                  # most bytes of output in one stdout / stderr message
MESSAGE_MAX = (32 << 20) - 4096   # a protocol line is at most 32 MiB; keep a margin
COALESCE_QUIET = 0.005            # output read within 5 ms of the last read joins its message...
COALESCE_MAX = 0.05               # ...for at most 50 ms, so print()'s two writes make one message
HIGH_FD = 100                     # the kernel's own fds live at or above this
BACKEND = "hutch_matplotlib_backend"
_KERNEL_FILE = os.path.abspath(__file__)

# IPython's MIME types and the names E2B gives them in a result (everything else goes to `extra`).
MIME_KEYS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}
OBJECT_KEYS = ("json", "data", "chart")
BINARY_MIMES = ("image/png", "image/jpeg", "application/pdf")


def _high_fd(fd):
    """A close-on-exec duplicate of fd at or above HIGH_FD (user code and `!cmd` children
    use the low numbers)."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)


def _block_sigint():
    """Called first in each of the kernel's threads: SIGINT is then always delivered to the
    main thread, where it interrupts the running cell."""
    _sigmask(signal.SIG_BLOCK, {signal.SIGINT})


# ------------------------------------------------------------------------------------------------
# JSON: what the daemon gets is strict JSON (no NaN), valid UTF-8, and never a line too long.

# iterencode(..., _one_shot=True) goes straight to the C encoder: unlike json.dumps() it looks up
# no builtins, so it keeps working while a cell has broken them.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# raw_decode(), unlike json.loads(), goes straight to the C scanner too.
_DECODER = json.JSONDecoder()


def _dump(obj):
    return "".join(_ENCODER.iterencode(obj, True)).encode("utf-8", "replace") + b"\n"


def _jsonable(value, strict=False, depth=0):
    """value made of JSON types only: non-finite floats become null, dict keys strings, dates
    ISO strings, numpy values Python ones. Anything else becomes its str(), or with strict
    raises TypeError (the test for whether a dict is JSON data at all)."""
    if depth > 200:
        raise ValueError("nested too deeply")
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 64):
            return value
        if strict:
            raise TypeError("integer out of the 64-bit range")
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _jsonable(v, strict, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, strict, depth + 1) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return _jsonable(value.tolist(), strict, depth + 1)
    if isinstance(value, numbers.Integral):
        return _jsonable(int(value), strict)
    if isinstance(value, numbers.Real):
        return _jsonable(float(value), strict)
    if strict:
        raise TypeError("not JSON data: %s" % type(value).__name__)
    return str(value)


def _size(value):
    return len(_dump(value))


def _encode_message(msg):
    """One protocol line for msg. A message that would be too long loses its biggest parts
    first: a result whole formats (named in the returned list), an error half its longest text
    at a time."""
    try:
        line = _dump(msg)
    except (TypeError, ValueError):
        msg = _jsonable(msg)
        line = _dump(msg)
    dropped = []
    while len(line) > MESSAGE_MAX:
        fixed = ("type", "is_main_result", "id", "name")
        key = max((k for k in msg if k not in fixed), key=lambda k: _size(msg[k]))
        if msg["type"] == "result":
            if key == "extra":
                msg["extra"] = {}
            else:
                del msg[key]
            dropped.append(key)
        else:
            msg[key] = msg[key][: len(msg[key]) // 2] + "\n[... cut: too long for one message]"
        line = _dump(msg)
    return line, dropped


# ------------------------------------------------------------------------------------------------
# Output capture: fds 1 and 2 are pipes; one thread per pipe forwards what arrives.

class _FdWriter(io.RawIOBase):
    """The raw layer under sys.stdout / sys.stderr: each write goes to the fd at once, whole
    (a plain FileIO under a TextIOWrapper would drop the rest of a partial write)."""

    def __init__(self, fd):
        super().__init__()
        self._fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, data):
        view = memoryview(data).cast("B")
        while view:
            view = view[_write(self._fd, view):]
        return len(data)


class _Stream:
    """One captured fd (1 or 2): its pipe, and the thread that turns what is written into it
    into messages.

    The end of an execution (and the point before each result) is found in the byte stream
    itself: the kernel writes a marker into the pipe, and when the thread reaches it, all that
    was written before it has been sent. Markers are b"\\0hutch:SECRET:" + kind + 10 digits +
    b"\\0": kind E ends an execution (the thread then stops reading until the next one starts, so
    what a background thread writes meanwhile belongs to the next execution), kind S only syncs.
    """

    def __init__(self, kernel, name, fd, secret):
        self.kernel = kernel
        self.name = name
        self.fd = fd
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        self.read_fd = _high_fd(read_end)
        self.write_fd = _high_fd(write_end)
        os.close(read_end)
        os.close(write_end)
        self.prefix = b"\0hutch:" + secret + b":"
        self.marker_len = len(self.prefix) + 1 + 10 + 1
        self.gate = _thread.allocate_lock()   # released by the kernel when an execution starts
        self.gate.acquire()
        self.waiters = {}                     # marker number -> lock to release when reached
        self.leftover = b""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def attach(self):
        """Makes the pipe this process's fd 1 or 2 (again, after a cell closed or replaced it)."""
        _dup2(self.write_fd, self.fd)

    def start(self):
        _thread.start_new_thread(self._run, ())

    def marker(self, kind, number):
        return self.prefix + kind + b"%010d" % number + b"\0"

    def _run(self):
        _block_sigint()
        try:
            while True:
                self.gate.acquire()
                self._forward_until_end()
        except BaseException as e:  # a broken pipe or a bug: the kernel cannot go on without it
            self.kernel.die("%s forwarding failed: %r" % (self.name, e))

    def _forward_until_end(self):
        buf, self.leftover = self.leftover, b""
        while True:
            if not buf:
                buf = self._read()
            start = buf.find(self.prefix)
            if start < 0:
                keep = self._partial_prefix(buf)
                self._emit(buf[:len(buf) - keep])
                buf = buf[len(buf) - keep:]
                if keep:
                    buf += self._read()
                continue
            self._emit(buf[:start])
            buf = buf[start:]
            while len(buf) < self.marker_len:
                buf += self._read()
            at = len(self.prefix)
            kind, digits, end = buf[at:at + 1], buf[at + 1:at + 11], buf[at + 11:at + 12]
            if kind not in (b"E", b"S") or not digits.isdigit() or end != b"\0":
                self._emit(buf[:1])   # not one of ours after all: plain output
                buf = buf[1:]
                continue
            buf = buf[self.marker_len:]
            if kind == b"E":
                self._emit(b"", final=True)
            waiter = self.waiters.pop(int(digits), None)
            if waiter is not None:
                waiter.release()
            if kind == b"E":
                self.leftover = buf
                return

    def _partial_prefix(self, buf):
        """How many bytes at the end of buf could be the start of a marker."""
        for n in range(min(len(self.prefix) - 1, len(buf)), 0, -1):
            if buf.endswith(self.prefix[:n]):
                return n
        return 0

    def _read(self):
        """Bytes from the pipe (blocking), with whatever else arrives right after them."""
        data = _read(self.read_fd, CHUNK)
        if not data:
            raise EOFError("all write ends of the pipe are closed")
        deadline = _monotonic() + COALESCE_MAX
        while len(data) < CHUNK and self.prefix not in data:   # a marker is not kept waiting
            left = deadline - _monotonic()
            if left <= 0 or not _select([self.read_fd], [], [], min(COALESCE_QUIET, left))[0]:
                break
            more = _read(self.read_fd, CHUNK - len(data))
            if not more:
                break
            data += more
        return data

    def _emit(self, data, final=False):
        for start in range(0, max(len(data), 1), CHUNK):
            last = start + CHUNK >= len(data)
            text = self.decoder.decode(data[start:start + CHUNK], final and last)
            if text:
                self.kernel.send({"type": self.name, "text": text})


# ------------------------------------------------------------------------------------------------
# IPython: where results, displays and tracebacks go.

class _DisplayHook(DisplayHook):
    """The cell's value (Jupyter's execute_result) becomes a main result."""

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self.shell.kernel.publish(format_dict, True)

    def finish_displayhook(self):
        pass


class _DisplayPublisher(DisplayPublisher):
    """display() and figures (Jupyter's display_data) become results that are not main."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
        if not update:   # E2B's server drops update_display_data; so do we
            self.shell.kernel.publish(data, False)

    def clear_output(self, wait=False):
        pass


class _Shell(InteractiveShell):
    # `!cmd` runs with the kernel's fds 1 and 2 (our pipes), like os.system, instead of IPython's
    # default of a pty read by pexpect (which turns "\n" into "\r\n" and merges stderr).
    system = InteractiveShell.system_raw

    def _showtraceback(self, etype, evalue, stb):
        self.kernel.report_error(etype, evalue, stb)

    def ask_exit(self):
        # exit() / quit() would end the REPL; here they act as sys.exit() does in a cell:
        # SystemExit is reported and the context lives on.
        raise SystemExit()

    def enable_matplotlib(self, gui=None):
        # `%matplotlib inline` (and a bare `%matplotlib`) select this kernel's own backend, which
        # already behaves as the inline one; Jupyter's matplotlib_inline is not installed.
        if gui not in (None, "inline", "auto"):
            return super().enable_matplotlib(gui)
        import matplotlib
        import matplotlib.pyplot as plt
        plt.switch_backend("module://" + BACKEND)
        matplotlib.interactive(True)
        return "inline", "module://" + BACKEND


def _formatter(mime, repr_method):
    """A formatter for one of E2B's own MIME types (e2b/data, e2b/chart)."""
    return type("_Formatter", (BaseFormatter,), {
        "format_type": Unicode(mime),
        "print_method": ObjectName(repr_method),
        "_return_type": (dict,),
    })


def _quiet(fn):
    """fn, returning None instead of raising: a chart or data dict that cannot be made is left
    out of the result, as E2B's server does."""
    def wrapper(obj):
        try:
            return fn(obj)
        except Exception:
            return None
    return wrapper


def _dataframe_data(df):
    """E2B's `data` for a DataFrame: {column: [values...]}, timestamps as ISO strings."""
    timestamp = sys.modules["pandas"].Timestamp
    return {column: [v.isoformat() if isinstance(v, timestamp) else v for v in values]
            for column, values in df.to_dict(orient="list").items()}


def _figure_png(fig):
    from IPython.core.pylabtools import print_figure
    return print_figure(fig, "png", bbox_inches="tight")


def _container_json(obj):
    """E2B's server gives a dict or list value that is JSON data a `json` format (numpy values
    as their lists and numbers, keys that are not strings as strings); one that is not JSON
    data gets none."""
    try:
        return _jsonable(obj, strict=True)
    except (TypeError, ValueError, RecursionError):
        return None


# ------------------------------------------------------------------------------------------------
# Imports of matplotlib and PIL are watched, so that the kernel sets them up only when a cell
# imports them.

class _ImportWatcher:
    """A sys.meta_path finder: runs a hook right after a watched module is imported, and serves
    the kernel's matplotlib backend module."""

    def __init__(self, hooks, modules):
        self.hooks = hooks        # module name -> fn(module)
        self.modules = modules    # synthetic module name -> fn(module) that fills it

    def find_spec(self, name, path=None, target=None):
        if name in self.modules:
            return importlib.util.spec_from_loader(name, _Loader(None, self.modules[name]))
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, hook)
                return spec
        return None


class _Loader:
    """Runs the real loader (if any), then the hook; anything else is the real loader's."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def __getattr__(self, name):
        loader = self.__dict__.get("_loader")   # not self._loader: that could recurse here
        if loader is None:
            raise AttributeError(name)
        return getattr(loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec) if self._loader else None

    def exec_module(self, module):
        if self._loader:
            self._loader.exec_module(module)
        try:
            self._hook(module)
        except Exception as e:
            print("hutch: setting up %s failed: %r" % (module.__name__, e), file=sys.stderr)


def _matplotlib_imported(matplotlib):
    # What IPython's %matplotlib inline does: this kernel's backend, interactive mode (figures
    # a cell leaves open are shown after it).
    if not _environ.get("MPLBACKEND"):
        matplotlib.rcParams["backend"] = "module://" + BACKEND
    matplotlib.interactive(True)


def _fill_backend(module):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.backend_bases import FigureManagerBase
    module.FigureCanvas = FigureCanvasAgg
    module.FigureManager = FigureManagerBase
    module.show = show_figures


def show_figures(*args, **kwargs):
    """plt.show(), and the end of each cell: every open pyplot figure becomes a display result
    (png, chart) and is closed, as Jupyter's inline backend does."""
    from matplotlib._pylab_helpers import Gcf
    import matplotlib.pyplot as plt
    managers = Gcf.get_all_fig_managers()
    try:
        for manager in managers:
            display(manager.canvas.figure)
    finally:
        if managers:
            plt.close("all")


def _image_imported(image):
    """img.save(path) also displays the image, as E2B's kernels do (a save to a file object, as
    the image's own _repr_png_ makes, does not: that would recurse)."""
    save = image.Image.save
    if getattr(save, "_hutch_displays", False):
        return

    def save_and_display(self, fp, format=None, **params):
        result = save(self, fp, format, **params)
        if isinstance(fp, (str, bytes, os.PathLike)):
            display(self)
        return result

    save_and_display._hutch_displays = True
    image.Image.save = save_and_display


def _imageshow_imported(image_show):
    class DisplayViewer(image_show.Viewer):
        """img.show() displays the image as a result instead of looking for an X viewer."""

        def show(self, image, **options):
            display(image)
            return 1

    image_show.register(DisplayViewer, order=-1)


# ------------------------------------------------------------------------------------------------
# Charts: E2B's chart objects (what @e2b/code-interpreter's Chart types describe) read from a
# matplotlib figure, so that an agent gets the numbers and not only the picture.

_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def figure_chart(fig):
    axes = fig.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if len(axes) == 1:
        return _axes_chart(axes[0])
    suptitle = getattr(fig, "_suptitle", None)
    return {"type": "superchart", "title": suptitle.get_text() if suptitle else "",
            "elements": [_axes_chart(ax) for ax in axes]}


def _chart_kind(ax):
    """E2B's classification, by the kinds of artists the axes holds."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text
    artists = [a for a in getattr(ax, "_children", ax.get_children()) if not isinstance(a, Text)]
    if all(isinstance(a, Line2D) for a in artists):
        return "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_rule(a))]
    for kind, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if all(isinstance(a, cls) for a in artists):
            return kind
    return "unknown"


def _is_rule(line):
    """A horizontal or vertical two-point line (axhline, axvline): not data."""
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def _axes_chart(ax):
    kind = _chart_kind(ax)
    build = {"line": _line_chart, "scatter": _scatter_chart, "bar": _bar_chart,
             "pie": _pie_chart, "box_and_whisker": _box_chart}.get(kind)
    if build is None:
        return {"type": "unknown", "title": ax.get_title() or None, "elements": []}
    return build(ax)


def _chart_2d(ax, kind):
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        match = _UNIT.search(label) if label else None
        chart[axis + "_label"] = label or None
        chart[axis + "_unit"] = (match.group(1) or match.group(2)) if match else None
    return chart


def _swap_axes(chart):
    """Bars and boxes lying down: x names the categories, y the values, as E2B has it."""
    for a, b in (("x_label", "y_label"), ("x_unit", "y_unit")):
        chart[a], chart[b] = chart[b], chart[a]


def _is_date_axis(axis):
    import matplotlib.dates as mdates
    kinds = tuple(c for c in (getattr(mdates, "_SwitchableDateConverter", None),
                              mdates.DateConverter, mdates.ConciseDateConverter) if c)
    return isinstance(axis.converter, kinds)


def _point_chart(ax, kind):
    import matplotlib.category
    import matplotlib.dates as mdates
    chart = _chart_2d(ax, kind)
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        ticks = list(axis.get_majorticklocs())
        labels = [t.get_text() for t in axis.get_majorticklabels()]
        if _is_date_axis(axis):
            chart[name + "_ticks"] = [mdates.num2date(t).isoformat() for t in ticks]
            chart[name + "_scale"] = "datetime"
        else:
            chart[name + "_ticks"] = [float(t) for t in ticks]
            if scale != "linear":
                chart[name + "_scale"] = scale
            elif isinstance(axis.converter, matplotlib.category.StrCategoryConverter):
                chart[name + "_scale"] = "categorical"
            else:
                # E2B's test: ticks 0, 1, 2... labelled with something else than the numbers
                categorical = all(t == i and str(i) != label
                                  for i, (t, label) in enumerate(zip(ticks, labels)))
                chart[name + "_scale"] = "categorical" if categorical else "linear"
        chart[name + "_tick_labels"] = labels
    return chart


def _point(value):
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if type(value).__name__ == "datetime64":
        return str(value.astype("datetime64[s]"))
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def _line_chart(ax):
    chart = _point_chart(ax, "line")
    for line in ax.get_lines():
        if _is_rule(line):
            continue
        label = line.get_label()
        if label.startswith("_child"):
            label = "Line " + label[6:]
        points = [[_point(x), _point(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
        chart["elements"].append({"label": label, "points": points})
    return chart


def _scatter_chart(ax):
    """A scatter keeps only the numbers matplotlib turned its points into: dates become ISO
    strings again."""
    import matplotlib.dates as mdates
    chart = _point_chart(ax, "scatter")
    convert = [mdates.num2date if _is_date_axis(axis) else float for axis in (ax.xaxis, ax.yaxis)]
    for collection in ax.collections:
        points = [[_point(convert[0](x)), _point(convert[1](y))]
                  for x, y in collection.get_offsets()]
        chart["elements"].append({"label": collection.get_label(), "points": points})
    return chart


def _position_label(axis, low, high):
    """The name of what stands between low and high on axis (a bar, a box): the label of the
    tick nearest its middle when the ticks were placed for it (categories, boxplot's labels,
    xticks(x, names)), else the middle itself, as a number or a date."""
    from matplotlib.category import StrCategoryLocator
    from matplotlib.ticker import FixedLocator
    middle = (low + high) / 2
    if isinstance(axis.get_major_locator(), (FixedLocator, StrCategoryLocator)):
        slack = 1e-9 * max(1.0, abs(low), abs(high))
        named = [(abs(tick - middle), label.get_text())
                 for tick, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels())
                 if low - slack <= tick <= high + slack and label.get_text()]
        if named:
            return min(named)[1]
    if _is_date_axis(axis):
        import matplotlib.dates as mdates
        return mdates.num2date(middle).isoformat()
    return "%g" % middle


def _bar_chart(ax):
    from matplotlib.container import BarContainer
    chart = _chart_2d(ax, "bar")
    lying = False
    for container in ax.containers:
        if not isinstance(container, BarContainer) or not container.patches:
            continue
        group = container.get_label()
        if group.startswith("_container"):
            group = "Group " + group[10:]
        orientation = getattr(container, "orientation", None)
        if orientation is None:   # E2B's guess: bars of one height are lying down
            heights = [r.get_height() for r in container]
            orientation = "horizontal" if all(h == heights[0] for h in heights) else "vertical"
        lying = orientation == "horizontal"
        values = getattr(container, "datavalues", None)
        if values is None:
            values = [r.get_width() if lying else r.get_height() for r in container]
        for rect, value in zip(container, values):
            if lying:
                label = _position_label(ax.yaxis, rect.get_y(), rect.get_y() + rect.get_height())
            else:
                label = _position_label(ax.xaxis, rect.get_x(), rect.get_x() + rect.get_width())
            chart["elements"].append({"label": label, "group": group, "value": float(value)})
    if lying:
        _swap_axes(chart)
    return chart


def _round(value):
    """E2B's rounding of box and pie numbers: 8 significant digits, fewer for large numbers."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return value
    digits = max(1, 8 - math.floor(math.log10(abs(value))))
    return float("%.*g" % (digits, value))


def _pie_chart(ax):
    chart = {"type": "pie", "title": ax.get_title() or None, "elements": []}
    for wedge in ax.patches:
        chart["elements"].append({"label": wedge.get_label(),
                                  "angle": abs(_round(wedge.theta2 - wedge.theta1)),
                                  "radius": float(wedge.r)})
    return chart


def _box_chart(ax):
    """Boxes from boxplot(patch_artist=True): the box patches give the quartiles, the lines the
    median, the whiskers and the outliers."""
    chart = _chart_2d(ax, "box_and_whisker")
    boxes = []
    for patch in ax.patches:
        vertices = patch.get_path().vertices
        xs = [_round(v) for v in vertices[:, 0]]
        ys = [_round(v) for v in vertices[:, 1]]
        boxes.append({"x0": min(xs), "x1": max(xs), "y0": min(ys), "y1": max(ys), "outliers": []})
    if not boxes:
        return chart
    lines = [([_round(v) for v in line.get_xdata()], [_round(v) for v in line.get_ydata()],
              line.get_linestyle() in ("None", "none", "", " ")) for line in ax.lines]
    lying = _boxes_lying(boxes, lines)
    if lying:
        _swap_axes(chart)
        for box in boxes:
            box["x0"], box["x1"], box["y0"], box["y1"] = box["y0"], box["y1"], box["x0"], box["x1"]
        lines = [(ys, xs, markers) for xs, ys, markers in lines]

    def box_at(*xs):
        for box in boxes:
            if all(box["x0"] <= x <= box["x1"] for x in xs):
                return box
        return None

    for xs, ys, markers_only in lines:
        if markers_only:   # the fliers: each point is an outlier of the box it stands in
            for x, y in zip(xs, ys):
                box = box_at(x)
                if box is not None:
                    box["outliers"].append(y)
            continue
        if len(xs) != 2 or len(ys) != 2:
            continue
        box = box_at(*xs)
        if box is None:
            continue
        if ys[0] == ys[1]:
            if sorted(xs) == [box["x0"], box["x1"]]:
                box["median"] = ys[0]   # spans the box: the median (caps are narrower)
        elif xs[0] == xs[1]:          # a whisker, from a quartile outwards
            low, high = min(ys), max(ys)
            if high == box["y0"]:
                box["min"] = low
            elif low == box["y1"]:
                box["max"] = high
    axis = ax.yaxis if lying else ax.xaxis
    for box in boxes:
        chart["elements"].append({
            "label": _position_label(axis, box["x0"], box["x1"]),
            "min": box.get("min", box["y0"]),
            "first_quartile": box["y0"],
            "median": box.get("median"),
            "third_quartile": box["y1"],
            "max": box.get("max", box["y1"]),
            "outliers": box["outliers"],
        })
    return chart


def _boxes_lying(boxes, lines):
    """Whether the boxes lie down (boxplot(vert=False)): a vertical box's median is a
    horizontal line across it. Without one, E2B's guess: lying boxes all have one height."""
    box = boxes[0]
    for xs, ys, markers_only in lines:
        if markers_only or len(xs) != 2:
            continue
        inside = all(box["x0"] <= x <= box["x1"] for x in xs) and \
            all(box["y0"] <= y <= box["y1"] for y in ys)
        if inside and ys[0] == ys[1] and {xs[0], xs[1]} == {box["x0"], box["x1"]}:
            return False
        if inside and xs[0] == xs[1] and {ys[0], ys[1]} == {box["y0"], box["y1"]}:
            return True
    heights = [b["y1"] - b["y0"] for b in boxes]
    return len(boxes) > 1 and all(h == heights[0] for h in heights)


# ------------------------------------------------------------------------------------------------
# The kernel.

class MalformedRequest(Exception):
    pass


class Kernel:
    def __init__(self, diag_fd):
        """All that makes this process a kernel: fds, threads, the shell. (A zygote that forks
        kernels would run this in each child.) diag_fd: where the kernel's own failures go."""
        self.diag_fd = diag_fd
        self.request_fd = _high_fd(0)
        self.message_fd = _high_fd(1)
        faulthandler.enable(os.fdopen(self.diag_fd, "w", closefd=False))
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.null_fd = _high_fd(null)
        os.close(null)
        self.outbox = queue.SimpleQueue()     # (line, lock released once written)
        _thread.start_new_thread(self._write_messages, ())
        secret = os.urandom(16).hex().encode()
        self.streams = [_Stream(self, "stdout", 1, secret), _Stream(self, "stderr", 2, secret)]
        self.marker_numbers = itertools.count(1)   # next() is atomic: any thread may sync
        self.executing = False          # from a request until its end_of_execution
        self.running = False            # while the cell's code runs: SIGINT interrupts it
        self.interrupt_pending = False  # SIGINT came in an execution before its code ran
        self.error_sent = False         # at most one error per execution
        self.stdin = self.stdout = self.stderr = None
        self.restore_process_state()   # fds 0, 1, 2 are now /dev/null and the pipes
        for stream in self.streams:
            stream.start()
        # The script's own directory would shadow the user's modules; a REPL has '' (the cwd).
        here = os.path.dirname(_KERNEL_FILE)
        if sys.path and os.path.abspath(sys.path[0] or ".") == here:
            sys.path[0] = ""
        sys.argv = [""]
        hooks = {"matplotlib": _matplotlib_imported, "PIL.ImageShow": _imageshow_imported,
                 "PIL.Image": _image_imported}
        sys.meta_path.insert(0, _ImportWatcher(hooks, {BACKEND: _fill_backend}))
        # A zygote imported some of them before it forked this kernel: set up as if just imported.
        for name, hook in hooks.items():
            if name in sys.modules:
                try:
                    hook(sys.modules[name])
                except Exception as e:
                    print("hutch: setting up %s failed: %r" % (name, e), file=sys.stderr)
        # What IPython says while it starts (a HOME it cannot write to...) is for the daemon's
        # log, not for the first execution's output.
        sys.stdout = sys.stderr = io.TextIOWrapper(_FdWriter(diag_fd), encoding="utf-8",
                                                   errors="backslashreplace", write_through=True)
        self.shell = self._make_shell()
        self.restore_process_state()   # sys.stdout and sys.stderr write to the pipes again

    def _make_shell(self):
        shell = make_shell()  # the zygote's, when this process is one of its forks
        shell.kernel = self
        shell.events.register("post_execute", self._show_open_figures)
        return shell

    # -- messages ----------------------------------------------------------------------------

    def _write_messages(self):
        """The only writer of fd 1's protocol end: a line is written whole whatever signal the
        main thread gets meanwhile."""
        _block_sigint()
        while True:
            line, written = self.outbox.get()
            view = memoryview(line)
            try:
                while view:
                    view = view[_write(self.message_fd, view):]
            except OSError as e:
                self.die("cannot write messages: %s" % e)
            written.release()

    def send(self, msg):
        """Sends msg and returns once it is written (so output cannot pile up in memory)."""
        line, dropped = _encode_message(msg)
        written = _thread.allocate_lock()
        written.acquire()
        self.outbox.put((line, written))
        written.acquire()
        if dropped:
            self.send({"type": "stderr", "text": "hutch: result too large for one message; left "
                       "out: %s\n" % ", ".join(dropped)})

    def die(self, why):
        _die(self.diag_fd, why)

    def publish(self, data, is_main):
        """A result from IPython's display machinery: data is a MIME bundle."""
        msg = {"type": "result"}
        extra = {}
        for mime, value in data.items():
            if isinstance(value, (bytes, bytearray, memoryview)):
                value = base64.b64encode(value).decode("ascii")
            elif mime in BINARY_MIMES and isinstance(value, str):
                value = value.strip()   # bare base64, as E2B's SDK wants it
            key = MIME_KEYS.get(mime)
            if key is None:
                extra[mime] = value
            elif key in OBJECT_KEYS:
                # data and chart are objects; json an object or a list, as E2B's
                if isinstance(value, dict) or (key == "json" and isinstance(value, list)):
                    msg[key] = value
            elif isinstance(value, str):
                msg[key] = value
        text = msg.get("text")
        # E2B strips the quotes of a str's repr: 'abc' -> abc
        if text and (text[0] == text[-1] == "'" or text[0] == text[-1] == '"'):
            msg["text"] = text[1:-1]
        msg["extra"] = extra
        msg["is_main_result"] = is_main
        self.sync_output(end=False)   # output written before the result goes before it
        self.send(msg)

    def report_error(self, etype, evalue, stb):
        if self.error_sent:
            return
        self.error_sent = True
        try:
            value = str(evalue)
        except Exception:
            value = "<unprintable %s>" % getattr(etype, "__name__", "exception")
        # Frames of this file (the SIGINT handler raising KeyboardInterrupt, sys.stdout's write)
        # are the kernel's, not the user's. E2B's server joins Jupyter's traceback lines with ""
        # (IPython's lines carry their own newlines, except the header's).
        own = "File %s:" % _KERNEL_FILE
        self.send({"type": "error", "name": getattr(etype, "__name__", str(etype)),
                   "value": value, "traceback": "".join(s for s in stb if not s.startswith(own))})

    # -- output ------------------------------------------------------------------------------

    def sync_output(self, end):
        """Returns once all that was written to fds 1 and 2 before it has been sent. With end,
        the forwarding threads then wait for the next execution."""
        number = next(self.marker_numbers)
        kind = b"E" if end else b"S"
        locks = []
        for stream in self.streams:
            lock = _thread.allocate_lock()
            lock.acquire()
            stream.waiters[number] = lock
            locks.append(lock)
        for stream in self.streams:
            try:
                _write(stream.write_fd, stream.marker(kind, number))
            except OSError as e:
                self.die("the %s pipe is gone: %s" % (stream.name, e))
        for lock in locks:
            lock.acquire()

    def restore_process_state(self):
        """fds 0, 1, 2, sys.std*, the SIGINT handler and mask: as the kernel set them, whatever
        the last cell did to them (closed fd 1, set sys.stdout = None, changed the handler)."""
        _dup2(self.null_fd, 0)
        for stream in self.streams:
            stream.attach()
        if self.stdin is None or self.stdin.closed:
            self.stdin = open(0, "r", closefd=False, encoding="utf-8")
        # write through: each write reaches the pipe at once, in order with os.write(1, ...)
        if self.stdout is None or self.stdout.closed:
            self.stdout = io.TextIOWrapper(_FdWriter(1), encoding="utf-8",
                                           errors="backslashreplace", write_through=True)
        if self.stderr is None or self.stderr.closed:
            self.stderr = io.TextIOWrapper(_FdWriter(2), encoding="utf-8",
                                           errors="backslashreplace", write_through=True)
        sys.stdin = sys.__stdin__ = self.stdin
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr
        _set_signal(signal.SIGINT, self._on_sigint)
        _sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    @staticmethod
    def _flush_c_stdout():
        """C code's printf output sits in libc's stdout buffer (a pipe is not a tty): flush it
        into the pipe before the end of the execution. Only stdout: fflush(NULL) would lock every
        FILE, and so wait for one that a C thread holds in a blocking read."""
        try:
            import ctypes
            libc = ctypes.CDLL(None)
            libc.fflush(ctypes.c_void_p.in_dll(libc, "stdout"))
        except Exception:
            pass

    @staticmethod
    def _show_open_figures():
        matplotlib = sys.modules.get("matplotlib")
        if "matplotlib.pyplot" in sys.modules and matplotlib and matplotlib.is_interactive():
            show_figures()

    # -- executions --------------------------------------------------------------------------

    def _on_sigint(self, signum, frame):
        """Never raises in the kernel's own code: only in the cell's, or just before it (then
        the cell does not run)."""
        if self.running:
            raise KeyboardInterrupt
        self.interrupt_pending = self.executing

    def serve(self):
        self.send({"type": "ready", "language": LANGUAGE, "pid": os.getpid()})
        for line in self._requests():
            try:
                request = self._parse(line)
            except MalformedRequest as e:
                self.die("malformed request: %s: %r" % (e, line[:200]))
            if request["type"] == "environment":
                self.take_environment(request["env_vars"])
            else:
                self.execute(request)
        os._exit(0)

    def _requests(self):
        """The lines of fd 0; stops at its end."""
        pending = []
        while True:
            data = _read(self.request_fd, 1 << 16)
            if not data:
                if pending:
                    self.die("request cut short at end of input: %r" % b"".join(pending)[:200])
                return
            while True:
                newline = data.find(b"\n")
                if newline < 0:
                    if data:
                        pending.append(data)
                    break
                pending.append(data[:newline])
                yield b"".join(pending)
                pending = []
                data = data[newline + 1:]

    @staticmethod
    def _parse(line):
        try:
            text = line.decode("utf-8")
            request, end = _DECODER.raw_decode(text)
        except ValueError as e:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise MalformedRequest("not JSON (%s)" % e)
        if text[end:].strip():
            raise MalformedRequest("more than one JSON value")
        if not isinstance(request, dict) or request.get("type") not in ("execute", "environment"):
            raise MalformedRequest("not an execute or environment request")
        if request["type"] == "execute" and (not isinstance(request.get("id"), str) or
                                             not isinstance(request.get("code"), str)):
            raise MalformedRequest("id and code must be strings")
        env = request.get("env_vars") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise MalformedRequest("env_vars must be an object of strings")
        request["env_vars"] = env
        return request

    def execute(self, request):
        self.executing = True
        self.interrupt_pending = False
        self.error_sent = False
        saved_env = self._set_env(request["env_vars"])
        for stream in self.streams:
            stream.gate.release()
        try:
            self.running = True
            if self.interrupt_pending:
                raise KeyboardInterrupt
            self.shell.run_cell(request["code"], store_history=True)
            self.running = False
        except BaseException as e:
            # KeyboardInterrupt that came before IPython's own handler or after it, or IPython
            # failing on something a cell broke (then its traceback printer may fail too). The
            # frames are the kernel's and IPython's, not the cell's: the exception alone.
            self.running = False
            try:
                self.shell.showtraceback(exception_only=True)
            except BaseException:
                self.report_error(type(e), e, ["%s: %s\n" % (type(e).__name__, e)])
        self._restore_env(saved_env)
        self.restore_process_state()
        self._flush_c_stdout()
        self.sync_output(end=True)
        self.send({"type": "end_of_execution", "id": request["id"]})
        self.executing = False

    def take_environment(self, env_vars):
        """The sandbox's env vars, for a kernel started before its sandbox was claimed (a warm
        pool's): set for good, and what Python and matplotlib take from the environment at a
        start taken again (environment_hook, where a zygote forked this kernel). Between
        executions: what fails goes to the daemon's log (fd 2's diagnostics)."""
        try:
            _environ.update(env_vars)
            if environment_hook is not None:
                environment_hook(dict(_environ))
        except Exception as e:
            _write(self.diag_fd, ("python kernel: the environment: %r\n" % (e,)).encode(
                errors="replace"))

    # os.environ is Python code that needs builtins: a failure here is reported, never fatal.

    def _set_env(self, env_vars):
        saved = {}
        for name, value in env_vars.items():
            try:
                saved[name] = _environ.get(name)
                _environ[name] = value
            except Exception as e:
                saved.pop(name, None)
                self.send({"type": "stderr", "text": "hutch: env var %r not set: %r\n" % (name, e)})
        return saved

    def _restore_env(self, saved):
        for name, value in saved.items():
            try:
                if value is None:
                    _environ.pop(name, None)
                else:
                    _environ[name] = value
            except Exception as e:
                self.send({"type": "stderr", "text": "hutch: env var %r not restored: %r\n"
                           % (name, e)})


# Set by a zygote in the kernels it forks: fn(env), what a start takes from env taken again.
environment_hook = None


def _die(diag_fd, why):
    try:
        _write(diag_fd, ("python kernel: %s\n" % why).encode(errors="replace"))
    finally:
        os._exit(1)


def make_shell():
    """The one InteractiveShell of this process (made at the first call, which costs 40-90 ms: a
    zygote calls it before it forks, so that its kernels find it made). It holds no thread and no
    file (history in memory), and nothing of a kernel's until Kernel() takes it."""
    if _Shell.initialized():
        return _Shell.instance()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"   # no sqlite file, no history thread
    config.InteractiveShell.colors = "NoColor"     # E2B's kernels: tracebacks without ANSI
    config.PlainTextFormatter.max_seq_length = 0   # E2B's too: long lists are not cut
    shell = _Shell.instance(config=config, displayhook_class=_DisplayHook,
                            display_pub_class=_DisplayPublisher)
    # The formatters too (14 ms of traitlets' defaults): made once, in the zygote.
    formatters = shell.display_formatter.formatters
    data = _formatter("e2b/data", "_repr_e2b_data_")(parent=shell.display_formatter)
    chart = _formatter("e2b/chart", "_repr_e2b_chart_")(parent=shell.display_formatter)
    formatters["e2b/data"] = data
    formatters["e2b/chart"] = chart
    # by name: none of these modules is imported until a cell imports it
    data.for_type_by_name("pandas.core.frame", "DataFrame", _quiet(_dataframe_data))
    chart.for_type_by_name("matplotlib.figure", "Figure", _quiet(figure_chart))
    formatters["image/png"].for_type_by_name("matplotlib.figure", "Figure", _figure_png)
    formatters["application/json"].for_type(dict, _container_json)
    formatters["application/json"].for_type(list, _container_json)
    _format_only_shown_frames(shell)
    return shell


def _trimmed(tb, offset):
    """tb without its first offset entries (IPython's own, which it hides) and its last ones in
    this file (the SIGINT handler raising an interrupt's KeyboardInterrupt, sys.stdout's write):
    a chain of its own when one is cut at the end; the exception's own is left as it is."""
    while offset > 0 and tb is not None:
        tb, offset = tb.tb_next, offset - 1
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    kept = len(entries)
    while kept > 1 and entries[kept - 1].tb_frame.f_code.co_filename == _KERNEL_FILE:
        kept -= 1
    if kept == len(entries):
        return entries[0] if entries else None
    chain = None
    for e in reversed(entries[:kept]):
        chain = _TracebackType(chain, e.tb_frame, e.tb_lasti, e.tb_lineno)
    return chain


def _format_only_shown_frames(shell):
    """IPython's traceback printer (stack_data) parses the whole source of every file in a
    traceback, the frames it hides and the ones this kernel cuts (report_error) included: its
    interactiveshell.py (run_code's frame, in every cell's traceback) and this file took 70-120
    ms of a context's first error and 45-60 ms more of its first interrupt, seconds on a slow
    machine, where an interrupt's grace ran out on it. It is given only the frames it shows."""
    printer = shell.InteractiveTB
    format_all = printer.structured_traceback

    def structured_traceback(etype=None, value=None, tb=None, tb_offset=None,
                             number_of_lines_of_context=5):
        if etype is None or tb is None or isinstance(tb, tuple):
            return format_all(etype, value, tb, tb_offset, number_of_lines_of_context)
        offset = printer.tb_offset if tb_offset is None else tb_offset
        lines = format_all(etype, value, _trimmed(tb, offset), 0, number_of_lines_of_context)
        printer.tb = tb  # %debug's: the whole of it
        return lines

    printer.structured_traceback = structured_traceback


def main():
    diag_fd = _high_fd(2)   # fd 2 is soon a pipe of the kernel's own: keep the daemon's
    try:
        Kernel(diag_fd).serve()
    except BaseException:
        error = sys.exc_info()[1]
        try:
            why = traceback.format_exc()
        except BaseException:   # the traceback module needs the builtins a cell may have broken
            why, tb = repr(error), error.__traceback__
            while tb is not None:
                why += "\n  %s:%d" % (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
                tb = tb.tb_next
        _die(diag_fd, why)


if __name__ == "__main__":
    main()
