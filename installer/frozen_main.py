"""The entry of both frozen programs (localserve.spec). `PROGRAM -m MODULE ARGS` runs a module
as `python -m` would, so that every `sys.executable -m ...` the daemon starts (its engine
workers, the build probe) and the login entries (service.py) work in a PyInstaller folder too;
otherwise `localserve-tray` runs the tray and `localserve` the CLI."""

import multiprocessing
import runpy
import sys
from pathlib import Path

# A spawned child (the batch upload's line checker, server/batches/upload.py) starts as this
# program with --multiprocessing-fork: it runs as multiprocessing's child, not as the CLI.
# PyInstaller's runtime hook makes this work on every platform, not on Windows alone.
multiprocessing.freeze_support()

if len(sys.argv) > 2 and sys.argv[1] == "-m":
    module, sys.argv = sys.argv[2], [sys.argv[0], *sys.argv[3:]]
elif Path(sys.executable).stem == "localserve-tray":
    module = "localserve_tray"
else:
    module = "localserve"
runpy.run_module(module, run_name="__main__", alter_sys=True)
