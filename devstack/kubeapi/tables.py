"""Server-side printing (meta.k8s.io/v1 Table), which kubectl asks for on `get`.

Columns follow kube-apiserver's printers for the built-ins it emulates and a
CRD's additionalPrinterColumns (date columns become ages, as upstream).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from devstack.kubeapi.resources import ResourceType


def human_age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        return "<invalid>"
    then = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    s = max(0, int(time.time() - then))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y"


_STEP = re.compile(r"\.([A-Za-z0-9_\-/]+)|\[(\d+)\]")


def json_path(obj: Any, path: str) -> Any:
    cur = obj
    for m in _STEP.finditer(path.strip("{}")):
        if m.group(1) is not None:
            cur = cur.get(m.group(1)) if isinstance(cur, dict) else None
        else:
            idx = int(m.group(2))
            cur = cur[idx] if isinstance(cur, list) and idx < len(cur) else None
        if cur is None:
            return None
    return cur


def _col(
    name: str, typ: str = "string", fmt: str = "", priority: int = 0, desc: str = ""
) -> dict[str, Any]:
    return {
        "name": name,
        "type": typ,
        "format": fmt,
        "description": desc or name,
        "priority": priority,
    }


def _pod_row(pod: dict[str, Any]) -> list[Any]:
    spec, status = pod.get("spec", {}), pod.get("status", {})
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    phase = status.get("reason") or status.get("phase") or "Unknown"
    if pod.get("metadata", {}).get("deletionTimestamp"):
        phase = "Terminating"
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        phase,
        restarts,
        human_age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def table(
    rt: ResourceType, version: str, items: list[dict[str, Any]], meta: dict[str, Any], include: str
) -> dict[str, Any]:
    name_col = _col("Name", fmt="name", desc="Name must be unique within a namespace.")
    age_col = _col(
        "Age",
        desc="CreationTimestamp is a timestamp representing the server time when this object "
        "was created.",
    )
    if rt.plural == "pods" and not rt.group:
        cols = [
            name_col,
            _col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", desc="The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                desc="The number of times the containers in this pod have been restarted.",
            ),
            age_col,
            _col("IP", priority=1, desc="IP address allocated to the pod."),
            _col("Node", priority=1, desc="Name of the node this pod is assigned to."),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ]

        def row(o: dict[str, Any]) -> list[Any]:
            return _pod_row(o)
    elif rt.plural == "namespaces" and not rt.group:
        cols = [name_col, _col("Status"), age_col]

        def row(o: dict[str, Any]) -> list[Any]:
            return [
                o["metadata"]["name"],
                o.get("status", {}).get("phase", ""),
                human_age(o["metadata"].get("creationTimestamp")),
            ]
    elif rt.plural == "nodes" and not rt.group:
        cols = [name_col, _col("Status"), _col("Roles"), age_col, _col("Version")]

        def row(o: dict[str, Any]) -> list[Any]:
            conds = o.get("status", {}).get("conditions") or []
            ready = next((c for c in conds if c.get("type") == "Ready"), None)
            status = (
                "Unknown"
                if ready is None
                else ("Ready" if ready.get("status") == "True" else "NotReady")
            )
            if o.get("spec", {}).get("unschedulable"):
                status += ",SchedulingDisabled"
            labels = o["metadata"].get("labels") or {}
            prefix = "node-role.kubernetes.io/"
            roles = (
                ",".join(sorted(k[len(prefix) :] for k in labels if k.startswith(prefix)))
                or "<none>"
            )
            version = o.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
            return [
                o["metadata"]["name"],
                status,
                roles,
                human_age(o["metadata"].get("creationTimestamp")),
                version,
            ]
    elif rt.plural == "events" and rt.storage == "core/events":
        cols = [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Message"),
            name_col | {"priority": 1},
        ]

        def row(o: dict[str, Any]) -> list[Any]:
            inv = o.get("involvedObject") or o.get("regarding") or {}
            when = o.get("lastTimestamp") or o.get("deprecatedLastTimestamp") or o.get("eventTime")
            return [
                human_age(when) if when else "<unknown>",
                o.get("type", ""),
                o.get("reason", ""),
                f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
                o.get("message") or o.get("note") or "",
                o["metadata"]["name"],
            ]
    elif rt.custom:
        printer = rt.printer_columns.get(version) or []
        if not printer:
            printer = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        cols = [name_col] + [
            _col(
                p["name"],
                "string" if p.get("type") == "date" else p.get("type", "string"),
                p.get("format", ""),
                int(p.get("priority", 0)),
                p.get("description", ""),
            )
            for p in printer
        ]

        def row(o: dict[str, Any]) -> list[Any]:
            cells: list[Any] = [o["metadata"]["name"]]
            for p in printer:
                v = json_path(o, p["jsonPath"])
                if p.get("type") == "date":
                    v = human_age(v) if isinstance(v, str) else v
                cells.append(v)
            return cells
    else:
        cols = [name_col, age_col]

        def row(o: dict[str, Any]) -> list[Any]:
            return [o["metadata"]["name"], human_age(o["metadata"].get("creationTimestamp"))]

    rows = []
    for o in items:
        if include == "None":
            obj: Any = None
        elif include == "Object":
            obj = o
        else:
            obj = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata", {}),
            }
        r: dict[str, Any] = {"cells": row(o)}
        if obj is not None:
            r["object"] = obj
        rows.append(r)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": cols,
        "rows": rows,
    }
