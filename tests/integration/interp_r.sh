# The code interpreter's R kernel (src/interp/r_kernel.py) on its own, outside any sandbox:
# tests/interp/test_r_kernel.py, which prints the TAP (one skip line when R is not installed).
exec /usr/bin/python3 "$(dirname "$0")/../interp/test_r_kernel.py"
