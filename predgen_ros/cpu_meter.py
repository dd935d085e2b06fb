"""CPU seconds of stages that share a thread: asr_node's audio loop runs the voice detector,
the echo canceller and Smart Turn one after the other, so /proc's per-thread figures
(eval/graph/cpu_budget.py) cannot split them.  Each stage adds its thread's CPU time
(`time.thread_time`) while it runs; nodes publish the sums on /diagnostics as
`cpu_<stage>_s`.  Work a stage hands to threads of its own (a native pool) is not counted.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class CpuMeter:
    def __init__(self):
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.thread_time()
        try:
            yield
        finally:
            self.seconds[name] += time.thread_time() - start

    def figures(self) -> dict[str, float]:
        """The sums as /diagnostics key-values: `cpu_<stage>_s`."""
        return {f"cpu_{name.replace(' ', '_')}_s": round(s, 3) for name, s in sorted(self.seconds.items())}


METER = CpuMeter()  # one per process: the stages add to it, the node's /diagnostics reads it
