"""tcomp from Python: tensor comprehensions compiled for NumPy arrays and
PyTorch tensors.

    import tcomp
    lang = '''
    def matmul(float(M,K) A, float(K,N) B) -> (C) {
        C(m,n) +=! A(m,r_k) * B(r_k,n)
    }
    '''
    matmul = tcomp.define(lang, name="matmul")
    C = matmul(A, B)          # NumPy arrays or torch tensors, zero-copy
    tcomp.autotune(matmul, A, B)    # tune for these shapes into the kernel cache

A call on torch tensors that require grad is differentiable (the backward
is derived from the def: `tcomp grad`); TorchModule wraps a def with
parameters as a torch.nn.Module.  The README's "Python" section and
docs/python.md document the package.
"""

from ._core import (Kernel, Module, Op, Options, TuneResult, autotune, define,
                    describe_options, get_threads, grad, load, set_cache, set_threads)
from ._errors import (ArgumentError, ClosedError, CompileError, Error, InternalError,
                      OutOfMemory, TcompWarning)
from ._lib import path as library_path

__version__ = "0.4.0"

__all__ = ["ArgumentError", "ClosedError", "CompileError", "Error", "InternalError", "Kernel",
           "Module", "Op", "Options", "OutOfMemory", "TcompWarning", "TorchModule", "TuneResult",
           "autotune", "define", "describe_options", "get_threads", "grad", "library_path",
           "load", "set_cache", "set_threads"]


def __getattr__(name):
    # torch-dependent parts, imported on first use
    if name == "TorchModule":
        from ._torch import TorchModule
        return TorchModule
    raise AttributeError(f"module 'tcomp' has no attribute {name!r}")
