# The code interpreter's Java kernel (src/interp/java_kernel.py) on its own, outside any sandbox:
# tests/interp/test_java_kernel.py, which prints the TAP (one skip line when jshell is missing).
exec /usr/bin/python3 "$(dirname "$0")/../interp/test_java_kernel.py"
