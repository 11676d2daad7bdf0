"""The fast path of a call: a kernel with DLTensor structs made once for one
signature of NumPy or torch inputs (dtypes, shapes, device), refilled with
data pointers and strides on each call.

A call whose inputs match a plan's signature skips the general path
(_tensor.as_arg, the kernel lookup, the checks already made for that
signature): what is left is reading each array's pointer and layout,
allocating the outputs and tc_kernel_run.  Structs are kept in slots, one
per concurrent call (a free list: list.pop and list.append are atomic under
the GIL), so threads calling one op at once never share a struct.
"""

import ctypes
import sys

from . import _lib


def _sig_numpy(x):
    return (x.dtype, x.shape)


def _sig_torch(x):
    return (x.dtype, x.shape, x.device, x.layout, x.requires_grad)


def _sig_none(x):
    return None


def output_signature(make):
    """The signature of what make (an allocator of _tensor) returns: a torch
    tensor when it has a device, else a NumPy array."""
    device = make.keywords.get("device")
    if device is None:
        return (sys.modules["numpy"].dtype(make.keywords["dtype"]), tuple(make.args[0]))
    torch = sys.modules["torch"]
    return (make.keywords["dtype"], torch.Size(make.args[0]), device, torch.strided, False)


_sig_of = {}  # type -> its signature function, learnt on first sight


def signature(x):
    """What a plan is specialised to for the array x: its dtype and shape
    (and a torch tensor's device, layout and requires_grad), or None for
    anything but NumPy arrays and torch tensors (the general path handles
    those)."""
    f = _sig_of.get(type(x))
    if f is None:
        t = type(x)
        np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
        if np is not None and t is np.ndarray:
            f = _sig_numpy
        elif torch is not None and issubclass(t, torch.Tensor):
            f = _sig_torch
        else:
            f = _sig_none
        _sig_of[t] = f
    return f(x)


def _set_numpy(view, strides, x):
    if x.flags.c_contiguous:
        view.strides = None
    else:
        item = x.itemsize
        for j, s in enumerate(x.strides):
            if s % item:
                return False  # the general path explains the refusal
            strides[j] = s // item
        view.strides = strides
    view.data = x.ctypes.data if x.size else None
    return True


def _set_torch(view, strides, x):
    if x.is_neg() or x.is_conj():
        return False  # a lazily negated view: the general path resolves it
    if x.is_contiguous():
        view.strides = None
    else:
        for j, s in enumerate(x.stride()):
            strides[j] = s
        view.strides = strides
    view.data = x.data_ptr() or None
    return True


class _Slot:
    """DLTensor structs for one call: inputs then outputs, shapes filled once."""

    __slots__ = ("t", "views", "strides", "ins", "outs", "ins_at", "outs_at", "_shapes")

    def __init__(self, keys, device, nin):
        n = len(keys)
        self.t = (_lib.DLTensor * max(n, 1))()
        self.views = [self.t[i] for i in range(n)]
        self.strides = []
        self._shapes = []
        for v, (code, bits, shape) in zip(self.views, keys):
            nd = len(shape)
            sh = (ctypes.c_int64 * max(nd, 1))(*shape)
            self._shapes.append(sh)
            self.strides.append((ctypes.c_int64 * max(nd, 1))())
            v.device.device_type, v.device.device_id = device
            v.ndim = nd
            v.dtype.code, v.dtype.bits, v.dtype.lanes = code, bits, 1
            v.shape = sh
        P = ctypes.POINTER(_lib.DLTensor)
        self.ins = (P * max(nin, 1))(*[ctypes.pointer(v) for v in self.views[:nin]])
        self.outs = (P * max(n - nin, 1))(*[ctypes.pointer(v) for v in self.views[nin:]])
        self.ins_at, self.outs_at = ctypes.addressof(self.ins), ctypes.addressof(self.outs)


class Plan:
    """kernel for inputs of one signature: call(inputs, out) runs it, or
    returns None when the outputs given do not fit the plan (the general
    path then reports why)."""

    def __init__(self, kernel, args, sigs, device, allocators, out_sigs, before=None):
        self.kernel = kernel
        self.grad = any(sg is not None and len(sg) == 5 and sg[4] for sg in sigs)
        self.nin = len(args)
        self.nout = len(kernel.outputs)
        self.keys = [a.key for a in args] + list(kernel.outputs)
        self.device = device
        self.setters = [_set_torch if a.framework == "torch" else _set_numpy for a in args]
        self.allocators = allocators  # one callable per output (out=None)
        self.out_sigs = out_sigs      # the signature an out= tensor must have, per output
        self.out_setters = [_set_torch if len(sg) == 5 else _set_numpy for sg in out_sigs]
        self.before = before          # called before each run (CUDA: follow torch's stream)
        self.free = []

    def call(self, inputs, out):
        """The outputs (a list), None when out= does not fit, or a negative
        status when tc_kernel_run failed (the caller raises its error)."""
        if out is None:
            results = [a() for a in self.allocators]
        else:
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(results) != self.nout:
                return None
            for r, s in zip(results, self.out_sigs):
                if signature(r) != s:
                    return None
                if len(s) == 2 and not r.flags.writeable:  # NumPy's
                    return None
        try:
            slot = self.free.pop()
        except IndexError:
            slot = _Slot(self.keys, self.device, self.nin)
        try:
            views, strides = slot.views, slot.strides
            for i, x in enumerate(inputs):
                if not self.setters[i](views[i], strides[i], x):
                    return None
            n = self.nin
            for j, r in enumerate(results):
                if not self.out_setters[j](views[n + j], strides[n + j], r):
                    return None
            h = self.kernel._p
            if not h:
                return -2  # closed
            if self.before is not None:
                self.before()
            if _lib.tc_kernel_run_at(h, slot.ins_at, n, slot.outs_at, self.nout) < 0:
                return -1
        finally:
            self.free.append(slot)
        return results
