"""Ops on NumPy arrays and torch tensors: the corpus kernels against NumPy
and PyTorch, zero-copy inputs and outputs, strided and DLPack-only inputs,
out=, several outputs, options, threads."""

import threading

import numpy as np
import pytest
import torch

import tcomp
from numpy.lib.stride_tricks import sliding_window_view as windows


def rand(rng, *shape, dtype=np.float32):
    """Uniform in [-1, 1) without values near 0 (never zeros)."""
    x = rng.uniform(0.1, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return x.astype(dtype)


def close(got, want, tol=1e-4):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def conv2d_ref(I, W):
    win = windows(I, W.shape[2:], axis=(2, 3))  # N,C,Ho,Wo,KH,KW
    return np.einsum("nchwij,fcij->nfhw", win, W)


def softmax_ref(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm_ref(X, G, Bt):
    mu = X.mean(axis=1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=1, keepdims=True)
    return (X - mu) / np.sqrt(var + 1e-5) * G + Bt


# (corpus file, def, input makers, reference): the corpus kernels against NumPy
CASES = [
    ("matmul", "matmul", lambda r: (rand(r, 33, 20), rand(r, 20, 17)), lambda A, B: A @ B),
    ("matmul", "matmul_nt", lambda r: (rand(r, 9, 40), rand(r, 13, 40)), lambda A, B: A @ B.T),
    ("matmul", "matmul_tn", lambda r: (rand(r, 40, 9), rand(r, 40, 13)), lambda A, B: A.T @ B),
    ("matmul", "batch_matmul", lambda r: (rand(r, 3, 7, 11), rand(r, 3, 11, 5)),
     lambda X, Y: X @ Y),
    ("conv2d", "conv2d", lambda r: (rand(r, 2, 3, 10, 9), rand(r, 4, 3, 3, 3), rand(r, 4)),
     lambda I, W, B: conv2d_ref(I, W) + B[None, :, None, None]),
    ("group_conv", "group_conv",
     lambda r: (rand(r, 2, 3, 2, 8, 8), rand(r, 3, 4, 2, 3, 3), rand(r, 3, 4)),
     lambda I, W, B: np.stack([conv2d_ref(I[:, g], W[g]) for g in range(3)], axis=1)
     + B[None, :, :, None, None]),
    ("softmax", "softmax", lambda r: (rand(r, 6, 33) * 5,), lambda X: softmax_ref(X)),
    ("softmax", "softmax_outputs", lambda r: (rand(r, 6, 33) * 5,),
     lambda X: (softmax_ref(X), X.max(axis=1),
                np.exp(X - X.max(axis=1, keepdims=True)).sum(axis=1))),
    ("layernorm", "layernorm", lambda r: (rand(r, 5, 48), rand(r, 48), rand(r, 48)),
     layernorm_ref),
    ("mlp", "fc_relu", lambda r: (rand(r, 8, 30), rand(r, 12, 30), rand(r, 12)),
     lambda I, W, B: np.maximum(I @ W.T + B, 0)),
    ("mlp", "mlp2",
     lambda r: (rand(r, 8, 30), rand(r, 12, 30), rand(r, 12), rand(r, 6, 12), rand(r, 6)),
     lambda I, W1, B1, W2, B2: np.maximum(np.maximum(I @ W1.T + B1, 0) @ W2.T + B2, 0)),
    ("batchnorm", "batchnorm", lambda r: (rand(r, 3, 4, 5, 6), rand(r, 4), rand(r, 4)),
     lambda X, g, b: ((X - X.mean(axis=(0, 2, 3))[None, :, None, None])
                      / np.sqrt(X.var(axis=(0, 2, 3)) + 1e-5)[None, :, None, None]
                      * g[None, :, None, None] + b[None, :, None, None],
                      X.mean(axis=(0, 2, 3)), X.var(axis=(0, 2, 3)))),
    ("pooling", "maxpool2x2", lambda r: (rand(r, 2, 3, 8, 10),),
     lambda I: I.reshape(2, 3, 4, 2, 5, 2).max(axis=(3, 5))),
    ("pooling", "avgpool2x2", lambda r: (rand(r, 2, 3, 8, 10),),
     lambda I: I.reshape(2, 3, 4, 2, 5, 2).mean(axis=(3, 5))),
    ("pooling", "maxpool3x3_s1", lambda r: (rand(r, 2, 3, 7, 9),),
     lambda I: windows(I, (3, 3), axis=(2, 3)).max(axis=(4, 5))),
    ("tensordot", "tensordot", lambda r: (rand(r, 2, 3, 4, 5, 6), rand(r, 2, 4, 3, 5, 6)),
     lambda A, B: np.einsum("nabhw,nbchw->nachw", A, B)),
    ("tensordot", "tensordot2", lambda r: (rand(r, 5, 6, 7), rand(r, 6, 7, 4)),
     lambda A, B: np.tensordot(A, B, axes=2)),
    ("kronecker", "kronecker3",
     lambda r: (rand(r, 3, 4), rand(r, 5, 2), rand(r, 2, 3), rand(r, 6, 4, 2, 3)),
     lambda W0, W1, W2, X: np.einsum("ma bc,da,eb,fc->mdef".replace(" ", ""), X, W0, W1, W2)),
    ("embedding", "lookup_sum_i64",
     lambda r: (rand(r, 20, 6), r.integers(0, 20, size=(4, 3)).astype(np.int64)),
     lambda L, I: L[I].sum(axis=1)),
    ("embedding", "gather_rows",
     lambda r: (rand(r, 20, 6), r.integers(0, 20, size=7).astype(np.int32)),
     lambda L, I: L[I]),
    ("embedding", "gather2d",
     lambda r: (rand(r, 9, 8), r.integers(0, 9, size=5).astype(np.int32),
                r.integers(0, 8, size=5).astype(np.int64)),
     lambda A, I, J: A[I, J]),
    ("reductions", "row_prod", lambda r: (rand(r, 4, 6) + 1,), lambda A: A.prod(axis=1)),
    ("reductions", "sum_all", lambda r: (rand(r, 7, 9),), lambda A: A.sum()),
    ("reductions", "int8_sum", lambda r: (r.integers(-100, 100, size=(3, 50)).astype(np.int8),),
     lambda A: (A.sum(axis=1, dtype=np.int8), A.sum(axis=1, dtype=np.int32))),
    ("reductions", "f16_row_sum", lambda r: (rand(r, 3, 20, dtype=np.float16),),
     lambda A: A.astype(np.float32).sum(axis=1)),
    ("transpose", "transpose", lambda r: (rand(r, 5, 8),), lambda A: A.T),
    ("transpose", "permute3", lambda r: (rand(r, 3, 4, 5),), lambda X: X.transpose(2, 0, 1)),
    ("matvec", "matvec", lambda r: (rand(r, 9, 14), rand(r, 14)), lambda A, x: A @ x),
    ("matvec", "dot", lambda r: (rand(r, 31), rand(r, 31)), lambda a, b: a @ b),
    ("matvec", "matvec_plus", lambda r: (rand(r, 9, 14), rand(r, 14), rand(r, 9)),
     lambda A, x, y: A @ x + y),
    # += without '!' accumulates into the output, which a call allocates zero-filled
    ("matvec", "row_sum_accumulate", lambda r: (rand(r, 9, 14),), lambda A: A.sum(axis=1)),
]


@pytest.mark.parametrize("file,name,make,ref", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_corpus_kernels_match_numpy(corpus, rng, file, name, make, ref):
    op = corpus(file)[name]
    inputs = make(rng)
    got = op(*inputs)
    want = ref(*[x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs])
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
    else:
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray)
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            close(g, w, tol=2e-3 if g.dtype == np.float16 else 1e-4)


def test_torch_inputs_give_torch_outputs_matching_torch(corpus, rng):
    A, B = torch.from_numpy(rand(rng, 33, 20)), torch.from_numpy(rand(rng, 20, 17))
    C = corpus("matmul").matmul(A, B)
    assert isinstance(C, torch.Tensor) and C.dtype == torch.float32
    close(C, (A.double() @ B.double()))
    I, W, b = (torch.from_numpy(x) for x in (rand(rng, 2, 3, 10, 9), rand(rng, 4, 3, 3, 3),
                                              rand(rng, 4)))
    close(corpus("conv2d").conv2d(I, W, b),
          torch.nn.functional.conv2d(I.double(), W.double(), b.double()))
    X = torch.from_numpy(rand(rng, 6, 50) * 4)
    close(corpus("softmax").softmax(X), torch.softmax(X.double(), dim=1))
    X, G, Bt = (torch.from_numpy(x) for x in (rand(rng, 5, 48), rand(rng, 48), rand(rng, 48)))
    close(corpus("layernorm").layernorm(X, G, Bt),
          torch.nn.functional.layer_norm(X.double(), (48,), G.double(), Bt.double(), 1e-5))


def test_inputs_and_outputs_are_not_copied(corpus, rng):
    """The kernel writes the buffer the caller's framework allocated (out=),
    and reads the inputs' own memory (a change to an input shows)."""
    mm = corpus("matmul").matmul
    for lib in ("numpy", "torch"):
        A, B = rand(rng, 16, 8), rand(rng, 8, 4)
        C = np.full((16, 4), np.nan, dtype=np.float32)  # poisoned
        if lib == "torch":
            A, B, C = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(C)
            ptr = C.data_ptr()
        else:
            ptr = C.ctypes.data
        res = mm(A, B, out=C)
        assert res is C
        assert (C.data_ptr() if lib == "torch" else C.ctypes.data) == ptr
        close(C, np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64))
        A[0, 0] = 100.0
        mm(A, B, out=C)
        close(C, np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64))
    # an allocated torch output is a fresh tensor the kernel wrote in place
    A, B = torch.from_numpy(rand(rng, 16, 8)), torch.from_numpy(rand(rng, 8, 4))
    C = mm(A, B)
    assert C.is_contiguous() and C.shape == (16, 4)


