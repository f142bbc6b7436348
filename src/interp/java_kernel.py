"""The Java kernel (PROTOCOL.md): a persistent jshell (the JShell API, in JavaKernel.java) driven
by repl_driver.py. Run as: python3 java_kernel.py"""
import os
import shutil
import sys

# no __pycache__ next to the kernels (the sandbox's copy is read-only anyway)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repl_driver import Driver, log  # noqa: E402


def find_java():
    """The java of the JDK that has jshell: the JShell API (module jdk.jshell) is in a JDK
    only, and jshell's own directory holds that JDK's java."""
    jshell = shutil.which("jshell", path=os.environ.get("PATH", "") + ":/usr/bin")
    if jshell is None:
        return None
    java = os.path.join(os.path.dirname(os.path.realpath(jshell)), "java")
    return java if os.access(java, os.X_OK) else None


def main():
    java = find_java()
    if java is None:
        log("jshell is not installed (Debian: openjdk-17-jdk-headless)")
        sys.exit(1)
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "JavaKernel.java")
    argv = lambda req, rep: [
        java,
        # the writable map behind System.getenv (env_vars): JavaKernel.openEnvironment
        "--add-opens", "java.base/java.util=ALL-UNNAMED",
        # one context is one small JVM: the serial collector keeps its footprint down
        "-XX:+UseSerialGC",
        source, str(req), str(rep)]
    # Each write of System.out is its own stdout message (a packet pipe, no coalescing), as
    # IJava streams them: println("hi") comes as "hi" and "\n". Interrupts are a stop request:
    # JShell.stop() ends the running snippet; SIGINT would end the JVM.
    Driver("java", argv, interrupt="request", coalesce=False, packet=True).run()


if __name__ == "__main__":
    main()
