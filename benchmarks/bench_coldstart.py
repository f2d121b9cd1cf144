"""Cold start: a fresh functions-framework process serving its first request.

Each target (`main.py`) is measured against a bare functions-framework no-op
function of the same signature, interleaved in the same run, from process
spawn to the first response. The events are ones each target acknowledges
without touching the network (the common case: most registry pushes and audit
writes are irrelevant), and a separate in-process probe reports whether
`kubernetes`, `boto3` or `google.cloud.pubsub` were imported to answer them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import requests
from cloudevents.http import CloudEvent, to_binary

from benchmarks._util import fig, free_port, median, spawn_function

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-registry-token-0123456789abcdef"  # 32+ characters (shared.config)

NOOP = textwrap.dedent(
    """
    import functions_framework

    @functions_framework.cloud_event
    def noop_event(event):
        return None

    @functions_framework.http
    def noop_http(request):
        return "ok"
    """
)

ENV = {
    "COCOON_REGISTRY_BASE": "127.0.0.1:9/snapshots",
    "COCOON_REGISTRY_INSECURE": "true",
    "COCOON_INGEST_TOKEN": TOKEN,
    "COCOON_NAMESPACES": "agents",
    "KUBECONFIG": "/nonexistent/kubeconfig",
    "COCOON_LOG_FORMAT": "json",
}


def _ce(type_: str, data: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    event = CloudEvent({"type": type_, "source": "//bench", "id": "bench-1"}, data)
    headers, body = to_binary(event)
    return dict(headers), body


def irrelevant_request(target: str) -> tuple[str, dict[str, str], bytes]:
    """(path, headers, body) of an event the target acknowledges without any client."""
    if target == "release":
        h, b = _ce(
            "io.cocoonstack.snapshot.pushed",
            {
                "repository": "snapshots/vk-agents-a-0",
                "tag": "latest",
                "digest": "sha256:" + "a" * 64,
            },
        )
        return "/", h, b
    if target == "wake":
        h, b = _ce("io.cocoonstack.cocoonset.wake.requested", {"namespace": "other", "name": "a"})
        return "/", h, b
    if target == "sweep":
        h, b = _ce("harbor.artifact.pushed", {"resources": [], "repository": {}})
        return "/", h, b
    body = json.dumps(
        {
            "events": [
                {
                    "id": "b1",
                    "action": "push",
                    "target": {
                        "mediaType": "application/octet-stream",
                        "digest": "sha256:" + "b" * 64,
                        "repository": "snapshots/vk-agents-a-0",
                    },
                }
            ]
        }
    ).encode()
    return (
        "/registry",
        {
            "Content-Type": "application/vnd.docker.distribution.events.v1+json",
            "Authorization": f"Bearer {TOKEN}",
        },
        body,
    )


def time_first_response(
    source: Path, target: str, path: str, headers: dict[str, str], body: bytes
) -> float:
    """Milliseconds from spawning functions-framework to its first 2xx answer."""
    port = free_port()
    started = time.perf_counter()
    proc = spawn_function(
        source, target, port, env={**ENV, "PYTHONDONTWRITEBYTECODE": "1"}, cwd=ROOT
    )
    try:
        url = f"http://127.0.0.1:{port}{path}"
        deadline = started + 30
        while True:
            try:
                r = requests.post(url, headers=headers, data=body, timeout=5)
                elapsed = (time.perf_counter() - started) * 1000
                if r.status_code >= 300:
                    raise RuntimeError(f"{target}: first answer {r.status_code}: {r.text[:200]}")
                return elapsed
            except requests.ConnectionError:
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.003)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


PROBE = textwrap.dedent(
    """
    import json, sys
    import functions_framework
    target, path = sys.argv[1], sys.argv[2]
    headers, body = json.loads(sys.argv[3]), bytes.fromhex(sys.argv[4])
    app = functions_framework.create_app(target=target, source="main.py")
    r = app.test_client().post(path, headers=headers, data=body)
    heavy_names = ("kubernetes", "boto3", "botocore", "google.cloud.pubsub", "google.auth")
    heavy = sorted(m for m in heavy_names if m in sys.modules)
    print(json.dumps({"status": r.status_code, "heavy": heavy}))
    """
)


def heavy_modules_loaded(target: str) -> tuple[int, list[str]]:
    path, headers, body = irrelevant_request(target)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, target, path, json.dumps(headers), body.hex()],
        cwd=ROOT,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return int(res["status"]), list(res["heavy"])


def run(*, quick: bool) -> dict[str, Any]:
    rounds = 3 if quick else 15
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        noop = Path(tmp) / "noop_main.py"
        noop.write_text(NOOP)
        main = ROOT / "main.py"
        for target in ("release", "wake", "sweep", "ingest"):
            path, headers, body = irrelevant_request(target)
            noop_target = "noop_http" if target == "ingest" else "noop_event"
            ours, base = [], []
            for _ in range(rounds):  # interleaved so drift hits both alike
                base.append(time_first_response(noop, noop_target, path, headers, body))
                ours.append(time_first_response(main, target, path, headers, body))
            samples[f"{target} first response"] = ours
            samples[f"no-op ({noop_target}) first response"] = (
                samples.get(f"no-op ({noop_target}) first response", []) + base
            )
            ratio = median(ours) / median(base)
            figures[f"cold start {target} / no-op"] = fig(
                ratio,
                "x",
                f"median {median(ours):.0f} ms vs {median(base):.0f} ms over {rounds} "
                "interleaved spawns (target <= 1.3x)",
            )
            status, heavy = heavy_modules_loaded(target)
            figures[f"{target}: heavy modules for an irrelevant event"] = fig(
                len(heavy),
                "modules",
                f"HTTP {status}; loaded: {', '.join(heavy) or 'none'} (target: none)",
            )
    return {"figures": figures, "samples": samples}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
