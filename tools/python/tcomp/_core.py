"""Modules, ops and kernels: .tc text parsed once, each def a callable,
compiled once per input dtypes, shapes, device and options."""

import ctypes
import functools
import math
import os
import sys
import threading
import warnings

from . import _lib
from ._errors import (ArgumentError, ClosedError, CompileError, InternalError, OutOfMemory,
                      TcompWarning)
from ._plan import Plan, output_signature, signature
from ._tensor import DEVICE_NAMES, allocator, as_arg, dtype_name, is_torch

# One context for the process: it serialises compiles, keeps errors per
# thread and holds the thread setting; it lives as long as the process (it
# must outlive every module and kernel, some of which the interpreter frees
# in no particular order at exit).
_ctx = _lib.tc_context_new()
if not _ctx:
    raise MemoryError("tcomp: out of memory creating the context")
_parse_lock = threading.Lock()  # parsing and its warnings: one thread at a time


def _fail(cls, what=None):
    """The exception for the calling thread's last error: cls for bad input,
    OutOfMemory, InternalError by the library's kind."""
    kind = _lib.tc_context_error_kind(_ctx)
    msg = (_lib.tc_context_error(_ctx) or b"").decode(errors="replace").rstrip("\n")
    if not msg:
        msg = what or "error"
    if kind == _lib.TC_ERROR_NOMEM:
        cls = OutOfMemory
    elif kind == _lib.TC_ERROR_INTERNAL:
        cls = InternalError
    return cls(msg)


_seen_warnings = [""]  # the context's warnings text already shown


def _warn_library():
    """Show what the context's warnings gained since last shown: a parse's
    warnings (they start a new text), then the kernel cache's notes that
    compiles append."""
    w = (_lib.tc_context_warnings(_ctx) or b"").decode(errors="replace")
    seen, _seen_warnings[0] = _seen_warnings[0], w
    new = w[len(seen):] if w.startswith(seen) else w
    if new.strip():
        warnings.warn(new.strip("\n"), TcompWarning, stacklevel=4)


def set_threads(n):
    """Threads for the parallel loops of kernels whose threads option is auto:
    1 to 256, or 0 for one per CPU the process may run on (its affinity
    mask; the default)."""
    if _lib.tc_context_set_threads(_ctx, int(n)) < 0:
        raise _fail(ArgumentError)


def get_threads():
    """The setting of set_threads (0: one per CPU the process may run on)."""
    return _lib.tc_context_threads(_ctx)


def set_cache(path):
    """The kernel cache that compiles read: a path, None for the default
    location ($TCOMP_CACHE, else ~/.cache/tcomp/kernels.sqlite), or "" for
    none.  Takes effect for kernels not yet compiled."""
    if _lib.tc_context_set_cache(_ctx, None if path is None else os.fsencode(path)) < 0:
        raise _fail(ArgumentError)


class Options:
    """Mapping options (`tcomp options` lists them): Options("tile=32,32
    unroll=off"), Options({"tile": "32,32"}) or Options(tile="32,32")."""

    def __init__(self, spec=None, **kw):
        self._p = _lib.tc_options_new()
        if not self._p:
            raise OutOfMemory("out of memory")
        if isinstance(spec, Options):
            spec = str(spec)
        if isinstance(spec, str):
            if _lib.tc_options_parse(self._p, spec.encode(), _ctx) < 0:
                raise _fail(ArgumentError, "bad options")
        elif isinstance(spec, dict):
            kw = {**spec, **kw}
        elif spec is not None:
            raise ArgumentError(f"options: expected a string, a dict or Options, got "
                                f"{type(spec).__name__}")
        for name, value in kw.items():
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            if _lib.tc_options_set(self._p, str(name).encode(), str(value).encode(), _ctx) < 0:
                raise _fail(ArgumentError, f"bad option {name}")

    def __getitem__(self, name):
        v = _lib.tc_options_get(self._p, str(name).encode())
        if v is None:
            raise KeyError(name)
        return v.decode()

    def __str__(self):
        return _lib.take_string(_lib.tc_options_print(self._p)) or ""

    def __repr__(self):
        return f"Options({str(self)!r})"

    def device_type(self):
        return _lib.tc_options_device(self._p)

    def __reduce__(self):
        return (Options, (str(self),))

    def __del__(self):
        if getattr(self, "_p", None):
            _lib.tc_options_free(self._p)
            self._p = None


