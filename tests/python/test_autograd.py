"""tcomp ops inside torch.autograd: gradcheck in float64 against finite
differences (matmul, conv2d, softmax, layer norm, an MLP), gradients
against PyTorch's own, TorchModule, and what is and is not differentiated."""

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

import tcomp

SRC = """
def matmul(double(M,K) A, double(K,N) B) -> (C) {
    C(m,n) +=! A(m,r_k) * B(r_k,n)
}
def conv2d(double(N,C,H,W) I, double(F,C,KH,KW) W1, double(F) B) -> (O) {
    O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)
    O(n,f,h,w) = O(n,f,h,w) + B(f)
}
def softmax(double(N,D) I) -> (O) {
    mx(n) max=! I(n,r_d)
    sm(n) +=! exp(I(n,r_d) - mx(n))
    O(n,d) = exp(I(n,d) - mx(n)) / sm(n)
}
def layernorm(double(N,D) X, double(D) G, double(D) Bt) -> (Y) {
    mean(n) +=! X(n,r_d)
    mean(n) = mean(n) / D
    xc(n,d) = X(n,d) - mean(n)
    var(n) +=! xc(n,r_d) * xc(n,r_d)
    var(n) = var(n) / D
    Y(n,d) = xc(n,d) * rsqrt(var(n) + 0.00001) * G(d) + Bt(d)
}
def mlp(double(B,I) X, double(H,I) W1, double(H) B1, double(K,H) W2, double(K) B2) -> (Z) {
    A(b,h) +=! X(b,r_i) * W1(h,r_i)
    A(b,h) = fmax(A(b,h) + B1(h), 0)
    Z(b,k) +=! A(b,r_h) * W2(k,r_h)
    Z(b,k) = Z(b,k) + B2(k)
}
def xent(double(B,K) Z, int64(B) Y) -> (L) {
    mx(b) max=! Z(b,r_k)
    s(b) +=! exp(Z(b,r_k) - mx(b))
    picked(b) +=! Y(b) == r_k ? Z(b,r_k) : 0.0
    L +=! (log(s(r_b)) + mx(r_b) - picked(r_b)) / B
}
def lookup(double(V,D) LUT, int64(B) I) -> (O) {
    O(b,d) = LUT(I(b),d)
}
def stats(double(N,D) X) -> (S, Q) {
    S(n) +=! X(n,r_d)
    Q(n) +=! X(n,r_d) * X(n,r_d)
}
"""


@pytest.fixture(scope="module")
def m():
    return tcomp.define(SRC)


def t(rng, *shape, grad=True):
    x = torch.from_numpy(rng.uniform(-1, 1, size=shape))
    return x.requires_grad_(grad)


def test_gradcheck_matmul(m, rng):
    assert gradcheck(m.matmul, (t(rng, 5, 4), t(rng, 4, 3)))


def test_gradcheck_conv2d(m, rng):
    assert gradcheck(m.conv2d, (t(rng, 2, 3, 6, 5), t(rng, 4, 3, 3, 2), t(rng, 4)))


def test_gradcheck_softmax(m, rng):
    assert gradcheck(m.softmax, (t(rng, 4, 7) * 3,))


def test_gradcheck_layernorm(m, rng):
    assert gradcheck(m.layernorm, (t(rng, 3, 8), t(rng, 8), t(rng, 8)))


def test_gradcheck_mlp(m, rng):
    X = t(rng, 6, 10)
    W1, B1, W2, B2 = t(rng, 8, 10), t(rng, 8), t(rng, 4, 8), t(rng, 4)
    assert gradcheck(m.mlp, (X, W1, B1, W2, B2))


def test_mlp_and_loss_gradients_match_pytorch(m, rng):
    X = t(rng, 16, 20, grad=False)
    Y = torch.from_numpy(rng.integers(0, 5, size=16))
    params = [t(rng, 12, 20), t(rng, 12), t(rng, 5, 12), t(rng, 5)]
    loss = m.xent(m.mlp(X, *params), Y)
    loss.backward()
    ref = [p.detach().clone().requires_grad_() for p in params]
    h = torch.relu(X @ ref[0].T + ref[1])
    ref_loss = torch.nn.functional.cross_entropy(h @ ref[2].T + ref[3], Y)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    for p, r in zip(params, ref):
        torch.testing.assert_close(p.grad, r.grad)


