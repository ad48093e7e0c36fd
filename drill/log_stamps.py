"""A stand-in for the container runtime's log stamping: the submitter's output as `kubectl logs --timestamps` shows it.

On a cluster the kubelet's container runtime stamps each line of a container's output with the time it read it (the
CRI log format, https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md), and
`kubectl logs --timestamps` prints that time, RFC 3339 with nanoseconds in UTC, a space, then the line. The drill's
submitter is a process, not a container: each line it writes is read here as it comes, written as it is to the log
the scenarios read, and with the time it was read to a second log, the one `skyrl-hp train timeline --log` reads.
Unproven here: the runtime's own buffering (a line is stamped when the runtime reads it, not when it was printed).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO


def stamp(at: datetime) -> str:
    """`kubectl logs --timestamps`' prefix (Go's time.RFC3339Nano in UTC); Python's clock holds microseconds."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class StampedLog:
    """Copies `source` line by line into `plain` and, prefixed with the time each line was read, into `stamped`."""

    source: IO[bytes]
    plain: Path
    stamped: Path

    def __post_init__(self) -> None:
        # Opened here, not in the thread: a scenario reads `plain` as soon as the submission is launched, before the
        # thread may have run at all on a loaded machine.
        plain, stamped = self.plain.open("wb"), self.stamped.open("wb")
        self._thread = threading.Thread(
            target=self._copy, args=(plain, stamped), name=f"stamp {self.plain.name}", daemon=True
        )
        self._thread.start()

    def _copy(self, plain: IO[bytes], stamped: IO[bytes]) -> None:
        with plain, stamped:
            for line in iter(self.source.readline, b""):
                at = datetime.now(UTC)
                plain.write(line)
                plain.flush()  # the scenarios read the log while the job runs
                stamped.write(f"{stamp(at)} ".encode() + line)
                stamped.flush()
        self.source.close()

    def join(self, timeout: float | None = None) -> None:
        """Until the source closed (the submitter exited and its output is read to the end)."""
        self._thread.join(timeout)
