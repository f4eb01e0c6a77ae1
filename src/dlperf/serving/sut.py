"""The system under test: LoadGen's queries, batched into `predict(n)` calls on a worker thread.

LoadGen calls `issue_queries` from its own thread and must not be blocked there, so the SUT only queues the
samples; one worker thread takes what is waiting, up to `max_batch` samples per `predict` call (Server coalesces
the single-sample queries that queued up while the step was busy; MultiStream and Offline queries larger than
`max_batch` are split into chunks), and completes each finished sample with `QuerySamplesComplete`.

The inputs are synthetic and already in the step (the step's first n samples): which of the `sample_pool` indices
LoadGen picked does not change what is computed, so the QSL's load and unload have nothing to do.

A failing `predict` never hangs LoadGen, which has no abort: the error is kept, the samples of that call are
completed, and so is every later one at once, so the run ends as soon as LoadGen's plan allows (Offline,
SingleStream, MultiStream: quickly; Server issues on its schedule, so after its min duration).
`run.run_loadgen` re-raises the error once LoadGen has returned.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from dlperf.serving.records import SutStats

#: The queue item that stops the worker thread.
_STOP = object()


class ServingSUT:
    """Queue + one worker thread around `predict(n)`, with counts of its batches and their predict times."""

    def __init__(self, predict: Callable[[int], object], max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.predict = predict
        self.max_batch = max_batch
        self.error: BaseException | None = None
        self.batch_sizes: Counter[int] = Counter()
        self.predict_s: list[float] = []
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- LoadGen's callbacks (its threads) --------------------------------------------------------------------
    def issue_queries(self, query_samples: Any) -> None:
        """Queue the samples' ids (LoadGen's thread: nothing slow here)."""
        ids = [s.id for s in query_samples]
        with self._lock:
            failed = self.error is not None
        if failed:
            self._complete(ids)  # after a predict error: at once, so the run ends
        else:
            self._queue.put(ids)

    def flush_queries(self) -> None:
        """LoadGen issues no more queries: nothing is held here (every sample is queued or completed)."""

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="dlperf-sut", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the worker thread (after LoadGen returned: nothing is outstanding then)."""
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stats(self) -> SutStats:
        """metrics["sut"]: batches, how many of each size, the median predict time (s) of a batch."""
        median = statistics.median(self.predict_s) if self.predict_s else None
        return {"max_batch": self.max_batch, "batches": sum(self.batch_sizes.values()),
                "batch_size_counts": {str(k): v for k, v in sorted(self.batch_sizes.items())},
                "predict_s_median": median}

    # -- the worker thread ----------------------------------------------------------------------------------
    def _work(self) -> None:
        pending: deque[int] = deque()
        stop = False
        while not (stop and not pending):
            if not pending:
                item = self._queue.get()  # wait for work
                if item is _STOP:
                    return
                pending.extend(item)
            while True:  # take whatever else is waiting: Server's queries that arrived meanwhile
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                pending.extend(item)
            batch = [pending.popleft() for _ in range(min(self.max_batch, len(pending)))]
            self._run(batch)

    def _run(self, ids: list[int]) -> None:
        if self.error is None:
            try:
                t0 = time.perf_counter()
                self.predict(len(ids))
                self.predict_s.append(time.perf_counter() - t0)
                self.batch_sizes[len(ids)] += 1
            except BaseException as exc:  # kept and re-raised after LoadGen returns; LoadGen must not hang
                with self._lock:
                    self.error = exc
        self._complete(ids)

    @staticmethod
    def _complete(ids: list[int]) -> None:
        import mlperf_loadgen as lg

        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])
