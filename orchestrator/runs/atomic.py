"""The one atomic write (a temporary sibling, flushed, renamed over the target: a reader sees
the old file or the new one, a crash leaves at most a stray ``.<name>.<pid>.<thread>.tmp``) and
the one file lock (``flock``, freed when its holder dies). Standard library only: the job
wrapper (``python -I -S``) writes its exit file through here."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], mode: int | None = None,
              durable: bool = True) -> Iterator[Path]:
    """A fresh temporary sibling of ``path`` to fill by name (``torch.save``, parquet), flushed
    to disk and renamed over ``path`` when the block ends without error, removed when it raises.
    ``mode``: its permission bits, set before anything is written (default: the umask's of
    0666). ``durable=False`` skips the flush: readers still see all or nothing, but after a
    power cut the file may be empty; only for mirrors rewritten from a durable source."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o666 if mode is None else mode))
        if mode is not None:
            tmp.chmod(mode)  # a stray temp file of this name keeps its mode otherwise
        yield tmp
        if durable:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike[str], content: str | bytes,
                 mode: int | None = None, durable: bool = True) -> None:
    """Write ``content`` (text is UTF-8) to ``path`` atomically (see :func:`replacing`)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with replacing(path, mode, durable) as tmp:
        tmp.write_bytes(data)


def lock_path(db: Path) -> Path:
    """The lock file that serialises creating and migrating the store ``db``."""
    return db.with_name(db.name + ".lock")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[int]:
    """Hold an exclusive ``flock`` on ``path`` (freed if the holder dies); yields its fd."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the lock
