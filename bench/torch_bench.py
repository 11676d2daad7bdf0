"""PyTorch CPU side of bench/compare.py: eager and torch.compile.

Run by compare.py inside the benchmark virtualenv (or the Python that has
torch), one process per thread count, as a small server so that each kernel
is compiled once and the rounds can alternate with the other contenders:

    python torch_bench.py --info
        one JSON line: torch version, BLAS, CPU capability
    python torch_bench.py --serve --threads N
        reads one JSON request per line on stdin, answers one JSON line each:
        {"bench": <an entry of `baselines list`>, "mode": "eager"|"compile",
         "reps": R, "dir": DIR, "dump": true|false}
        -> {"ok": true, "median_ms": .., "min_ms": .., "runs": ..,
            "warmup": .., "first_call_s": ..}  or  {"ok": false, "error": ".."}
        or {"grad": {"op": OP, "inputs": [{"name", "dtype", "shape", "int_hi"}],
                     "wrt": [NAME...], "seed": S},
            "mode": "autograd"|"autograd_compile", "reps": R}
        -> the same answer for autograd's backward alone (bench/grad.py):
           the forward of grad_forward(OP) on random inputs (floats in
           [-1, 1), integers in [0, int_hi)) run once outside the timed
           region, then torch.autograd.backward(outputs, random d_outputs,
           retain_graph=True) timed, the gradients reset before each run

The inputs are read from DIR/in_<name>.npy (written by `baselines NAME inputs`;
float32, or int64 for class labels), so every contender sees the same numbers;
with "dump" each output of the last timed run goes to
DIR/out_torch_<mode>_<output name>.npy for the cross-check.  No NumPy is
needed: .npy files are parsed here.

A def with several outputs is a function returning a tuple in the def's
order.  Eager versions are the operations one by one, as a user would write
them in PyTorch (the library's own fused call where one exists, as
F.layer_norm or F.conv2d with groups).

Timing mirrors baselines.c: warm-up (torch.compile: the first call compiles,
then 3 more calls), then at least R runs and 0.2 s of runs timed with
time.perf_counter, but no more once they passed 3 s; the median is reported.  A
failing torch.compile is reported as {"ok": false, "error": ...}, never a crash.
"""

import argparse
import ast
import json
import math
import os
import re
import statistics
import sys
import time
import traceback

import compare  # write_npy

MIN_TIME = 0.2  # seconds: time at least R runs and at least this long ...
MAX_TIME = 3.0  # ... but no more once the timed runs passed this


NPY_TYPES = {"<f4": "float32", "<i8": "int64"}


