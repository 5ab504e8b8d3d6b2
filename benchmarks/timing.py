"""Shared timing helper of the benchmark scripts (run them as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import statistics
import time


def median_seconds(fn, repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
