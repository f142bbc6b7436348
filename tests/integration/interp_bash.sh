#!/usr/bin/env bash
# The bash kernel through its protocol, outside any sandbox (tests/interp/test_bash_kernel.py).
exec /usr/bin/python3 "$(dirname "$0")/../interp/test_bash_kernel.py"
