"""The R kernel (PROTOCOL.md): a persistent R session, Rscript running r_kernel.R, driven by
repl_driver.py. Run as: python3 r_kernel.py"""
import os
import shutil
import sys

# no __pycache__ next to the kernels (the sandbox's copy is read-only anyway)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repl_driver import Driver, log  # noqa: E402


def main():
    rscript = shutil.which("Rscript", path=os.environ.get("PATH", "") + ":/usr/bin")
    if rscript is None:
        log("Rscript is not installed (Debian: r-base-core)")
        sys.exit(1)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "r_kernel.R")
    # R writes a line in many small writes: the driver puts those that follow each other
    # into one message. Ctrl-C is SIGINT to R's process group, as a terminal sends it. A cell
    # goes on after each value it shows, so R waits for each result's ack.
    Driver("r", lambda req, rep: [rscript, "--vanilla", script, str(req), str(rep)],
           interrupt="signal", coalesce=True, ack_results=True).run()


if __name__ == "__main__":
    main()
