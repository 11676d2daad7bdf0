"""Arrays of NumPy, PyTorch and any DLPack producer as DLTensors, without
copying; outputs allocated by the inputs' framework.

A view (Arg) borrows the array's memory: it keeps the array (or its DLPack
capsule) alive for as long as the view lives, and the kernel reads and
writes the array's own buffer.  Strided arrays (transposed, sliced,
broadcast) are passed with their strides: tc_kernel_run copies a strided
input into a compact buffer and writes a strided output back through its
strides (include/tcomp.h), so they work, at the cost of that copy.
"""

import ctypes
import functools
import sys

from . import _lib
from ._errors import ArgumentError

_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pythonapi.PyCapsule_IsValid.restype = ctypes.c_int
_pythonapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

DEVICE_NAMES = {_lib.KDLCPU: "cpu", _lib.KDLCUDA: "cuda", _lib.KDLCUDAHOST: "cuda_host"}

# (code, bits) of DLPack <-> the frameworks' dtypes, filled on first use
_np_to_dl = {}
_dl_to_np = {}
_torch_to_dl = {}
_dl_to_torch = {}


def dtype_name(code, bits):
    """tcomp's name of a DLPack type ("float32"), or a description."""
    names = {_lib.KDLFLOAT: "float", _lib.KDLINT: "int", _lib.KDLUINT: "uint",
             _lib.KDLBFLOAT: "bfloat"}
    if code == _lib.KDLBOOL:
        return "bool"
    return f"{names.get(code, f'code{code}_')}{bits}"


def _numpy_maps():
    import numpy as np
    if not _np_to_dl:
        for name, dl in [("float16", (2, 16)), ("float32", (2, 32)), ("float64", (2, 64)),
                         ("int8", (0, 8)), ("int16", (0, 16)), ("int32", (0, 32)),
                         ("int64", (0, 64)), ("uint8", (1, 8)), ("uint16", (1, 16)),
                         ("uint32", (1, 32)), ("uint64", (1, 64)), ("bool", (6, 8))]:
            _np_to_dl[np.dtype(name)] = dl
            _dl_to_np[dl] = np.dtype(name)
    return np


def _torch_maps():
    torch = sys.modules["torch"]
    if not _torch_to_dl:
        for name, dl in [("float16", (2, 16)), ("bfloat16", (4, 16)), ("float32", (2, 32)),
                         ("float64", (2, 64)), ("int8", (0, 8)), ("int16", (0, 16)),
                         ("int32", (0, 32)), ("int64", (0, 64)), ("uint8", (1, 8)),
                         ("bool", (6, 8))]:
            _torch_to_dl[getattr(torch, name)] = dl
            _dl_to_torch[dl] = getattr(torch, name)
    return torch


def is_torch(x):
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def is_numpy(x):
    n = sys.modules.get("numpy")
    return n is not None and isinstance(x, n.ndarray)


class Arg:
    """One array as a DLTensor: .dl (the struct), .key (dtype and shape, what a
    kernel is compiled for), .device ((type, id)), .framework ("numpy",
    "torch" or "dlpack")."""

    __slots__ = ("dl", "key", "device", "framework", "obj", "_keep")

    def __init__(self, obj, code, bits, shape, strides, data, device, framework, keep=None):
        nd = len(shape)
        sh = (ctypes.c_int64 * nd)(*shape) if nd else None
        st = (ctypes.c_int64 * nd)(*strides) if nd and strides is not None else None
        dl = _lib.DLTensor()
        dl.data = data or None
        dl.device.device_type, dl.device.device_id = device
        dl.ndim = nd
        dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = code, bits, 1
        if sh is not None:
            dl.shape = sh
        if st is not None:
            dl.strides = st
        self.dl = dl
        self.key = (code, bits, tuple(shape))
        self.device = device
        self.framework = framework
        self.obj = obj
        self._keep = (sh, st, keep)