def npy_read(torch, path):
    """A float32 or int64 C-order .npy file as a torch tensor."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    if data[6] >= 2:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    else:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] not in NPY_TYPES or header["fortran_order"]:
        raise ValueError(f"{path}: expected little-endian float32 or int64 in C order")
    dtype = getattr(torch, NPY_TYPES[header["descr"]])
    body = bytearray(data[start + hlen:])
    # clone: torch-allocated (aligned) memory, as a model's tensors would be
    return torch.frombuffer(body, dtype=dtype).reshape(header["shape"]).clone()


def npy_write(path, t):
    """Write a float32 tensor as a .npy file (C order)."""
    import ctypes
    t = t.detach().contiguous()
    compare.write_npy(path, "<f4", tuple(t.shape), ctypes.string_at(t.data_ptr(), t.numel() * 4))


def kernel(torch, entry):
    """The PyTorch function of a tcomp def of bench/kernels.tc."""
    F = torch.nn.functional
    if entry == "matmul":
        return lambda A, B: torch.mm(A, B)
    if entry == "matmul_nt":
        return lambda A, B: torch.mm(A, B.t())
    if entry == "batch_matmul":
        return lambda X, Y: torch.bmm(X, Y)
    if entry == "conv2d":
        return lambda I, W1, B: F.conv2d(I, W1, B)
    if entry == "softmax":
        return lambda I: torch.softmax(I, dim=1)
    if entry == "layernorm":
        return lambda X, G, Bt: F.layer_norm(X, (X.shape[-1],), G, Bt, eps=1e-5)
    if entry == "fcrelu":
        return lambda In, W, Bias: torch.relu(F.linear(In, W, Bias))
    if entry == "kronecker3":
        def kron3(W0, W1, W2, X):
            xw0 = torch.einsum("mabc,da->mbcd", X, W0)      # (m, n1, n2, d0)
            xw1 = torch.einsum("mbcd,eb->mcde", xw0, W1)    # (m, n2, d0, d1)
            return torch.einsum("mcde,fc->mdef", xw1, W2)   # (m, d0, d1, d2)
        return kron3
    if entry == "mlp_fwd":
        def mlp_fwd(X, W1, B1, W2, B2):
            hd = torch.relu(X @ W1 + B1)
            p = torch.softmax(hd @ W2 + B2, dim=1)
            return hd, p
        return mlp_fwd
    if entry == "mlp_bwd":
        def mlp_bwd(X, Hd, P, Y, W2):
            dl = (P - F.one_hot(Y, P.shape[1]).to(P.dtype)) / P.shape[0]
            dw2 = Hd.t() @ dl
            db2 = dl.sum(0)
            dh = dl @ W2.t()
            dh = torch.where(Hd > 0, dh, 0.0)
            dw1 = X.t() @ dh
            db1 = dh.sum(0)
            return dw1, db1, dw2, db2
        return mlp_bwd
    if entry == "sgd":
        def sgd(W1, B1, W2, B2, dW1, dB1, dW2, dB2):
            lr = 0.01
            return W1 - lr * dW1, B1 - lr * dB1, W2 - lr * dW2, B2 - lr * dB2
        return sgd
    if entry == "wgrad":
        return lambda X, dH: X.t() @ dH
    if entry == "biasgrad":
        return lambda dH: dH.sum(0)
    if entry == "group_conv":
        def group_conv(I, W1, B):
            n, g, c, h, w = I.shape
            f = W1.shape[1]
            o = F.conv2d(I.view(n, g * c, h, w), W1.view(g * f, c, *W1.shape[3:]),
                         B.view(g * f), groups=g)
            return o.view(n, g, f, *o.shape[2:])
        return group_conv
    if entry == "depthwise":
        return lambda I, W1, B: F.conv2d(I, W1.unsqueeze(1), B, groups=I.shape[1])
    if entry == "attention":
        def attention(Q, K, V):
            s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
            p = torch.softmax(s, dim=-1)
            return p @ V
        return attention
    if entry == "rmsnorm_res":
        def rmsnorm_res(X, R, G):
            hs = X + R
            y = hs * torch.rsqrt(hs.pow(2).mean(-1, keepdim=True) + 1e-6) * G
            return hs, y
        return rmsnorm_res
    if entry == "layernorm_bwd":
        def layernorm_bwd(X, dY, G):
            d = X.shape[-1]
            mean = X.mean(-1, keepdim=True)
            rstd = torch.rsqrt(((X - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
            xh = (X - mean) * rstd
            dbt = dY.sum(0)
            dg = (dY * xh).sum(0)
            g = dY * G
            s1 = g.sum(-1, keepdim=True)
            s2 = (g * xh).sum(-1, keepdim=True)
            dx = rstd * (g - s1 / d - xh * s2 / d)
            return dx, dg, dbt
        return layernorm_bwd
    raise ValueError(f"no PyTorch version of '{entry}'")


def grad_forward(torch, op):
    """The PyTorch forward of an op of bench/grad.tc (bench/grad.py): a
    function of the def's inputs in its order."""
    F = torch.nn.functional
    if op == "matmul":
        return lambda A, B: A @ B
    if op == "softmax":
        return lambda X: torch.softmax(X, dim=1)
    if op == "lsm_nll":
        return lambda X, Y: F.nll_loss(F.log_softmax(X, dim=1), Y, reduction="none")
    if op == "layernorm":
        return lambda X, G, Bt: F.layer_norm(X, (X.shape[-1],), G, Bt, eps=1e-5)
    if op == "fcrelu":
        return lambda X, W, b: torch.relu(F.linear(X, W, b))
    if op == "mlp2":
        return lambda X, W1, b1, W2, b2: F.linear(torch.relu(F.linear(X, W1, b1)), W2, b2)
    if op == "conv2d":
        return lambda I, W1, B: F.conv2d(I, W1, B)
    if op == "conv2d_s2":
        return lambda I, W1: F.conv2d(I, W1, stride=2)
    if op == "conv2d_pad":
        return lambda I, W1: F.conv2d(I, W1, padding=1)
    if op == "maxpool":
        return lambda I: F.max_pool2d(I, 2)
    if op == "embedding":
        return lambda E, Ids: F.embedding(Ids, E)
    raise ValueError(f"no PyTorch forward of '{op}'")


def timed(call, reps, compiled):
    """Time call() as baselines.c times a kernel: a warm-up (compiled: the
    first call compiled, 3 more; else up to 3 runs or 0.2 s, a first call
    of 1 s or more being the only sample), then at least reps runs and
    MIN_TIME s, no more once MAX_TIME s passed.  (last result, samples in
    seconds, warm-up runs, first call's seconds)."""
    t0 = time.perf_counter()
    out = call()
    first_call = time.perf_counter() - t0
    samples, w = [], 1
    if compiled:
        while w < 4:
            out = call()
            w += 1
    elif first_call >= 1.0:
        samples.append(first_call)  # a long run: the warm-up is a sample
        w = 0
    else:
        warm = first_call
        while w < 3 and warm < 0.2:
            t0 = time.perf_counter()
            out = call()
            warm += time.perf_counter() - t0
            w += 1
    total = sum(samples)
    while (len(samples) < reps or total < MIN_TIME) and (not samples or total < MAX_TIME):
        t0 = time.perf_counter()
        out = call()
        dt = time.perf_counter() - t0
        samples.append(dt)
        total += dt
    return out, samples, w, first_call


