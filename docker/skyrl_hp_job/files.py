"""Writes on the shared file system that a reader on another node sees whole: synced, then renamed into place."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    write_synced(staging, text)
    os.replace(staging, path)


def staging_path(target: Path, purpose: str) -> Path:
    return target.with_name(f".{target.name}.{purpose}-{socket.gethostname()}-{os.getpid()}")