def describe_options():
    """The option table (`tcomp options`): name, values, default and doc."""
    return _lib.take_string(_lib.tc_options_describe())


class Module:
    """Parsed and checked .tc text.  Each def is an Op: module.matmul,
    module["matmul"]; module.defs lists their names."""

    def __init__(self, source, filename=None, options=None):
        if not isinstance(source, str):
            raise ArgumentError(f"source: expected .tc text (str), got {type(source).__name__}")
        self.source = source
        self.filename = filename or "<string>"
        self.options = None if options is None else Options(options)
        with _parse_lock:
            p = _lib.tc_module_parse(_ctx, source.encode(), self.filename.encode())
            if not p:
                raise _fail(CompileError, "the .tc text has errors")
            _warn_library()
        self._p = p
        self._ops = {}
        self._lock = threading.Lock()
        self.defs = [_lib.tc_module_def_name(p, i).decode()
                     for i in range(_lib.tc_module_num_defs(p))]

    def _handle(self):
        if not self._p:
            raise ClosedError(f"{self.filename}: the module is closed")
        return self._p

    def __reduce__(self):
        # pickled (copy.deepcopy, torch.save of a TorchModule) as its text:
        # unpickling parses it again; kernels are compiled again on use
        return (Module, (self.source, self.filename, self.options))

    def __getitem__(self, name):
        if name not in self.defs:
            raise KeyError(f"{self.filename}: no def named {name!r} (defs: "
                           f"{', '.join(self.defs)})")
        with self._lock:
            op = self._ops.get(name)
            if op is None:
                op = self._ops[name] = Op(self, name)
            return op

    def __getattr__(self, name):
        if name.startswith("_") or name not in self.__dict__.get("defs", ()):
            raise AttributeError(name)
        return self[name]

    def __dir__(self):
        return list(super().__dir__()) + list(self.defs)

    def __iter__(self):
        return (self[d] for d in self.defs)

    def grad(self, name, wrt=None, saves=False):
        """The backward def of def name as .tc text (`tcomp grad`): inputs
        name's inputs, the outputs (and with saves=True the temporaries) it
        reads, then d_<O> per output; outputs d_<X> for X in wrt (a list or
        "A,B"; None: every floating-point input).  saves=True puts the def
        "<name>_fwd" (name's outputs, then those temporaries) first."""
        if name not in self.defs:
            raise KeyError(name)
        if isinstance(wrt, (list, tuple)):
            wrt = ",".join(wrt)
        t = _lib.tc_module_grad(self._handle(), name.encode(),
                                None if wrt is None else wrt.encode(),
                                _lib.TC_GRAD_SAVES if saves else 0)
        if not t:
            raise _fail(CompileError, f"{name}: cannot derive the gradient")
        return _lib.take_string(t)

    def close(self):
        """Free the module now (also done when it is garbage): its ops and
        their kernels then raise ClosedError."""
        with self._lock:
            ops, self._ops = list(self._ops.values()), {}
        for op in ops:
            op._close()
        if self._p:
            _lib.tc_module_free(self._p)
            self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_p", None):
            self.close()

    def __repr__(self):
        return f"<tcomp.Module {self.filename}: {', '.join(self.defs)}>"


