#!/usr/bin/env bash
# The JavaScript and TypeScript kernel through its protocol, outside any sandbox
# (tests/interp/test_js_kernel.py).
exec /usr/bin/python3 "$(dirname "$0")/../interp/test_js_kernel.py"
