"""The llama.cpp build this machine runs, and how to get a better one.

`recipes.toml` holds the build recipes (`localserve native build BACKEND`) as data, shipped as
package data; `recipes.py` turns one into the pip command; `hardware.py` reads the CPU's flags and
the GPUs; `build_info.py` asks the installed llama.cpp what it was built with; `verdicts.py` keeps
the load probe's verdicts per (build, CPU); `report.py` gathers it all for `localserve doctor`.

This floor sits beside the backends and the store: it may import llama_cpp, platformdirs and the
ground floor, and imports llama_cpp only inside functions, so the CLI stays quick to start.
"""
