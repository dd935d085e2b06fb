"""OS names for the threads that do each stage's work, so that a CPU budget can tell from
/proc whose work a thread's CPU time was (eval/graph/cpu_budget.py).

Python's thread names stay inside Python; Linux shows each thread's `comm` (at most 15
characters).  Native thread pools (CTranslate2's, ONNX Runtime's) start their threads
when a model loads, and a new thread inherits the name of the thread that starts it:
`named_threads(name)` around the load names them too.  Elsewhere than on Linux the names
are left as they are.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PR_SET_NAME = 15
_COMM = Path("/proc/thread-self/comm")
try:
    _prctl = ctypes.CDLL(None).prctl
except (AttributeError, OSError):  # not Linux
    _prctl = None


def name_thread(name: str | None = None) -> None:
    """Name the calling thread (what /proc/<pid>/task/<tid>/comm shows); None: its Python name."""
    if _prctl is not None:
        _prctl(_PR_SET_NAME, (name or threading.current_thread().name).encode()[:15], 0, 0, 0)


def thread_name() -> str:
    """The calling thread's OS name ("" where there is none to read)."""
    try:
        return _COMM.read_text().strip()
    except OSError:
        return ""


@contextmanager
def named_threads(name: str) -> Iterator[None]:
    """The calling thread, and the threads a library starts from it in this block, are `name`."""
    before = thread_name()
    name_thread(name)
    try:
        yield
    finally:
        if before:
            name_thread(before)