def answer(samples, w, first_call):
    return {"ok": True, "median_ms": 1e3 * statistics.median(samples),
            "min_ms": 1e3 * min(samples), "runs": len(samples), "warmup": w,
            "first_call_s": first_call}


def first_line(e):
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]


class Server:
    def __init__(self, torch, threads):
        self.torch = torch
        self.threads = threads
        self.inputs = {}     # benchmark name -> list of tensors
        self.compiled = {}   # benchmark name -> compiled function
        self.graphs = {}     # mode -> outputs, d_outputs, leaves, of op graph_op (grad)
        self.graph_op = None

    def load(self, bench, d):
        if bench["name"] not in self.inputs:
            self.inputs = {bench["name"]: [npy_read(self.torch, os.path.join(d, f"in_{t['name']}.npy"))
                                           for t in bench["inputs"]]}
        return self.inputs[bench["name"]]

    def bench(self, req):
        torch = self.torch
        b, mode, reps = req["bench"], req["mode"], int(req["reps"])
        args = self.load(b, req["dir"])
        fn = kernel(torch, b["entry"])
        with torch.inference_mode():
            if mode == "compile":
                if b["name"] not in self.compiled:
                    self.compiled[b["name"]] = torch.compile(fn)
                fn = self.compiled[b["name"]]
            elif mode != "eager":
                raise ValueError(f"unknown mode '{mode}'")
            out, samples, w, first_call = timed(lambda: fn(*args), reps, mode == "compile")
        if req.get("dump"):
            outs = out if isinstance(out, tuple) else (out,)
            specs = b.get("outputs") or [b["output"]]
            if len(outs) != len(specs):
                raise ValueError(f"{b['entry']}: {len(outs)} outputs, the def has {len(specs)}")
            for t, spec in zip(outs, specs):
                npy_write(os.path.join(req["dir"], f"out_torch_{mode}_{spec['name']}.npy"), t)
        return answer(samples, w, first_call)

    def grad(self, req):
        """Autograd's backward alone of an op of bench/grad.py: the forward
        run once outside the timed region, then backward(retain_graph=True)
        timed, the gradients reset to None before each run (so none is
        accumulated into)."""
        torch = self.torch
        g, mode, reps = req["grad"], req["mode"], int(req["reps"])
        if g["op"] != self.graph_op:    # one op's graphs at a time: the big ops' memory
            self.graphs, self.graph_op = {}, g["op"]
        if mode not in self.graphs:
            gen = torch.Generator().manual_seed(int(g.get("seed", 1)))
            args, leaves = [], []
            for t in g["inputs"]:
                if t["dtype"] == "int64":
                    v = torch.randint(0, int(t["int_hi"]), t["shape"], generator=gen)
                else:
                    v = torch.rand(t["shape"], generator=gen) * 2 - 1
                    v[v == 0] = 0.5
                    if t["name"] in g["wrt"]:
                        v.requires_grad_(True)
                        leaves.append(v)
                args.append(v)
            fn = grad_forward(torch, g["op"])
            if mode == "autograd_compile":
                fn = torch.compile(fn)
            elif mode != "autograd":
                raise ValueError(f"unknown mode '{mode}'")
            t0 = time.perf_counter()
            outs = fn(*args)
            fwd_s = time.perf_counter() - t0
            outs = outs if isinstance(outs, tuple) else (outs,)
            douts = [torch.rand(o.shape, generator=gen) + 0.25 for o in outs]
            self.graphs[mode] = (outs, douts, leaves, fwd_s)
        outs, douts, leaves, fwd_s = self.graphs[mode]

        def backward():
            for t in leaves:
                t.grad = None
            torch.autograd.backward(outs, douts, retain_graph=True)
        _, samples, w, first_call = timed(backward, reps, mode == "autograd_compile")
        return {**answer(samples, w, first_call), "forward_first_call_s": fwd_s}


def info(torch):
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    cap = next((line.split(":", 1)[1].strip() for line in cfg.splitlines()
                if "CPU capability usage" in line), "?")
    return {"version": torch.__version__, "blas": blas.group(1) if blas else "?", "cpu_capability": cap,
            "python": sys.executable}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    # The protocol gets its own copy of stdout; anything else written to
    # stdout (by torch, by compilers it runs) goes to stderr.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        proto.write(json.dumps({"ok": False, "error": "import torch: " + first_line(e)}) + "\n")
        proto.flush()
        return 0
    if a.info:
        proto.write(json.dumps({"ok": True, **info(torch)}) + "\n")
        proto.flush()
        return 0
    torch.set_num_threads(a.threads)
    server = Server(torch, a.threads)
    proto.write(json.dumps({"ok": True, "ready": True, **info(torch),
                            "threads": torch.get_num_threads()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            reply = server.grad(req) if "grad" in req else server.bench(req)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            traceback.print_exc(file=sys.stderr)
            reply = {"ok": False, "error": first_line(e)}
        proto.write(json.dumps(reply) + "\n")
        proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