def test_gather_gradient_scatters_into_the_table(m, rng):
    LUT = t(rng, 10, 3)
    idx = torch.tensor([1, 4, 1, 9, 4, 1])
    out = m.lookup(LUT, idx)
    w = torch.from_numpy(rng.uniform(-1, 1, size=(6, 3)))
    (out * w).sum().backward()
    want = torch.zeros(10, 3, dtype=torch.float64).index_add_(0, idx, w)
    torch.testing.assert_close(LUT.grad, want)


def test_only_inputs_that_require_grad_get_one(m, rng):
    A, B = t(rng, 5, 4), t(rng, 4, 3, grad=False)
    m.matmul(A, B).sum().backward()
    assert B.grad is None
    torch.testing.assert_close(A.grad, torch.ones(5, 3, dtype=torch.float64) @ B.T)
    # no grad mode: a plain call, outputs without a graph
    with torch.no_grad():
        C = m.matmul(A, B)
    assert not C.requires_grad
    # several outputs, one of them unused by the loss
    X = t(rng, 3, 6)
    S, Q = m.stats(X)
    Q.sum().backward()
    torch.testing.assert_close(X.grad, 2 * X.detach())


def test_torch_module_trains(rng):
    lin = tcomp.define("""
    def linear(float(B,I) X, float(O,I) W, float(O) Bias) -> (Y) {
        Y(b,o) +=! X(b,r_i) * W(o,r_i)
        Y(b,o) = Y(b,o) + Bias(o)
    }""", name="linear")
    torch.manual_seed(int(rng.integers(1 << 31)))
    ref = torch.nn.Linear(8, 3)
    mod = tcomp.TorchModule(lin, {"W": ref.weight.detach().clone(),
                                  "Bias": ref.bias.detach().clone()})
    assert [n for n, _ in mod.named_parameters()] == ["W", "Bias"]
    assert "linear" in repr(mod)
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    X = torch.randn(32, 8)
    target = X @ torch.randn(8, 3)
    for _ in range(5):
        for model, o in ((mod, opt), (ref, ref_opt)):
            o.zero_grad()
            loss = ((model(X) - target) ** 2).mean()
            loss.backward()
            o.step()
    torch.testing.assert_close(mod.W, ref.weight)
    torch.testing.assert_close(mod.Bias, ref.bias)
    with pytest.raises(tcomp.ArgumentError, match="takes 1 data input"):
        mod(X, X)
    with pytest.raises(tcomp.ArgumentError, match="no input 'Q'"):
        tcomp.TorchModule(lin, {"Q": torch.zeros(3)})


def test_derived_defs_are_readable_tc(m):
    text = m.grad("softmax", saves=True)
    assert "def softmax_fwd(" in text and "def softmax_grad(" in text
    reparsed = tcomp.define(text)
    assert "softmax_grad" in reparsed.defs
    assert "d_A" in tcomp.grad(SRC, "matmul", wrt=["A"]) and "d_B" not in \
        tcomp.grad(SRC, "matmul", wrt="A")


def test_torch_module_copies_and_saves(rng, tmp_path):
    """deepcopy and torch.save/torch.load of a TorchModule: the def travels as
    its text and is parsed again; the copies compute the same."""
    import copy
    op = tcomp.define("def lin(float(B,I) X, float(O,I) W) -> (Y) {\n"
                      "    Y(b,o) +=! X(b,r_i) * W(o,r_i)\n}\n", name="lin",
                      options="unroll=off")
    mod = tcomp.TorchModule(op, {"W": torch.from_numpy(rng.uniform(-1, 1, (3, 5))).float()})
    X = torch.from_numpy(rng.uniform(-1, 1, (4, 5))).float()
    twin = copy.deepcopy(mod)
    torch.save(mod, tmp_path / "mod.pt")
    loaded = torch.load(tmp_path / "mod.pt")
    for other in (twin, loaded):
        assert other.op is not mod.op and other.op.name == "lin"
        assert str(other.op.options) == str(op.options)
        torch.testing.assert_close(other(X), mod(X))
    twin.W.data.mul_(2)  # the copy's parameters are its own
    torch.testing.assert_close(twin(X), 2 * mod(X))
