"""tcomp's exceptions.  Every error the library reports becomes one of
these, carrying the library's message (for .tc text: file:line:col, the
line and a caret)."""


class Error(Exception):
    """Base class of tcomp's errors."""


class CompileError(Error, ValueError):
    """Bad .tc text or a def that cannot be compiled: the located diagnostics."""


class ArgumentError(Error, ValueError):
    """Bad arguments: the number, type, shape or device of tensors, options,
    sizes a def's conditions reject."""


class ClosedError(Error):
    """A module or op used after close()."""


class InternalError(Error):
    """A bug in tcomp (a broken invariant); please report it with the message."""


class OutOfMemory(Error, MemoryError):
    """An allocation in the library failed."""


class TcompWarning(UserWarning):
    """Warnings of the library: the parser's, and the kernel cache's notes."""