class Kernel:
    """A def compiled for input dtypes and shapes (Op.compile)."""

    def __init__(self, op, p):
        self.op = op
        self._p = p
        self._stream = 0  # the CUDA stream runs launch on (0: the legacy default)
        n = _lib.tc_kernel_num_outputs(p)
        self.outputs = []
        dt, nd, sh = _lib.DLDataType(), ctypes.c_int(), (ctypes.c_int64 * 8)()
        for i in range(n):
            _lib.tc_kernel_output_shape(p, i, ctypes.byref(dt), ctypes.byref(nd), sh)
            self.outputs.append((dt.code, dt.bits, tuple(sh[j] for j in range(nd.value))))

    def _handle(self):
        if not self._p:
            raise ClosedError(f"{self.op.name}: the kernel is closed")
        return self._p

    def emit(self, stage):
        """A compilation stage's text for these shapes (`tcomp emit`):
        "ir", "schedule", "ast", "c", "llvm", "asm", "cuda", "ptx", ..."""
        t = _lib.tc_kernel_emit(self._handle(), stage.encode())
        if not t:
            raise _fail(ArgumentError, f"cannot emit {stage}")
        return _lib.take_string(t)

    @property
    def options(self):
        """The options this kernel was compiled with (options-file text)."""
        return _lib.take_string(_lib.tc_kernel_options(self._handle()))

    @property
    def options_source(self):
        """Where they came from: user, cache, cache-near, cache-other-cpu, default."""
        return _lib.tc_kernel_options_source(self._handle()).decode()

    def output_shapes(self):
        """[(dtype name, shape)] of the outputs."""
        return [(dtype_name(c, b), s) for c, b, s in self.outputs]

    def follow_torch_stream(self, device):
        """Launch on torch's current stream of device (a CUDA kernel called
        on torch tensors), so that the kernel is ordered with torch's work."""
        s = sys.modules["torch"].cuda.current_stream(device).cuda_stream
        if s != self._stream:
            if _lib.tc_kernel_set_stream(self._handle(), s or None) < 0:
                raise _fail(ArgumentError, "cannot set the CUDA stream")
            self._stream = s

    def _close(self):
        if self._p:
            _lib.tc_kernel_free(self._p)
            self._p = None

    def __del__(self):
        self._close()


def _pointer_array(args):
    arr = (ctypes.POINTER(_lib.DLTensor) * max(len(args), 1))()
    for i, a in enumerate(args):
        arr[i] = ctypes.pointer(a.dl)
    return arr


