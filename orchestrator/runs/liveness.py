"""Is a recorded process still the one we started? Asked through psutil, by pid and start time
(a pid may have been handed to someone else since), the latter in clock ticks since boot (a
job's ``pid.json`` ``start_ticks``), which do not move when the system clock is set."""

from __future__ import annotations

import os


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``None``: no such process to be seen)."""
    import psutil

    try:
        since_boot = psutil.Process(pid).create_time() - psutil.boot_time()
    except (psutil.Error, OSError, ValueError):
        return None
    return round(since_boot * os.sysconf("SC_CLK_TCK"))


def is_running(pid: int, ticks: int | None) -> bool:
    """Whether ``pid`` runs (a zombie does not) and, given ``ticks``, is the one started then."""
    import psutil

    try:
        if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        pass  # someone's process has the pid: whether it is ours, its start time tells
    return ticks is None or start_ticks(pid) == ticks


def is_stranger(pid: int, ticks: int | None) -> bool:
    """Whether a process other than the one that started at ``ticks`` has ``pid`` now."""
    now = start_ticks(pid)
    return now is not None and now != ticks
