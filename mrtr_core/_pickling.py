"""Errors that pickle as they are, whatever their constructors take.

An exception pickles by default as ``type(error)(*error.args)`` plus its attributes, and
``args`` holds the message an error's ``__init__`` built, not the arguments it took: an error
whose constructor takes a seed, a key or a keyword-only limit cannot be rebuilt that way, and
one that composes its message from its argument composes it twice. Such errors cross process
boundaries (a simulation sweep's workers, a caller's process pool) and ``copy.copy``, so they
are pickled here as they are: the same class, ``args`` and attributes, without running
``__init__`` again.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["PicklableError"]

E = TypeVar("E", bound=BaseException)


class PicklableError(BaseException):
    """A base that makes an error (and every subclass) pickle and copy as it is.

    The copy has the same class, ``args``, ``str()`` and attributes. Its ``__cause__`` comes
    along when it is one of the error's own attributes (``TransportError.cause``, ...); any
    other cause, the context and the traceback stay behind, as they do for any pickled
    exception (a traceback does not pickle, and a chained exception of the caller's may not).

    It comes first among an error's bases, so that its ``__reduce__`` is found before the one
    ``OSError`` (``TimeoutError``, ``ConnectionError``) has of its own.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        fields = self._pickled_fields()
        cause = self.__cause__
        if not any(value is cause for value in fields.values()):
            cause = None
        return _rebuilt, (type(self), self.args, fields, cause)

    def _pickled_fields(self) -> dict[str, Any]:
        """The attributes a copy gets: all of them, unless a subclass leaves some behind."""
        return dict(vars(self))


def _rebuilt(
    cls: type[E], args: tuple[Any, ...], fields: dict[str, Any], cause: BaseException | None
) -> E:
    """An error of ``cls`` as it was pickled, its ``__init__`` not run again."""
    error = cls.__new__(cls, *args)
    error.args = args
    vars(error).update(fields)
    error.__cause__ = cause
    return error
