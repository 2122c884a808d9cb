"""A partition's shards read side by side: one thread per shard feeding one bounded queue, the task taking whatever
is ready (a read at the quota mostly waits: docs/source.md, "How many shards a task reads").

Who calls it: ``KinesisStreamReader.read`` and ``KinesisBatchReader.read`` on executors, with one ``make`` per shard
(it builds the shard's iterator on the shard's thread, so the store lookups and first calls overlap too). Each
shard's items keep their order and memory is bounded; the first error of any shard is raised and stops the others;
when the caller stops taking, every thread stops at its next item and closes its shard's iterator, so nothing that
runs at an iterator's end (the stream reader's recording) happens for an unfinished shard.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
HANDOVER_POLL_S = 0.05  # how often a thread waiting to hand over an item checks whether the caller stopped
JOIN_S = 5.0  # how long a closed reader waits for its threads in all (one in a call finishes it, then stops)


class _Done:
    """One shard's iterator ended."""


class _Failed:
    """One shard's iterator raised ``error``."""

    def __init__(self, error: BaseException):
        self.error = error


_DONE = _Done()


class _Lane(Generic[T]):
    """One shard's thread: drives its iterator and hands each item to the shared queue."""

    def __init__(self, make: Callable[[], Iterator[T]], out: queue.Queue, stop: threading.Event, name: str):
        self.make, self.out, self.stop = make, out, stop
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            items = self.make()
            try:
                for item in items:
                    if not self._hand_over(item):
                        return  # the caller stopped: closing the iterator skips what follows its last item
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
            self._hand_over(_DONE)
        except BaseException as error:  # handed to the caller, who raises it
            self._hand_over(_Failed(error))

    def _hand_over(self, item: object) -> bool:
        """Put ``item`` in the queue, waiting while it is full; False when the caller stopped meanwhile."""
        while not self.stop.is_set():
            try:
                self.out.put(item, timeout=HANDOVER_POLL_S)
                return True
            except queue.Full:
                continue
        return False


def side_by_side(makers: Sequence[Callable[[], Iterator[T]]], name: str = "shard") -> Iterator[T]:
    """The items of every ``makers()`` iterator, each read on a thread of its own (see the module doc)."""
    if len(makers) == 1:
        yield from makers[0]()
        return
    out: queue.Queue = queue.Queue(maxsize=max(2, len(makers)))
    stop = threading.Event()
    lanes = [_Lane(make, out, stop, f"{name} {i}") for i, make in enumerate(makers)]
    for lane in lanes:
        lane.thread.start()
    try:
        running = len(lanes)
        while running:
            item = out.get()
            if item is _DONE:
                running -= 1
            elif isinstance(item, _Failed):
                raise item.error
            else:
                yield item
    finally:
        stop.set()
        _drain(out)
        deadline = time.monotonic() + JOIN_S
        for lane in lanes:
            lane.thread.join(max(0.0, deadline - time.monotonic()))


def _drain(out: queue.Queue) -> None:
    """Drop what waits in the queue: its items are no one's now."""
    try:
        while True:
            out.get_nowait()
    except queue.Empty:
        return
