"""The C library (libtcomp.so) through ctypes: finding it, and the
prototypes of the functions of include/tcomp.h that the package calls.

ctypes.CDLL releases the GIL around every foreign call, so a kernel running
in tc_kernel_run leaves other Python threads free.  Nothing else in the
package touches ctypes' function objects directly.
"""

import ctypes
import ctypes.util
import os

# ---- DLPack (dlpack/dlpack.h, version 0.6 and later: the same layout) ----


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

KDLCPU, KDLCUDA, KDLCUDAHOST = 1, 2, 3
KDLINT, KDLUINT, KDLFLOAT, KDLBFLOAT, KDLBOOL = 0, 1, 2, 4, 6

# ---- the autotuner's structs (include/tcomp.h "autotuner") ----


class TuneCandidate(ctypes.Structure):
    _fields_ = [
        ("options", ctypes.c_char_p),
        ("status", ctypes.c_int),
        ("median_s", ctypes.c_double),
        ("min_s", ctypes.c_double),
        ("runs", ctypes.c_int),
        ("compile_s", ctypes.c_double),
        ("message", ctypes.c_char_p),
        ("generation", ctypes.c_int),
        ("index", ctypes.c_int),
        ("final", ctypes.c_int),
        ("chosen", ctypes.c_int),
    ]


class TuneProgress(ctypes.Structure):
    _fields_ = [
        ("generation", ctypes.c_int),
        ("generations", ctypes.c_int),
        ("done", ctypes.c_int),
        ("planned", ctypes.c_int),
        ("failed", ctypes.c_int),
        ("best_s", ctypes.c_double),
        ("gen_median_s", ctypes.c_double),
        ("elapsed_s", ctypes.c_double),
        ("eta_s", ctypes.c_double),
        ("last", ctypes.POINTER(TuneCandidate)),
        ("final_round", ctypes.c_int),
        ("final_rounds", ctypes.c_int),
    ]


RECORD_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(TuneCandidate))
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(TuneProgress))