class Op:
    """One def of a module, callable: op(*inputs, out=None) runs it on
    NumPy arrays, torch tensors or other DLPack producers and returns the
    output (a tuple when there are several).

    Inputs are passed without copying (strided ones are copied by the
    library, see tcomp.h); outputs are allocated by the inputs' framework
    (torch when any input is a torch tensor, on its device; NumPy
    otherwise), uninitialised where the def writes the whole output before
    reading it (op.overwritten; tc_module_output_overwritten) and
    zero-filled otherwise, or taken from out= (a tensor, or a tuple of one
    per output) and written in place.  Kernels are compiled on the first
    call for each combination of input dtypes, shapes and device, and kept.
    When any input is a torch tensor that requires grad (and grad mode is
    on), the call is differentiable: the backward runs the def's derived
    gradient (Module.grad)."""

    def __init__(self, module, name, options=None):
        self.module = module
        self.name = name
        self._kernels = {}
        self._plans = {}  # input signatures -> Plan (the fast path of run)
        self._lock = threading.Lock()
        self._autograd = {}  # wrt -> (forward op, backward op); see _torch
        nin, nout = ctypes.c_int(), ctypes.c_int()
        m = module._handle()
        if _lib.tc_module_def_arity(m, name.encode(), ctypes.byref(nin), ctypes.byref(nout)) < 0:
            raise _fail(ArgumentError)
        self.inputs = [_lib.tc_module_tensor_name(m, name.encode(), i).decode()
                       for i in range(nin.value)]
        self.outputs = [_lib.tc_module_tensor_name(m, name.encode(), nin.value + i).decode()
                        for i in range(nout.value)]
        # outputs the def writes whole before reading: allocated uninitialised
        self.overwritten = [_lib.tc_module_output_overwritten(m, name.encode(), i) == 1
                            for i in range(nout.value)]
        self.options = module.options if options is None else Options(options)
        self._closed = False

    def __reduce__(self):
        return (_op_of, (self.module, self.name, self.options))

    @property
    def signature(self):
        """The def's signature as text."""
        return _lib.take_string(_lib.tc_module_signature(self.module._handle(),
                                                         self.name.encode()))

    def __repr__(self):
        return f"<tcomp.Op {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})>"

    def _close(self):
        with self._lock:
            ks, self._kernels = list(self._kernels.values()), {}
            self._plans = {}
            self._closed = True
        for k in ks:
            k._close()
        derived, self._autograd = list(self._autograd.values()), {}
        for _, bwd in derived:
            bwd.module.close()  # the derived module (it holds the forward with saves too)

    def _args(self, inputs):
        if self._closed or not self.module._p:
            raise ClosedError(f"{self.name}: the module is closed")
        if len(inputs) != len(self.inputs):
            raise ArgumentError(f"{self.name}: takes {len(self.inputs)} input(s) "
                                f"({', '.join(self.inputs)}), got {len(inputs)}")
        args = [as_arg(x, f"{self.name}: input {n}") for x, n in zip(inputs, self.inputs)]
        dev = args[0].device if args else (_lib.KDLCPU, 0)
        for a, n in zip(args, self.inputs):
            if a.device != dev:
                raise ArgumentError(f"{self.name}: input {n} is on {_devname(a.device)}, "
                                    f"input {self.inputs[0]} on {_devname(dev)}: all inputs "
                                    "must be on one device")
        return args, dev

    def _options_for(self, dev):
        """The tc_options pointer to compile for device dev (None: the
        defaults and the kernel cache)."""
        want = _lib.KDLCUDA if dev[0] == _lib.KDLCUDA else _lib.KDLCPU
        if dev[0] not in (_lib.KDLCPU, _lib.KDLCUDA):
            raise ArgumentError(f"{self.name}: tensors on {_devname(dev)} are not supported "
                                "(cpu and cuda are)")
        o = self.options
        if o is None:
            if want == _lib.KDLCPU:
                return None, None
            o = Options(target="cuda")
        if o.device_type() != want:
            raise ArgumentError(f"{self.name}: the inputs are on {_devname(dev)} but the "
                                f"options' target is {o['target']}")
        return o, o._p

    def compile(self, *inputs):
        """The Kernel for these inputs' dtypes, shapes and device (compiled
        once, then kept)."""
        args, dev = self._args(inputs)
        return self._kernel(args, dev)

    def _kernel(self, args, dev, options=None):
        key = (tuple(a.key for a in args), dev)
        k = self._kernels.get(key)
        if k is not None and options is None:
            return k
        # o keeps the Options alive while tc_compile reads them
        o, op = (options, options._p) if options is not None else self._options_for(dev)
        p = _lib.tc_compile(self.module._handle(), self.name.encode(), _pointer_array(args),
                            len(args), op)
        if not p:
            raise _fail(ArgumentError, f"{self.name}: compile failed")
        _warn_library()
        k = Kernel(self, p)
        with self._lock:
            if self._closed:
                k._close()
                raise ClosedError(f"{self.name}: the module is closed")
            old = self._kernels.get(key)
            if old is not None and options is None:
                k._close()
                return old
            self._kernels[key] = k
            if old is not None:
                self._plans = {}  # they hold the old kernel
        return k

    def __call__(self, *inputs, out=None):
        sigs = tuple(map(signature, inputs))
        plan = self._plans.get(sigs)
        # a plan whose inputs require no grad (or run under no_grad) needs
        # no autograd check
        if (plan is None or (plan.grad and _grad_enabled())) and _wants_autograd(inputs):
            from . import _torch
            if out is not None:
                raise ArgumentError(f"{self.name}: out= is not supported when an input "
                                    "requires grad (autograd allocates the outputs)")
            return _torch.apply(self, inputs)
        return self._call(inputs, out, sigs, plan)

    def run(self, *inputs, out=None):
        """Run without autograd (what a call does when no input requires grad)."""
        sigs = tuple(map(signature, inputs))
        return self._call(inputs, out, sigs, self._plans.get(sigs))

    def _call(self, inputs, out, sigs, plan):
        """Run through plan (the fast path), or the general path where there
        is none or it cannot take these outputs."""
        res = plan.call(inputs, out) if plan is not None else None
        if type(res) is list:
            return res[0] if len(res) == 1 else tuple(res)
        return self._run(inputs, out, sigs, res)

    def _run(self, inputs, out, sigs, status):
        """The general path of a call, or the error of the fast path's
        status (-1: the run failed, -2: closed; None: no plan, or out= does
        not fit it)."""
        if status == -1:
            raise _fail(ArgumentError, f"{self.name}: run failed")
        if status == -2:
            raise ClosedError(f"{self.name}: the module is closed")
        args, dev = self._args(inputs)
        k = self._kernel(args, dev)
        fw = "torch" if any(a.framework == "torch" for a in args) else "numpy"
        like = next((a.obj for a in args if a.framework == "torch"), None)
        if out is None:
            results = [allocator(fw, c, b, s, dev, like, not ow)()
                       for (c, b, s), ow in zip(k.outputs, self.overwritten)]
        else:
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(results) != len(k.outputs):
                raise ArgumentError(f"{self.name}: out= has {len(results)} tensor(s), the def "
                                    f"has {len(k.outputs)} output(s) ({', '.join(self.outputs)})")
        outs = []
        for r, n, (c, b, s) in zip(results, self.outputs, k.outputs):
            a = as_arg(r, f"{self.name}: output {n}", writable=True)
            if a.key != (c, b, s):
                raise ArgumentError(f"{self.name}: output {n} is {dtype_name(*a.key[:2])}"
                                    f"{list(a.key[2])}, the kernel writes "
                                    f"{dtype_name(c, b)}{list(s)}")
            if a.device != dev:
                raise ArgumentError(f"{self.name}: output {n} is on {_devname(a.device)}, "
                                    f"the inputs on {_devname(dev)}")
            outs.append(a)
        if dev[0] == _lib.KDLCUDA and like is not None:
            k.follow_torch_stream(like.device)
        if _lib.tc_kernel_run(k._handle(), _pointer_array(args), len(args), _pointer_array(outs),
                              len(outs)) < 0:
            raise _fail(ArgumentError, f"{self.name}: run failed")
        if None not in sigs and sigs not in self._plans:
            self._plans[sigs] = _make_plan(k, args, sigs, dev, fw, like, self.overwritten)
        return results[0] if len(results) == 1 else tuple(results)

    def grad(self, wrt=None, saves=False):
        """The backward def as .tc text (Module.grad)."""
        return self.module.grad(self.name, wrt, saves)

    def autotune(self, *inputs, **settings):
        """Tune this def for these inputs (see tcomp.autotune)."""
        return autotune(self, *inputs, **settings)


