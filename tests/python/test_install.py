"""`pip install` from the checkout gives a working `import tcomp` that needs
neither the checkout nor TCOMP_LIBRARY: the package bundles the library."""

import os
import subprocess
import sys

from conftest import ROOT


def test_pip_install_from_the_checkout(tmp_path):
    target = tmp_path / "site"
    lib = os.environ.get("TCOMP_LIBRARY")  # the build under test (ctest sets it)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--quiet", "--target", str(target),
                        os.path.join(ROOT, "tools", "python")],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "tcomp" / "libtcomp.so").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("TCOMP_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    code = ("import numpy as np, tcomp\n"
            "mm = tcomp.define('def mm(float(M,K) A, float(K,N) B) -> (C) "
            "{ C(m,n) +=! A(m,r_k) * B(r_k,n) }', name='mm')\n"
            "A = np.arange(6, dtype=np.float32).reshape(2, 3) + 1\n"
            "B = np.arange(12, dtype=np.float32).reshape(3, 4) - 5\n"
            "assert (mm(A, B) == A @ B).all()\n"
            "print(tcomp.library_path)\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(target / "tcomp" / "libtcomp.so")
    if lib:  # the bundled library is the one under test
        with open(lib, "rb") as a, open(target / "tcomp" / "libtcomp.so", "rb") as b:
            assert a.read() == b.read()
