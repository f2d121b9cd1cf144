"""Narrating the functions: what each target did, read from its structured log.

The targets log one JSON line per handled trigger (`trigger handled`, with the
reconcile outcome and the steps taken) or per failure (`trigger failed;
redelivery expected`). Reading the stack's log files lets the demo say which
function acted, on what event, and what it did, without reaching into the
functions: they run exactly as deployed.

Only outcomes that changed something are narrated (a reconcile that found
nothing to do, or another flow's set, is the normal noise of level-triggered
events and is left out).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# The reconciler's steps that write something (shared.reconcile.steps); the rest
# (probes, waits, not-ours, done) only read.
EFFECT_STEPS = frozenset(
    {
        "Unsuspend",
        "RequestHibernation",
        "Stash",
        "FlagAndDelete",
        "SetPhase",
        "SetPhase+ReportReleased",  # Suspended with the round's report beside it
        "PersistWaking",
        "CreateMain",
        "DropSnapshot",
        "CompleteWake",
        "ReportNoCapacity",
    }
)

_WHY = {
    "SnapshotPushed": "registry push",
    "SetChanged": "API change",
    "WakeRequested": "wake request",
    "SweepTick": "sweep tick",
}
# Where the trigger came from, when that says more than its kind.
_SOURCE = {
    "distribution": "registry notification",
    "k8s-audit": "audit webhook",
    "scheduler": "sweep tick",
}


def _outcomes(outcome: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(outcome, Mapping):
        yield outcome
    elif isinstance(outcome, list):
        for item in outcome:
            if isinstance(item, Mapping):
                yield item


def _short(ref: str, namespace: str) -> str:
    ns, _, name = ref.partition("/")
    return name if ns == namespace and name else ref


def describe(record: Mapping[str, Any], namespace: str) -> list[str]:
    """Narration lines for one log record of a target (pure)."""
    target = str(record.get("target") or "?")
    trigger = str(record.get("trigger") or "")
    why = _SOURCE.get(str(record.get("source") or "")) or _WHY.get(trigger, trigger or "event")
    message = str(record.get("message") or "")
    if message.startswith("trigger failed"):
        ref = str(record.get("cocoonset") or record.get("vm") or "")
        subject = _short(ref, namespace) if ref else target
        return [f"{subject}: {target} ({why}) will be retried: {record.get('reason', '')}"]
    if message.startswith("sweep: done") and record.get("action") == "reconcile":
        # The safety net reconciled a set; the outcome's text names the steps it took.
        detail = str(record.get("detail") or "")
        found = sorted((detail.find(f"'{s}'"), s) for s in EFFECT_STEPS if f"'{s}'" in detail)
        if not found:
            return []
        ref = _short(f"{record.get('namespace')}/{record.get('cocoonset')}", namespace)
        return [f"{ref}: sweep function (sweep tick) did {', '.join(s for _, s in found)}"]
    if message != "trigger handled":
        return []
    out: list[str] = []
    for outcome in _outcomes(record.get("outcome")):
        steps = [str(s) for s in outcome.get("steps") or []]
        effects = [s for s in steps if s in EFFECT_STEPS]
        if not effects:
            continue
        ref = _short(str(outcome.get("cocoonset") or ""), namespace)
        out.append(f"{ref}: {target} function ({why}) did {', '.join(effects)}")
    return out


class FunctionLogs:
    """Follows the targets' log files from where they are now."""

    def __init__(self, paths: Mapping[str, Path], namespace: str) -> None:
        self.namespace = namespace
        self._files = dict(paths)
        self._offsets = {name: _size(p) for name, p in self._files.items()}
        self._partial: dict[str, str] = {}

    def poll(self) -> list[str]:
        out: list[str] = []
        for name, path in self._files.items():
            try:
                with path.open("rb") as f:
                    f.seek(self._offsets.get(name, 0))
                    chunk = f.read()
            except OSError:
                continue
            self._offsets[name] = self._offsets.get(name, 0) + len(chunk)
            text = self._partial.pop(name, "") + chunk.decode("utf-8", errors="replace")
            lines = text.split("\n")
            if lines and lines[-1]:
                self._partial[name] = lines[-1]  # an unfinished line: keep it for later
            for raw in lines[:-1]:
                line = raw.strip()
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    out.extend(describe(record, self.namespace))
        return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