def _op_of(module, name, options):
    """Op name of module with options (unpickling an Op)."""
    op = module[name]
    return op if options is module.options else Op(module, name, options)


def _make_plan(k, args, sigs, dev, fw, like, overwritten):
    """The fast path for calls with the signature of args (see _plan)."""
    allocators = [allocator(fw, c, b, s, dev, like, not ow)
                  for (c, b, s), ow in zip(k.outputs, overwritten)]
    out_sigs = [output_signature(make) for make in allocators]
    before = None
    if dev[0] == _lib.KDLCUDA and like is not None:
        before = functools.partial(k.follow_torch_stream, like.device)
    return Plan(k, args, sigs, dev, allocators, out_sigs, before)


def _devname(dev):
    return f"{DEVICE_NAMES.get(dev[0], f'device type {dev[0]}')}:{dev[1]}"


def _grad_enabled():
    return sys.modules["torch"].is_grad_enabled()


def _wants_autograd(inputs):
    t = sys.modules.get("torch")
    if t is None or not t.is_grad_enabled():
        return False
    return any(is_torch(x) and x.requires_grad for x in inputs)


def define(source, name=None, options=None, filename=None):
    """Parse .tc text.  With name: the Op of that def, a callable
    (mm = tcomp.define(lang, name="matmul"); C = mm(A, B)).  Without: the
    Module, whose defs are attributes.  options (text, dict or Options)
    are used for every compile instead of the defaults and the kernel
    cache."""
    m = Module(source, filename=filename, options=options)
    if name is None:
        return m
    if name not in m.defs:
        raise ArgumentError(f"{m.filename}: no def named {name!r} (defs: {', '.join(m.defs)})")
    return m[name]


