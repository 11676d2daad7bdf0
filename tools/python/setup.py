"""Bundles libtcomp.so into the package: `pip install tools/python` from the
checkout copies the library the checkout built (build/libtcomp.so, or the
file $TCOMP_LIBRARY names), running `make build` first when there is none,
so that the installed `import tcomp` needs nothing but the system's shared
libraries (isl, LLVM, SQLite, zlib) that tcomp links."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def library():
    env = os.environ.get("TCOMP_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise SystemExit(f"tcomp: TCOMP_LIBRARY={env} does not exist (pip builds in "
                             f"{HERE}: give an absolute path)")
        return env
    built = os.path.join(ROOT, "build", "libtcomp.so")
    if not os.path.exists(built):
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            raise SystemExit("tcomp: no libtcomp.so: install from a tcomp checkout, or set "
                             "TCOMP_LIBRARY to the library's path")
        subprocess.run(["make", "-C", ROOT, "build"], check=True)
    return built


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "tcomp", "libtcomp.so")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.realpath(library()), dest)


class BinaryDistribution(Distribution):
    """A wheel with a shared library: tagged for this platform, not pure."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
