#!/bin/sh
# The Python kernel of code contexts (src/interp/python_kernel.py) on its own, outside any
# sandbox: tests/interp/test_python_kernel.py, in TAP. Needs Debian's python3-ipython.
if ! /usr/bin/python3 -c 'import IPython' 2>/dev/null; then
    echo "1..0 # SKIP /usr/bin/python3 has no IPython (python3-ipython)"
    exit 0
fi
exec /usr/bin/python3 "$(dirname "$0")/../interp/test_python_kernel.py"
