"""Build the desktop bundle: dist/localserve/ with the `localserve` and `localserve-tray`
programs (PyInstaller, from installer/localserve.spec), then, on Windows where Inno Setup's
`iscc` is on the PATH, dist/localserve-VERSION-setup.exe (installer/localserve.iss).

    pip install -e ".[bundle]"
    python installer/build_bundle.py

About a minute and a half on 2 cores, from scratch; tests/live/test_bundle.py runs the result.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def main() -> int:
    dist, work = ROOT / "dist", ROOT / "build" / "pyinstaller"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--distpath",
            str(dist),
            "--workpath",
            str(work),
            str(HERE / "localserve.spec"),
        ],
        cwd=HERE,
        check=True,
    )
    print(f"built {dist / 'localserve'}")
    iscc = shutil.which("iscc")
    if sys.platform == "win32" and iscc:
        env = {**os.environ, "LOCALSERVE_VERSION": version("localserve")}
        subprocess.run([iscc, str(HERE / "localserve.iss")], cwd=HERE, env=env, check=True)
        print(f"built the installer in {dist}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
