"""Calibrated, interleaved timing: milliseconds per call that a noisy shared machine can still compare.

A single call of a fast model (tens of microseconds) is below what one `perf_counter`
reading resolves well, so calls run in batches of `number`, chosen so that a batch lasts
at least `batch_seconds`.  Every round times one batch of each system in turn, starting
each round with the next system, so that the machine's drift (another process, a clock
change, a warm or cold cache) falls on all of them alike; the result is the median over
rounds of the time per call.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence

Call = Callable[[], object]


def batch(call: Call, number: int) -> float:
    """Seconds per call over `number` calls in a row, garbage collection paused (as `timeit` does).

    Arrays are freed by reference counting as usual; only the cycle collector waits, so
    that a collection an earlier batch made due does not land in this one.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            call()
        return (time.perf_counter() - start) / number
    finally:
        if enabled:
            gc.enable()


def calibrate(call: Call, batch_seconds: float) -> int:
    """How many calls in a row last at least `batch_seconds` (at least one).

    >>> calibrate(lambda: None, 0.001) > 100
    True
    """
    number = 1
    while True:
        seconds = batch(call, number) * number
        if seconds >= batch_seconds:
            return number
        # aim 20 % past the target, growing at most 100-fold a step (the first batches are the noisiest)
        number = max(number + 1, min(number * 100, math.ceil(number * 1.2 * batch_seconds / max(seconds, 1e-9))))


def interleaved(calls: Sequence[Call], numbers: Sequence[int], rounds: int, on_round=None) -> list[list[float]]:
    """Seconds per call of each of `calls`, one list of `rounds` samples each.

    Round r starts with call r (mod their count) and goes round once, so no system is
    always the one that runs just after another has filled the caches.

    >>> samples = interleaved([lambda: None, lambda: None], [10, 10], rounds=3)
    >>> [len(s) for s in samples]
    [3, 3]
    """
    samples: list[list[float]] = [[] for _ in calls]
    for r in range(rounds):
        if on_round is not None:
            on_round(r)
        # once a round, not once a batch: with JAX loaded a full collection takes ~0.1 s
        gc.collect()
        for k in range(len(calls)):
            i = (r + k) % len(calls)
            samples[i].append(batch(calls[i], numbers[i]))
    return samples


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e3
