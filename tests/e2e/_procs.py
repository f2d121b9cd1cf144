"""Process-tree helpers for the teardown tests (Linux /proc; no psutil dependency)."""

from __future__ import annotations

from pathlib import Path


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, starttime, state) of a live process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rindex(")") + 2 :].split()
    return int(rest[1]), int(rest[19]), rest[0]


def descendants(root: int) -> dict[int, int]:
    """Every process below `root`, as pid -> starttime (to be immune to pid reuse)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st is None:
            continue
        stats[int(entry.name)] = st
        children.setdefault(st[0], []).append(int(entry.name))
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out[child] = stats[child][1]
            todo.append(child)
    return out


def still_running(procs: dict[int, int]) -> list[int]:
    """The pids of `procs` that still exist as the same process and are not zombies."""
    alive = []
    for pid, start in procs.items():
        st = _stat(pid)
        if st is not None and st[1] == start and st[2] != "Z":
            alive.append(pid)
    return alive


def tree_of(pids: list[int]) -> dict[int, int]:
    """These processes and all their descendants, as pid -> starttime."""
    out: dict[int, int] = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            out[pid] = st[1]
        out.update(descendants(pid))
    return out
