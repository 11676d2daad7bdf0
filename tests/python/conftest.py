"""Shared fixtures of the Python package's tests (run by ctest's
test_python: PYTHONPATH=tools/python, TCOMP_LIBRARY=build/libtcomp.so,
TCOMP_CACHE in the build tree)."""

import os
import secrets

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "corpus")

# Fresh random data on every run; the seed is printed so a failure can be
# replayed with TCOMP_TEST_SEED.
SEED = int(os.environ.get("TCOMP_TEST_SEED") or secrets.randbits(32))


def pytest_report_header(config):
    return f"tcomp tests: random seed {SEED} (TCOMP_TEST_SEED={SEED} replays it)"


@pytest.fixture
def rng(request):
    # one stream per test, derived from the run's seed and the test's name
    return np.random.default_rng([SEED, abs(hash(request.node.nodeid)) % (1 << 32)])


@pytest.fixture(scope="session")
def corpus():
    import tcomp
    cache = {}

    def load(name):
        if name not in cache:
            cache[name] = tcomp.load(os.path.join(CORPUS, name + ".tc"))
        return cache[name]
    return load
