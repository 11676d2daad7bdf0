"""Bad input raises tcomp.Error subclasses with the library's located
messages; nothing crashes, and the op keeps working afterwards."""

import gc
import os

import numpy as np
import pytest
import torch

import tcomp

MATMUL = "def matmul(float(M,K) A, float(K,N) B) -> (C) {\n    C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n"


def test_bad_source_is_a_located_compile_error():
    with pytest.raises(tcomp.CompileError) as e:
        tcomp.define("def f(float(N) X) -> (Y) {\n    Y(i) = X(i) +* 2\n}\n", filename="bad.tc")
    msg = str(e.value)
    assert "bad.tc:2:" in msg and "error:" in msg
    assert "Y(i) = X(i) +* 2" in msg and "^" in msg
    assert isinstance(e.value, tcomp.Error) and isinstance(e.value, ValueError)


def test_undefined_name_and_unknown_def():
    with pytest.raises(tcomp.CompileError, match="<string>:1:.*Q"):
        tcomp.define("def f(float(N) X) -> (Y) { Y(i) = Q(i) }")
    with pytest.raises(tcomp.ArgumentError, match="no def named 'nope'"):
        tcomp.define(MATMUL, name="nope")
    with pytest.raises(KeyError):
        tcomp.define(MATMUL)["nope"]
    with pytest.raises(tcomp.ArgumentError, match="expected .tc text"):
        tcomp.define(b"def")


def test_wrong_count_dtype_shape_and_kind():
    mm = tcomp.define(MATMUL, name="matmul")
    A, B = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(tcomp.ArgumentError, match="takes 2 input"):
        mm(A)
    with pytest.raises(tcomp.ArgumentError, match="(?i)float64|type"):
        mm(A.astype(np.float64), B)
    with pytest.raises(tcomp.ArgumentError, match="size K is 3 from A"):
        mm(A, np.ones((4, 2), np.float32))
    with pytest.raises(tcomp.ArgumentError, match="rank|dimension"):
        mm(A, np.ones(3, np.float32))
    with pytest.raises(tcomp.ArgumentError, match="expected a NumPy array"):
        mm(A, [[1.0, 2.0]] * 3)
    with pytest.raises(tcomp.ArgumentError, match="not one tcomp supports"):
        mm(A, np.ones((3, 2), np.complex64))
    with pytest.raises(tcomp.ArgumentError, match="byte order"):
        mm(A, np.ones((3, 2), ">f4"))
    # and the op still works
    np.testing.assert_allclose(mm(A, B), np.full((4, 2), 3.0))


def test_bad_outputs():
    mm = tcomp.define(MATMUL, name="matmul")
    A, B = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(tcomp.ArgumentError, match=r"output C is float32\[2, 4\].*float32\[4, 2\]"):
        mm(A, B, out=np.empty((2, 4), np.float32))
    with pytest.raises(tcomp.ArgumentError, match="output C is float64"):
        mm(A, B, out=np.empty((4, 2), np.float64))
    with pytest.raises(tcomp.ArgumentError, match="read-only"):
        mm(A, B, out=np.broadcast_to(np.empty(2, np.float32), (4, 2)))
    with pytest.raises(tcomp.ArgumentError, match="out= has 2"):
        mm(A, B, out=(np.empty((4, 2), np.float32),) * 2)
    # an output overlapping itself (stride 0) is refused by the library
    t = torch.empty(2).expand(4, 2)
    with pytest.raises(tcomp.ArgumentError, match="overlap"):
        mm(torch.ones(4, 3), torch.ones(3, 2), out=t)


class OnDevice:
    """A DLPack producer that says its memory is on a CUDA device."""

    def __init__(self, a, device):
        self.a, self.device = a, device

    def __dlpack__(self, stream=None):
        cap = self.a.__dlpack__()
        import ctypes
        from tcomp import _lib
        p = ctypes.pythonapi.PyCapsule_GetPointer(ctypes.py_object(cap), b"dltensor")
        t = _lib.DLManagedTensor.from_address(p).dl_tensor
        t.device.device_type, t.device.device_id = self.device
        return cap

    def __dlpack_device__(self):
        return self.device


def test_devices():
    mm = tcomp.define(MATMUL, name="matmul")
    A = np.ones((4, 3), np.float32)
    with pytest.raises(tcomp.ArgumentError, match="input B is on cuda:0, input A on cpu:0"):
        mm(A, OnDevice(np.ones((3, 2), np.float32), (2, 0)))
    with pytest.raises(tcomp.ArgumentError, match="not supported"):
        mm(OnDevice(A, (4, 0)), OnDevice(np.ones((3, 2), np.float32), (4, 0)))
    cpu_only = tcomp.define(MATMUL, name="matmul", options="target=cpu")
    with pytest.raises(tcomp.ArgumentError, match="options' target is cpu"):
        cpu_only(OnDevice(A, (2, 0)), OnDevice(np.ones((3, 2), np.float32), (2, 0)))


def test_closed_module_raises():
    m = tcomp.define(MATMUL)
    op = m.matmul
    A, B = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    op(A, B)
    m.close()
    with pytest.raises(tcomp.ClosedError):
        op(A, B)
    with pytest.raises(tcomp.ClosedError):
        m.grad("matmul")
    m.close()  # twice is fine
    with tcomp.define(MATMUL) as m2:
        op2 = m2.matmul
    with pytest.raises(tcomp.ClosedError):
        op2.compile(A, B)


def test_bad_options():
    with pytest.raises(tcomp.ArgumentError, match="tile"):
        tcomp.Options("tile=banana")
    with pytest.raises(tcomp.ArgumentError, match="nosuch"):
        tcomp.Options(nosuch=1)
    with pytest.raises(tcomp.ArgumentError, match="line 2"):
        tcomp.define(MATMUL, name="matmul", options="unroll=off\nfusion=sideways")
    with pytest.raises(tcomp.ArgumentError):
        tcomp.set_threads(100000)


def test_warnings_are_python_warnings():
    src = "def f(float(N,M) A) -> (S) {\n    S(i) += A(i,j)\n}\n"
    with pytest.warns(tcomp.TcompWarning, match=r"<string>:2:10: warning: 'S' is reduced"):
        tcomp.define(src)


def test_non_differentiable_def_raises_when_grad_is_needed():
    f = tcomp.define("def f(float(N) X) -> (Y) { Y(i) = lgamma(X(i)) }", name="f")
    x = torch.rand(5, requires_grad=True) + 1
    with pytest.raises(tcomp.CompileError, match="lgamma"):
        f(x)
    with torch.no_grad():
        torch.testing.assert_close(f(x), torch.lgamma(x))


def test_library_not_found_is_a_clear_import_error(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, TCOMP_LIBRARY=str(tmp_path / "missing.so"))
    p = subprocess.run([sys.executable, "-c", "import tcomp"], env=env, capture_output=True,
                       text=True)
    assert p.returncode != 0
    assert "cannot load libtcomp.so" in p.stderr and "missing.so (not found)" in p.stderr


def test_garbage_collected_objects_free_cleanly():
    for _ in range(20):
        m = tcomp.define(MATMUL)
        m.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
        del m
    gc.collect()