def test_strided_inputs_and_outputs(corpus, rng):
    """Transposed, sliced, broadcast and negatively strided views: the library
    copies them (documented), results as for compact arrays."""
    mm = corpus("matmul").matmul
    A = rand(rng, 20, 30)
    B = rand(rng, 40, 20)
    a, b = A[::2, 1:25:3], B.T[3:11, ::-1]  # (10, 8) and (8, 40) views
    close(mm(a, b), a.astype(np.float64) @ b.astype(np.float64))
    row = rand(rng, 8)
    bcast = np.broadcast_to(row[:, None], (8, 5))  # stride 0, read-only
    close(mm(a, bcast), a.astype(np.float64) @ bcast.astype(np.float64))
    ta, tb = torch.from_numpy(A).t()[3:11], torch.from_numpy(B).t()[:, ::3]  # (8,20), (20,14)
    close(mm(ta, tb), ta.double() @ tb.double())
    # a strided output: written through its strides, the rest untouched
    big = np.full((20, 40), 7.0, dtype=np.float32)
    view = big[::2, ::5]  # (10, 8)
    mm(a, rand(rng, 8, 8), out=view)
    assert np.all(big[1::2] == 7.0) and np.all(big[::2, 1::5] == 7.0)


class DLPackOnly:
    """An array that only speaks DLPack (as JAX or CuPy arrays do)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_any_dlpack_producer(corpus, rng):
    mm = corpus("matmul").matmul
    A, B = rand(rng, 6, 5), rand(rng, 5, 3)
    C = mm(DLPackOnly(torch.from_numpy(A)), DLPackOnly(torch.from_numpy(B).t().contiguous().t()))
    assert isinstance(C, np.ndarray)  # no framework to ask: NumPy allocates
    close(C, A.astype(np.float64) @ B)
    out = torch.full((6, 3), float("nan"))
    mm(A, B, out=DLPackOnly(out))
    close(out, A.astype(np.float64) @ B)


def test_define_module_and_op(rng):
    src = """
    def scale(float(N) X, float a) -> (Y) { Y(i) = X(i) * a }
    def twice(float(N) X) -> (Y, Z) { Y(i) = X(i) * 2
                                      Z(i) = X(i) + X(i) }
    """
    m = tcomp.define(src)
    assert m.defs == ["scale", "twice"]
    assert m.scale.inputs == ["X", "a"] and m.scale.outputs == ["Y"]
    assert "float32(N) X" in m.scale.signature or "float(N) X" in m.scale.signature
    X = rand(rng, 10)
    close(m.scale(X, np.array(3.0, dtype=np.float32)), X * 3.0)
    Y, Z = m["twice"](X)
    close(Y, 2 * X)
    close(Z, 2 * X)
    op = tcomp.define(src, name="twice")
    assert isinstance(op, tcomp.Op) and op.name == "twice"
    # compiled once per dtypes and shapes
    k1 = op.compile(X)
    assert op.compile(rand(rng, 10)) is k1
    assert op.compile(rand(rng, 11)) is not k1
    assert k1.output_shapes() == [("float32", (10,)), ("float32", (10,))]


def test_options_and_emit(corpus, rng):
    src = open(corpus("matmul").filename).read()
    mm = tcomp.define(src, name="matmul", options={"tile": "none", "unroll": "off"})
    A, B = rand(rng, 12, 7), rand(rng, 7, 9)
    close(mm(A, B), A.astype(np.float64) @ B)
    k = mm.compile(A, B)
    assert k.options_source == "user"
    assert "tile=none" in k.options
    assert "define" in k.emit("llvm")
    interp = tcomp.define(src, name="matmul", options="target=interp")
    close(interp(A, B), A.astype(np.float64) @ B)
    assert "tile=" in str(tcomp.Options(tile=[16, 32]))
    assert "tile" in tcomp.describe_options()


def test_threads_setting_and_concurrent_calls(corpus, rng):
    mm = corpus("matmul").matmul
    old = tcomp.get_threads()
    try:
        tcomp.set_threads(1)
        assert tcomp.get_threads() == 1
        pairs = [(rand(rng, 64, 48), rand(rng, 48, 32)) for _ in range(8)]
        results = [None] * len(pairs)

        def work(i):
            for _ in range(20):
                results[i] = mm(*pairs[i])
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (A, B), C in zip(pairs, results):
            close(C, A.astype(np.float64) @ B)
    finally:
        tcomp.set_threads(old)


def test_repeated_calls_with_changing_layouts_and_outputs(corpus, rng):
    """Calls after the first reuse a plan per input signature: layouts (views
    with strides), out= of another framework and no_grad calls on tensors
    that require grad must still give the right results."""
    mm = corpus("matmul").matmul
    for i in range(6):
        A = rand(rng, 8, 6)
        B = rand(rng, 9, 8)[:6] if i % 2 else rand(rng, 8, 6).T[:, :]  # (6,8) or (6,8) view
        B = np.ascontiguousarray(B) if i % 3 == 0 else B
        close(mm(A, B), A.astype(np.float64) @ B)
        t = torch.from_numpy(A).t().contiguous().t() if i % 2 else torch.from_numpy(A)
        close(mm(t, torch.from_numpy(np.ascontiguousarray(B))), A.astype(np.float64) @ B)
        out = torch.full((8, 8), float("nan")) if i % 2 else np.full((8, 8), np.nan, np.float32)
        mm(A, np.ascontiguousarray(B), out=out)
        close(out, A.astype(np.float64) @ B)
    Ag = torch.from_numpy(rand(rng, 8, 6)).requires_grad_()
    Bt = torch.from_numpy(rand(rng, 6, 8))
    with torch.no_grad():
        for _ in range(3):
            C = mm(Ag, Bt)
            assert not C.requires_grad
    C = mm(Ag, Bt)
    assert C.requires_grad  # grad mode again: through autograd
    C.sum().backward()
    close(Ag.grad, torch.ones(8, 8, dtype=torch.float64) @ Bt.double().T)


def test_gil_is_released_while_a_kernel_runs(corpus, rng):
    """Another Python thread keeps running while a long kernel does (ctypes
    drops the GIL around the library call): with the GIL held it would stop
    for the whole call."""
    import time
    mm = corpus("matmul").matmul
    A, B = rand(rng, 1000, 1000), rand(rng, 1000, 1000)
    stamps, stop = [], [False]

    def spin():
        while not stop[0]:
            stamps.append(time.perf_counter())
    old = tcomp.get_threads()
    tcomp.set_threads(1)
    mm(A, B)  # compiled
    t = threading.Thread(target=spin)
    t.start()
    try:
        while not stamps:
            pass
        t0 = time.perf_counter()
        mm(A, B)
        t1 = time.perf_counter()
    finally:
        stop[0] = True
        t.join()
        tcomp.set_threads(old)
    inside = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
    gap = max(b - a for a, b in zip(inside, inside[1:]))
    assert t1 - t0 > 0.01, "the kernel was too short to tell"
    assert gap < 0.5 * (t1 - t0), (f"the other thread stood still for {gap * 1e3:.1f} ms "
                                   f"of a {(t1 - t0) * 1e3:.1f} ms call")


def test_cuda_code_through_the_emulator(corpus, rng):
    """The CUDA backend's code for a def, run by tcomp's CUDA emulator on the
    CPU (target=cuda-emu: CPU tensors), called from Python like any op."""
    src = open(corpus("softmax").filename).read()
    sm = tcomp.define(src, name="softmax", options="target=cuda-emu")
    X = rand(rng, 4, 40) * 3
    close(sm(X), softmax_ref(X.astype(np.float64)))
    assert "__global__" in sm.compile(X).emit("cuda")


def test_lazily_negated_torch_views(corpus, rng):
    """A torch view with the negation bit (torch._neg_view, the imaginary
    part of a conjugate) is read with its sign on every call, the repeated
    ones too."""
    add = tcomp.define("def add(float(N) A, float(N) B) -> (C) { C(i) = A(i) + B(i) }",
                       name="add")
    a = torch.from_numpy(rand(rng, 6))
    z = torch.complex(torch.from_numpy(rand(rng, 6)), torch.from_numpy(rand(rng, 6)))
    nb = z.conj().imag
    assert nb.is_neg()
    for _ in range(3):
        close(add(a, nb), a.double() - z.imag.double())


@pytest.mark.parametrize("file,name,make,ref", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_overwritten_outputs_do_not_depend_on_old_contents(corpus, rng, file, name, make, ref):
    """Outputs the library calls overwritten (tc_module_output_overwritten;
    a call allocates them uninitialised) give the same result into buffers
    poisoned with NaN and with 12345."""
    op = corpus(file)[name]
    inputs = make(rng)
    k = op.compile(*inputs)
    got = []
    for poison in (np.nan, 12345):
        outs = []
        for c, b, shape in k.outputs:
            dt = {(2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64,
                  (0, 8): np.int8, (0, 32): np.int32, (0, 64): np.int64}[(c, b)]
            outs.append(np.full(shape, poison if dt in (np.float16, np.float32, np.float64)
                                else 123, dtype=dt))
        op(*inputs, out=tuple(outs))
        got.append(outs)
    for i, ow in enumerate(op.overwritten):
        if ow:
            np.testing.assert_array_equal(got[0][i], got[1][i])
    if (file, name) in (("matmul", "matmul"), ("softmax", "softmax"), ("conv2d", "conv2d")):
        assert all(op.overwritten)
    if (file, name) == ("matvec", "row_sum_accumulate"):
        assert op.overwritten == [False]