def load(path, name=None, options=None):
    """define() of a .tc file's text (messages name the file)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return define(text, name=name, options=options, filename=os.fspath(path))


def grad(source, name, wrt=None, saves=False):
    """The backward def of def name in .tc text source, as .tc text."""
    m = Module(source)
    try:
        return m.grad(name, wrt, saves)
    finally:
        m.close()


class TuneResult:
    """What tcomp.autotune found: options (text), default_s and best_s
    (median seconds of the base options and of the best), measured, failed,
    generations, elapsed_s, defaults_won, stopped."""

    def __init__(self, options, report):
        self.options = options
        for f, _ in _lib.TuneReport._fields_:
            setattr(self, f, getattr(report, f))

    @property
    def speedup(self):
        if not (self.best_s > 0) or math.isinf(self.default_s):
            return float("nan")
        return self.default_s / self.best_s

    def __repr__(self):
        return (f"<tcomp.TuneResult best {self.best_s * 1e3:.4g} ms, defaults "
                f"{self.default_s * 1e3:.4g} ms, {self.measured} measured>")


def _progress_printer(name, stream):
    tty = hasattr(stream, "isatty") and stream.isatty()
    state = {"gen": -1}

    def show(p):
        best = "-" if math.isinf(p.best_s) else f"{p.best_s * 1e3:.4g} ms"
        if p.final_round:
            line = (f"{name}: final stage round {p.final_round}/{p.final_rounds}, "
                    f"{p.done}/{p.planned}, best {best}")
        else:
            line = (f"{name}: generation {p.generation + 1}/{p.generations}, "
                    f"{p.done}/{p.planned} candidates ({p.failed} failed), best {best}, "
                    f"eta {p.eta_s:.0f} s")
        if tty:
            stream.write("\r\x1b[K" + line)
        elif p.generation != state["gen"] or p.done == p.planned:
            stream.write(line + "\n")
        state["gen"] = p.generation
        stream.flush()
    return show, tty


def autotune(op, *inputs, generations=None, population=None, seed=None, threads=None,
             cache=None, progress=True, options=None, **settings):
    """Search op's mapping options for these inputs (arrays as op takes them;
    their data is the tuning input) with tcomp's genetic search, store every
    candidate in the kernel cache (cache: a path, None for the default, False
    for none), and use the best for these shapes in op from now on.
    progress: True (a status line on stderr), False, or a callable given a
    dict per candidate.  options: the base options (the first candidate;
    those it sets are fixed).  Other keywords are fields of
    tc_tune_settings (final_candidates=0, timeout_s=..., ...).  Returns a
    TuneResult.  Ctrl-C stops the search and keeps the best so far."""
    if not isinstance(op, Op):
        raise ArgumentError("autotune: expected an Op (tcomp.define(source, name=...))")
    args, dev = op._args(inputs)
    base = Options(options) if options is not None else op.options
    if base is None and dev[0] == _lib.KDLCUDA:
        base = Options(target="cuda")
    s = _lib.TuneSettings()
    _lib.tc_tune_settings_init(ctypes.byref(s))
    for k, v in (("generations", generations), ("population", population), ("seed", seed),
                 ("threads", threads)):
        if v is not None:
            setattr(s, k, v)
    names = {f for f, _ in _lib.TuneSettings._fields_} - {"seeds", "n_seeds", "cache_path",
                                                          "use_cache", "record", "progress",
                                                          "user", "stop"}
    for k, v in settings.items():
        if k not in names:
            raise ArgumentError(f"autotune: unknown setting {k!r} (settings: "
                                f"{', '.join(sorted(names))})")
        setattr(s, k, v)
    if cache is False:
        s.use_cache = 0
    elif cache is not None:
        s.cache_path = os.fsencode(cache)
    stopped = {"flag": False}
    if progress is True:
        show, tty = _progress_printer(op.name, sys.stderr)
    elif callable(progress):
        tty = False

        def show(p):
            progress({"generation": p.generation, "generations": p.generations,
                      "done": p.done, "planned": p.planned, "failed": p.failed,
                      "best_s": p.best_s, "elapsed_s": p.elapsed_s, "eta_s": p.eta_s,
                      "final_round": p.final_round})
    else:
        show, tty = None, False

    def on_progress(user, p):
        try:
            if show is not None:
                show(p.contents)
        except KeyboardInterrupt:
            stopped["flag"] = True
        except Exception as e:  # a user callback's bug must not unwind through C
            stopped["flag"] = True
            stopped["error"] = e
        return 1 if stopped["flag"] else 0

    cb = _lib.PROGRESS_FN(on_progress)
    s.progress = cb
    best = ctypes.c_void_p()
    report = _lib.TuneReport()
    rc = _lib.tc_autotune(op.module._handle(), op.name.encode(), _pointer_array(args), len(args),
                          base._p if base is not None else None, ctypes.byref(s),
                          ctypes.byref(best), ctypes.byref(report))
    if tty:
        sys.stderr.write("\n")
    if "error" in stopped:
        raise stopped["error"]
    if rc < 0:
        raise _fail(ArgumentError, f"{op.name}: autotune failed")
    text = None
    if best.value:
        chosen = Options.__new__(Options)
        chosen._p = best.value
        text = str(chosen)
        op._kernel(args, dev, options=chosen)  # served by op from now on
    return TuneResult(text, report)