def _from_numpy(a, what, writable):
    _numpy_maps()
    dl = _np_to_dl.get(a.dtype)
    if dl is None:
        if not a.dtype.isnative and a.dtype.newbyteorder("=") in _np_to_dl:
            raise ArgumentError(f"{what}: the array's byte order is not the machine's; "
                                "convert it with a.astype(a.dtype.newbyteorder('='))")
        raise ArgumentError(f"{what}: NumPy dtype {a.dtype} is not one tcomp supports "
                            "(float16/32/64, int8-64, uint8-64, bool)")
    if writable and not a.flags.writeable:
        raise ArgumentError(f"{what}: the output array is read-only")
    item = a.itemsize
    if any(s % item for s in a.strides):
        raise ArgumentError(f"{what}: a stride is not a multiple of the element size "
                            f"(strides {a.strides}, {item}-byte elements); pass "
                            "np.ascontiguousarray(x)")
    strides = None if a.flags.c_contiguous else [s // item for s in a.strides]
    return Arg(a, dl[0], dl[1], a.shape, strides, a.ctypes.data if a.size else None,
               (_lib.KDLCPU, 0), "numpy")


def _from_torch(t, what, writable):
    torch = _torch_maps()
    dl = _torch_to_dl.get(t.dtype)
    if dl is None:
        raise ArgumentError(f"{what}: torch dtype {t.dtype} is not one tcomp supports")
    if t.layout != torch.strided:
        raise ArgumentError(f"{what}: a {t.layout} tensor; tcomp takes dense (strided) "
                            "tensors: pass x.to_dense()")
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    dev = t.device
    if dev.type == "cpu":
        device = (_lib.KDLCPU, 0)
    elif dev.type == "cuda":
        device = (_lib.KDLCUDA, dev.index or 0)
    else:
        raise ArgumentError(f"{what}: a tensor on device {dev}; tcomp runs on the CPU and on "
                            "CUDA devices")
    strides = None if t.is_contiguous() else list(t.stride())
    return Arg(t, dl[0], dl[1], tuple(t.shape), strides, t.data_ptr() if t.numel() else None,
               device, "torch")


def _from_dlpack(x, what):
    try:
        cap = x.__dlpack__()
    except Exception as e:  # the producer's own refusal
        raise ArgumentError(f"{what}: {type(x).__name__}.__dlpack__() failed: {e}") from e
    if not _pythonapi.PyCapsule_IsValid(cap, b"dltensor"):
        raise ArgumentError(f"{what}: __dlpack__() did not return an unused 'dltensor' capsule")
    p = _pythonapi.PyCapsule_GetPointer(cap, b"dltensor")
    t = _lib.DLManagedTensor.from_address(p).dl_tensor
    nd = t.ndim
    shape = [t.shape[i] for i in range(nd)]
    strides = [t.strides[i] for i in range(nd)] if t.strides else None
    if t.dtype.lanes != 1:
        raise ArgumentError(f"{what}: vector dtypes (lanes {t.dtype.lanes}) are not supported")
    data = (t.data or 0) + t.byte_offset
    # The capsule stays unconsumed: when the Arg dies, the capsule's
    # destructor calls the producer's deleter, as DLPack asks of a consumer
    # that borrows rather than takes.
    return Arg(x, t.dtype.code, t.dtype.bits, shape, strides, data,
               (t.device.device_type, t.device.device_id), "dlpack", keep=cap)


def as_arg(x, what, writable=False):
    """x (a NumPy array, a torch tensor, or any object with __dlpack__) as an
    Arg; what names it in errors ("matmul: input A")."""
    if is_numpy(x):
        return _from_numpy(x, what, writable)
    if is_torch(x):
        return _from_torch(x, what, writable)
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x, what)
    raise ArgumentError(f"{what}: expected a NumPy array, a torch tensor or an object with "
                        f"__dlpack__, got {type(x).__name__}")


def allocator(framework, code, bits, shape, device, like, fill=True):
    """A callable (a functools.partial, keywords dtype and, for torch,
    device) that makes an output of (code, bits) and shape in framework
    ("torch" allocates on like's device; others get a NumPy array):
    zero-filled, or left uninitialised with fill=False (an output the def
    overwrites)."""
    if framework == "torch":
        torch = _torch_maps()
        dt = _dl_to_torch.get((code, bits))
        if dt is None:
            raise ArgumentError(f"output of type {dtype_name(code, bits)} has no torch dtype")
        return functools.partial(torch.zeros if fill else torch.empty, shape, dtype=dt,
                                 device=like.device)
    if device[0] != _lib.KDLCPU:
        raise ArgumentError(f"cannot allocate an output on {DEVICE_NAMES.get(device[0])} "
                            "for a DLPack producer other than torch: pass out=")
    np = _numpy_maps()
    dt = _dl_to_np.get((code, bits))
    if dt is None:
        raise ArgumentError(f"output of type {dtype_name(code, bits)} has no NumPy dtype: "
                            "pass out= with a tensor of a framework that has it (torch)")
    return functools.partial(np.zeros if fill else np.empty, shape, dtype=dt)
