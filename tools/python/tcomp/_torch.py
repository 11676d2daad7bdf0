"""PyTorch integration: ops differentiable through torch.autograd with the
derived backward defs, and torch.nn.Module wrappers of defs with
parameters.  Imported when first needed, so that `import tcomp` does not
import torch."""

import torch
from torch.autograd.function import once_differentiable

from ._core import Module, Op
from ._errors import ArgumentError


def derived(op, wrt):
    """(forward op, backward op) of op for the inputs wrt (a tuple of names):
    the backward def with saves (Module.grad(saves=True)) parsed once and
    kept; the forward is "<name>_fwd" (outputs, then the temporaries the
    backward reads) when the derivation made one, else op itself."""
    d = op._autograd.get(wrt)
    if d is None:
        text = op.grad(list(wrt), saves=True)
        m = Module(text, filename=f"<gradient of {op.name}>", options=op.options)
        fwd = m[op.name + "_fwd"] if op.name + "_fwd" in m.defs else op
        d = op._autograd[wrt] = (fwd, m[op.name + "_grad"])
    return d


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, wrt, *inputs):
        fwd, bwd = derived(op, wrt)
        res = fwd.run(*inputs)
        res = res if isinstance(res, tuple) else (res,)
        n = len(op.outputs)
        ctx.op, ctx.wrt, ctx.bwd = op, wrt, bwd
        # tensors through save_for_backward (version-checked), other arrays on ctx
        values = list(inputs) + list(res)
        ctx.tensor_at = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        ctx.others = {i: v for i, v in enumerate(values) if not isinstance(v, torch.Tensor)}
        ctx.names = op.inputs + fwd.outputs
        ctx.save_for_backward(*[values[i] for i in ctx.tensor_at])
        outs = res[:n]
        ctx.mark_non_differentiable(*[o for o in outs if not o.is_floating_point()])
        return outs[0] if n == 1 else outs

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        op, bwd = ctx.op, ctx.bwd
        values = dict(ctx.others)
        values.update(zip(ctx.tensor_at, ctx.saved_tensors))
        by_name = {name: values[i] for i, name in enumerate(ctx.names)}
        n = len(op.outputs)
        # the backward's inputs: op's inputs, the outputs and saved
        # temporaries it reads (by name), then d_<O> per output, in order
        args = [by_name[name] for name in bwd.inputs[:len(bwd.inputs) - n]]
        for o, g in zip(op.outputs, grads):
            args.append(g if g is not None else torch.zeros_like(by_name[o]))
        res = bwd.run(*args)
        res = res if isinstance(res, tuple) else (res,)
        got = dict(zip(bwd.outputs, res))
        return (None, None) + tuple(got.get("d_" + x) if x in ctx.wrt else None
                                    for x in op.inputs)


def apply(op, inputs):
    """op(*inputs) through autograd: gradients for the floating-point torch
    inputs that require them."""
    wrt = tuple(x for x, v in zip(op.inputs, inputs)
                if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point())
    return _Function.apply(op, wrt, *inputs)


class TorchModule(torch.nn.Module):
    """A def with parameters as a torch.nn.Module: params maps some of the
    def's inputs to tensors (made nn.Parameters, registered under their
    names); forward(*data) takes the other inputs in the def's order and
    runs op through autograd.

        lin = tcomp.TorchModule(tcomp.define(src, name="linear"),
                                {"W": torch.randn(10, 784) * 0.01, "B": torch.zeros(10)})
        Y = lin(X)
    """

    def __init__(self, op, params):
        super().__init__()
        if not isinstance(op, Op):
            raise ArgumentError("TorchModule: expected an Op (tcomp.define(source, name=...))")
        self.op = op
        for name, value in params.items():
            if name not in op.inputs:
                raise ArgumentError(f"TorchModule: {op.name} has no input {name!r} (inputs: "
                                    f"{', '.join(op.inputs)})")
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                raise ArgumentError(f"TorchModule: parameter {name} must be a floating-point "
                                    "torch tensor")
            try:
                self.register_parameter(name, torch.nn.Parameter(value))
            except (KeyError, AttributeError) as e:
                raise ArgumentError(f"TorchModule: cannot register parameter {name!r}: {e}") \
                    from e
        self.param_names = [n for n in op.inputs if n in params]
        self.data_names = [n for n in op.inputs if n not in params]

    def forward(self, *data):
        if len(data) != len(self.data_names):
            raise ArgumentError(f"{self.op.name}: takes {len(self.data_names)} data input(s) "
                                f"({', '.join(self.data_names)}), got {len(data)}")
        it = iter(data)
        return self.op(*[getattr(self, n) if n in self.param_names else next(it)
                         for n in self.op.inputs])

    def extra_repr(self):
        return f"{self.op.name}: parameters {', '.join(self.param_names)}"
