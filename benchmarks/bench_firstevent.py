"""The first relevant event after idle: process start -> event acted on, against a warm instance.

On Cloud Run with `min_instance_count = 0` the first event after a quiet period
pays the process start, the imports and the Kubernetes client's build. Per
target, a fresh functions-framework process (bytecode compiled first, as the
image has it: `compileall` over the project and the environment) is spawned and
sent one *relevant* event as soon as it listens; the clock runs from the spawn
to that event's 2xx answer. The same event is then sent again to the now-warm
instance (the median of a few is the warm figure). Relevant here = it reads the
API: a wake request for a set the normal flow owns (GET set, pods), a
`:hibernate` push for a set that is not suspended (the release reads the set), a
sweep tick over one set, and the registry's push notification to `ingest`
(parsed, then the release's read). Beside it, the same spawn answering an
event it drops without any client (bench_coldstart's): the part that is the
process and the framework. The embedded API and a real Distribution registry on
127.0.0.1. And the CLI: `cocoon-hibernation status` on the same API, the wall
time from the command to its output.

Run: `uv run python -m benchmarks --only firstevent` or
`uv run python -m benchmarks.bench_firstevent [--quick]`.
"""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from cloudevents.http import CloudEvent, to_binary

from benchmarks._util import fig, free_port, median, spawn_function
from benchmarks.bench_coldstart import irrelevant_request, time_first_response
from shared import constants as k
from shared.names import vm_name

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef0123456789"  # a door wants 32 characters or more
NS = "agents"
SET = "a"
TARGETS = ("release", "wake", "sweep", "ingest")


def _ce(type_: str, data: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    event = CloudEvent({"type": type_, "source": "//bench", "id": os.urandom(6).hex()}, data)
    headers, body = to_binary(event)
    return dict(headers), body


def relevant_request(target: str, prefix: str) -> tuple[str, dict[str, str], bytes]:
    vm = vm_name(NS, SET, 0)
    if target == "release":
        h, b = _ce(
            k.CE_SNAPSHOT_PUSHED,
            {
                "repository": f"{prefix}/{vm}",
                "tag": k.TAG_HIBERNATE,
                "digest": "sha256:" + "a" * 64,
            },
        )
        return "/", h, b
    if target == "wake":
        h, b = _ce(k.CE_WAKE_REQUESTED, {"namespace": NS, "name": SET})
        return "/", h, b
    if target == "sweep":
        h, b = _ce(k.CE_SWEEP_REQUESTED, {"dryRun": True})
        return "/", h, b
    body = json.dumps(
        {
            "events": [
                {
                    "id": os.urandom(6).hex(),
                    "action": "push",
                    "target": {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": "sha256:" + "b" * 64,
                        "repository": f"{prefix}/{vm}",
                        "tag": k.TAG_HIBERNATE,
                    },
                }
            ]
        }
    ).encode()
    headers = {
        "Content-Type": "application/vnd.docker.distribution.events.v1+json",
        "Authorization": f"Bearer {TOKEN}",
    }
    return "/registry", headers, body


def _post(url: str, headers: dict[str, str], body: bytes) -> int:
    return requests.post(url, headers=headers, data=body, timeout=30).status_code


def first_and_warm(
    target: str, env: dict[str, str], prefix: str, warm_runs: int
) -> tuple[float, float]:
    """(spawn -> first relevant answer, median warm answer), milliseconds."""
    port = free_port()
    path, headers, body = relevant_request(target, prefix)
    url = f"http://127.0.0.1:{port}{path}"
    started = time.perf_counter()
    proc = spawn_function(ROOT / "main.py", target, port, env=env, cwd=ROOT)
    try:
        deadline = started + 60
        while True:
            try:
                status = _post(url, headers, body)
                cold = (time.perf_counter() - started) * 1000
                break
            except requests.ConnectionError:
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.003)
        if status >= 300:
            raise RuntimeError(f"{target}: first answer HTTP {status}")
        warm: list[float] = []
        for _ in range(warm_runs):
            path, headers, body = relevant_request(target, prefix)  # a fresh event id
            t = time.perf_counter()
            _post(url, headers, body)
            warm.append((time.perf_counter() - t) * 1000)
        return cold, median(warm)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _compile_bytecode() -> None:
    """As the image does (and Cloud Run's build): every module compiled ahead of time."""
    for where in (ROOT / "shared", ROOT / "functions", ROOT / "cocoon_hibernation"):
        compileall.compile_dir(where, quiet=1, workers=0)
    compileall.compile_file(ROOT / "main.py", quiet=1)
    compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1, workers=0)


def run(*, quick: bool = False) -> dict[str, Any]:
    from devstack.kubeapi import EmbeddedKube
    from devstack.kubehttp import KubeHTTP, set_path
    from devstack.registry import DistributionServer

    rounds = 2 if quick else 5
    _compile_bytecode()
    figures: dict[str, Any] = {}
    samples: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedKube() as kube,
        DistributionServer() as registry,
    ):
        kubeconfig = Path(kube.write_kubeconfig(Path(tmp) / "kubeconfig"))
        api = KubeHTTP(kube.url)
        api.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        api.post(
            set_path(NS),
            {
                "apiVersion": k.API_VERSION,
                "kind": k.KIND,
                "metadata": {"name": SET, "namespace": NS},
                "spec": {"hibernatePolicy": "release", "agent": {"image": "ghcr.io/acme/a:1"}},
            },
        )
        api.close()
        prefix = "snapshots"
        env = {
            "KUBECONFIG": str(kubeconfig),
            "COCOON_REGISTRY_BASE": f"{registry.host}/{prefix}",
            "COCOON_REGISTRY_INSECURE": "true",
            "COCOON_INGEST_TOKEN": TOKEN,
            "COCOON_OPERATOR": "absent",
            "COCOON_LOG_FORMAT": "json",
        }
        for target in TARGETS:
            cold: list[float] = []
            warm: list[float] = []
            bare: list[float] = []
            for _ in range(rounds):  # interleaved, so drift hits both alike
                c, w = first_and_warm(target, env, prefix, warm_runs=5)
                cold.append(c)
                warm.append(w)
                # The same spawn answering an event it drops without a client: the part
                # of the first event that is the process and the framework.
                bare.append(
                    time_first_response(ROOT / "main.py", target, *irrelevant_request(target))
                )
            samples[f"{target} first relevant event (spawn->answer)"] = cold
            samples[f"{target} warm relevant event"] = warm
            figures[f"{target}_first_event_ms"] = fig(
                median(cold), "ms", f"spawn -> first relevant answer, median of {rounds} spawns"
            )
            figures[f"{target}_warm_event_ms"] = fig(
                median(warm), "ms", "the same event to the warm instance, median"
            )
            figures[f"{target}_first_over_warm"] = fig(
                median(cold) / median(warm), "x", "same run, bytecode compiled"
            )
            figures[f"{target}_first_irrelevant_ms"] = fig(
                median(bare),
                "ms",
                "spawn -> first answer to an event dropped without a client (bench_coldstart's)",
            )
        cli: list[float] = []
        for _ in range(rounds):
            t = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cocoon_hibernation",
                    "status",
                    "--kubeconfig",
                    str(kubeconfig),
                ],
                cwd=ROOT,
                env={**os.environ, **env},
                capture_output=True,
                check=True,
            )
            cli.append((time.perf_counter() - t) * 1000)
        samples["CLI status wall time"] = cli
        figures["cli_status_ms"] = fig(
            median(cli), "ms", f"`cocoon-hibernation status`, command -> output, median of {rounds}"
        )
    return {"figures": figures, "samples": samples}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv)["figures"], indent=2))
