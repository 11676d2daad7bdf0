"""tcomp.autotune from Python: the search runs, the kernel cache gets the
candidates, the op uses the best at once, and a fresh module reads it from
the cache as tc_compile does."""

import numpy as np
import pytest

import tcomp

SRC = "def matmul(float(M,K) A, float(K,N) B) -> (C) {\n    C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n"


def test_autotune_fills_the_cache_and_is_used(tmp_path, rng):
    cache = tmp_path / "kernels.sqlite"
    mm = tcomp.define(SRC, name="matmul")
    A = rng.uniform(-1, 1, size=(48, 40)).astype(np.float32)
    B = rng.uniform(-1, 1, size=(40, 56)).astype(np.float32)
    seen = []
    res = tcomp.autotune(mm, A, B, generations=2, population=4, seed=7, cache=cache,
                         progress=seen.append, final_candidates=1, final_rounds=2,
                         final_time_s=0.02, final_warmup_s=0.02, min_time_s=0.01)
    assert isinstance(res, tcomp.TuneResult)
    assert res.measured >= 2 and res.best_s > 0 and res.default_s > 0
    assert res.options and "tile=" in res.options
    assert seen and seen[-1]["done"] == seen[-1]["planned"]
    assert cache.exists() and cache.stat().st_size > 0
    k = mm.compile(A, B)
    assert k.options_source == "user" and k.options == res.options
    np.testing.assert_allclose(mm(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    # a new module, reading that cache, compiles with the tuned options
    tcomp.set_cache(str(cache))
    try:
        fresh = tcomp.define(SRC, name="matmul")
        k2 = fresh.compile(A, B)
        assert k2.options_source == "cache"
        assert k2.options == res.options
    finally:
        tcomp.set_cache(None)


def test_autotune_bad_arguments():
    mm = tcomp.define(SRC, name="matmul")
    A = np.ones((4, 3), np.float32)
    with pytest.raises(tcomp.ArgumentError, match="unknown setting 'bogus'"):
        tcomp.autotune(mm, A, np.ones((3, 2), np.float32), bogus=1)
    with pytest.raises(tcomp.ArgumentError, match="size K"):
        tcomp.autotune(mm, A, np.ones((2, 2), np.float32), cache=False)
    with pytest.raises(tcomp.ArgumentError, match="expected an Op"):
        tcomp.autotune(SRC, A, A)


def test_progress_callback_errors_stop_the_search_and_propagate(tmp_path):
    mm = tcomp.define(SRC, name="matmul")

    def boom(p):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        mm.autotune(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32), generations=3,
                    population=4, cache=False, progress=boom, final_candidates=0)