class TuneSettings(ctypes.Structure):
    _fields_ = [
        ("generations", ctypes.c_int),
        ("population", ctypes.c_int),
        ("elites", ctypes.c_int),
        ("mutation_rate", ctypes.c_double),
        ("tournament", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("threads", ctypes.c_int),
        ("timeout_s", ctypes.c_double),
        ("compile_timeout_s", ctypes.c_double),
        ("warmup", ctypes.c_int),
        ("runs", ctypes.c_int),
        ("min_time_s", ctypes.c_double),
        ("cutoff", ctypes.c_double),
        ("final_candidates", ctypes.c_int),
        ("final_rounds", ctypes.c_int),
        ("final_time_s", ctypes.c_double),
        ("final_warmup_s", ctypes.c_double),
        ("final_margin", ctypes.c_double),
        ("seeds", ctypes.POINTER(ctypes.c_char_p)),
        ("n_seeds", ctypes.c_int),
        ("cache_path", ctypes.c_char_p),
        ("use_cache", ctypes.c_int),
        ("record", RECORD_FN),
        ("progress", PROGRESS_FN),
        ("user", ctypes.c_void_p),
        ("stop", ctypes.POINTER(ctypes.c_int)),  # volatile sig_atomic_t * (an int)
        ("transport", ctypes.c_void_p),  # tc_tune_transport * (distributed tuning: C only)
    ]


class TuneReport(ctypes.Structure):
    _fields_ = [
        ("default_s", ctypes.c_double),
        ("best_s", ctypes.c_double),
        ("measured", ctypes.c_int),
        ("failed", ctypes.c_int),
        ("cut", ctypes.c_int),
        ("generations", ctypes.c_int),
        ("stopped", ctypes.c_int),
        ("elapsed_s", ctypes.c_double),
        ("search_default_s", ctypes.c_double),
        ("search_best_s", ctypes.c_double),
        ("final_measured", ctypes.c_int),
        ("final_rounds", ctypes.c_int),
        ("final_stopped", ctypes.c_int),
        ("defaults_won", ctypes.c_int),
    ]


TC_GRAD_SAVES = 1
TC_ERROR_NONE, TC_ERROR_USER, TC_ERROR_NOMEM, TC_ERROR_INTERNAL = 0, 1, 2, 3

# ---- finding and loading the library ----


def _candidates():
    """Where libtcomp.so may be, in the order tried."""
    env = os.environ.get("TCOMP_LIBRARY")
    if env:
        return [env]  # the user said where: nothing else is tried
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libtcomp.so")]  # bundled by pip install
    # the source tree's build (tools/python/tcomp -> the checkout's build/)
    found.append(os.path.normpath(os.path.join(here, "..", "..", "..", "build", "libtcomp.so")))
    name = ctypes.util.find_library("tcomp")  # installed (make install, ldconfig)
    if name:
        found.append(name)
    found.append("libtcomp.so.0")
    return found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (not found)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("tcomp: cannot load libtcomp.so; tried:\n  " + "\n  ".join(tried)
                      + "\nbuild it with `make build` in the checkout, install it, or set "
                      "TCOMP_LIBRARY to its path")


lib, path = _load()

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_TENSORS = ctypes.POINTER(ctypes.POINTER(DLTensor))


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


# Strings the library allocates come back as void pointers, read with
# string_at and freed with tc_string_free; borrowed strings are c_char_p.
tc_string_free = _proto("tc_string_free", None, _P)
tc_context_new = _proto("tc_context_new", _P)
tc_context_free = _proto("tc_context_free", None, _P)
tc_context_error = _proto("tc_context_error", _S, _P)
tc_context_error_kind = _proto("tc_context_error_kind", _I, _P)
tc_context_warnings = _proto("tc_context_warnings", _S, _P)
tc_context_set_threads = _proto("tc_context_set_threads", _I, _P, _I)
tc_context_threads = _proto("tc_context_threads", _I, _P)
tc_context_set_cache = _proto("tc_context_set_cache", _I, _P, _S)
tc_module_parse = _proto("tc_module_parse", _P, _P, _S, _S)
tc_module_free = _proto("tc_module_free", None, _P)
tc_module_num_defs = _proto("tc_module_num_defs", _I, _P)
tc_module_def_name = _proto("tc_module_def_name", _S, _P, _I)
tc_module_def_arity = _proto("tc_module_def_arity", _I, _P, _S, ctypes.POINTER(_I),
                             ctypes.POINTER(_I))
tc_module_input_type = _proto("tc_module_input_type", _I, _P, _S, _I, ctypes.POINTER(DLDataType),
                              ctypes.POINTER(_I))
tc_module_tensor_name = _proto("tc_module_tensor_name", _S, _P, _S, _I)
tc_module_output_overwritten = _proto("tc_module_output_overwritten", _I, _P, _S, _I)
tc_module_signature = _proto("tc_module_signature", _P, _P, _S)
tc_module_emit = _proto("tc_module_emit", _P, _P, _S, _S)
tc_module_grad = _proto("tc_module_grad", _P, _P, _S, _S, _I)
tc_options_new = _proto("tc_options_new", _P)
tc_options_free = _proto("tc_options_free", None, _P)
tc_options_set = _proto("tc_options_set", _I, _P, _S, _S, _P)
tc_options_parse = _proto("tc_options_parse", _I, _P, _S, _P)
tc_options_get = _proto("tc_options_get", _S, _P, _S)
tc_options_device = _proto("tc_options_device", _I, _P)
tc_options_print = _proto("tc_options_print", _P, _P)
tc_options_describe = _proto("tc_options_describe", _P)
tc_compile = _proto("tc_compile", _P, _P, _S, _TENSORS, _I, _P)
tc_kernel_num_outputs = _proto("tc_kernel_num_outputs", _I, _P)
tc_kernel_output_shape = _proto("tc_kernel_output_shape", _I, _P, _I, ctypes.POINTER(DLDataType),
                                ctypes.POINTER(_I), ctypes.POINTER(ctypes.c_int64))
tc_kernel_run = _proto("tc_kernel_run", _I, _P, _TENSORS, _I, _TENSORS, _I)
# the same, the arrays given by address (the fast path of a call: _plan)
tc_kernel_run_at = ctypes.CDLL(path).tc_kernel_run
tc_kernel_run_at.restype = _I
tc_kernel_run_at.argtypes = [_P, _P, _I, _P, _I]
tc_kernel_set_stream = _proto("tc_kernel_set_stream", _I, _P, _P)
tc_kernel_emit = _proto("tc_kernel_emit", _P, _P, _S)
tc_kernel_options = _proto("tc_kernel_options", _P, _P)
tc_kernel_options_source = _proto("tc_kernel_options_source", _S, _P)
tc_kernel_free = _proto("tc_kernel_free", None, _P)
tc_tune_settings_init = _proto("tc_tune_settings_init", None, ctypes.POINTER(TuneSettings))
tc_autotune = _proto("tc_autotune", _I, _P, _S, _TENSORS, _I, _P, ctypes.POINTER(TuneSettings),
                     ctypes.POINTER(_P), ctypes.POINTER(TuneReport))


def take_string(p):
    """The text of a library-allocated string p (freed), or None for NULL."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode()
    finally:
        tc_string_free(p)

