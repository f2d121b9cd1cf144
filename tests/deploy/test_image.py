"""infra/Dockerfile built for real and run the way Kubernetes runs it.

No Docker engine here: `infra/scripts/build-image.sh --local-base` makes a
Debian bookworm base with mmdebstrap (Python 3.11 + pip, from the Debian
archive) and builds the Dockerfile on it with `buildah bud --isolation chroot`
(the Dockerfile's default base, the pinned upstream python image, is not
pullable from these machines). The image then runs under podman as a
Kubernetes pod would run it: its non-root uid, a read-only root filesystem
(no tmpfs added on /tmp or /run), every capability dropped, $PORT set. It must
answer /healthz and /metrics and handle a release CloudEvent against the
embedded Kubernetes API.

podman is run with `--runtime=runc --cgroup-manager=cgroupfs` and explicit
`--ulimit nofile/nproc`: on these machines the cgroup hierarchy is v1/hybrid,
so crun refuses, and podman's default rlimits cannot be raised. When a machine
cannot run a container at all, the tests skip with the command and its error
(the Dockerfile's static checks in test_dockerfile.py still run).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from cloudevents.http import CloudEvent, to_binary

from devstack.processes import free_port
from shared.metric_names import CATALOGUE
from tests.conftest import REPO_ROOT
from tests.fixtures.tools import in_ci

# The build (mmdebstrap ~2 min the first time, buildah ~1.5 min) outlasts the default.
pytestmark = pytest.mark.timeout(1500)

TOOLS = ("buildah", "podman", "runc", "mmdebstrap")
BASE = "localhost/cocoon-python-base:bookworm"
TAG = "localhost/cocoon-hibernation:test"
PODMAN = ["podman", "--runtime=runc", "--cgroup-manager=cgroupfs"]
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        message = (
            f"{', '.join(missing)} not installed: the image cannot be built or run here "
            "('apt-get install buildah podman runc mmdebstrap', or 'make sysdeps' as root)"
        )
        if in_ci():
            pytest.fail(f"CI=true and {message}")
        pytest.skip(message)
    script = REPO_ROOT / "infra" / "scripts" / "build-image.sh"
    done = _run(["bash", str(script), "--local-base", TAG], 1400)
    # A build failure is a failure, whatever the machine: the tools are there.
    assert done.returncode == 0, done.stderr[-4000:]
    image_id = done.stdout.strip().splitlines()[-1]
    probe = [*PODMAN, "run", "--rm", *LIMITS, "--entrypoint", "/usr/bin/true", image_id]
    ran = _run(probe)
    if ran.returncode != 0:
        pytest.skip(
            f"this machine cannot run a container: `{' '.join(probe)}` exited "
            f"{ran.returncode}: {ran.stderr.strip()[-600:]}"
        )
    return image_id


@pytest.fixture
def container(image: str, kube: Any, kubeconfig: Path) -> Iterator[str]:
    """`serve` from the image, on the host network (the embedded API is on 127.0.0.1)."""
    port = free_port()
    name = f"cocoon-test-{uuid.uuid4().hex[:8]}"
    argv = [
        *PODMAN,
        "run",
        "--detach",
        "--name",
        name,
        "--network",
        "host",
        # As a pod with readOnlyRootFilesystem, runAsNonRoot, drop ALL.
        "--read-only",
        "--read-only-tmpfs=false",
        "--user",
        "10001:10001",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        *LIMITS,
        "--volume",
        f"{kubeconfig}:/etc/cocoon/kubeconfig:ro",
        "--env",
        "KUBECONFIG=/etc/cocoon/kubeconfig",
        "--env",
        f"PORT={port}",
        "--env",
        "COCOON_INGEST_TOKEN=image-test-registry-token-0123456789",
        "--env",
        "COCOON_AUDIT_TOKEN=image-test-audit-token-0123456789abcd",
        "--env",
        "COCOON_REGISTRY_BASE=127.0.0.1:9/snapshots",
        "--env",
        "COCOON_REGISTRY_INSECURE=true",
        image,
        "serve",
        "--host",
        "127.0.0.1",
    ]
    started = _run(argv)
    assert started.returncode == 0, started.stderr
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            state = _run(["podman", "inspect", "--format", "{{.State.Running}}", name])
            logs = _run(["podman", "logs", name]).stderr
            assert state.stdout.strip() == "true", f"serve exited: {logs[-3000:]}"
            assert time.monotonic() < deadline, f"no /healthz in 90 s: {logs[-3000:]}"
            time.sleep(0.3)
        yield base
    finally:
        logs = _run(["podman", "logs", name])
        _run(["podman", "rm", "--force", "--time", "5", name])
        text = logs.stdout + logs.stderr
        assert "Read-only file system" not in text, text[-3000:]
        assert "Traceback" not in text, text[-3000:]


def test_the_image_runs_as_its_non_root_user_on_a_read_only_root(image: str) -> None:
    argv = [*PODMAN, "run", "--rm", "--read-only", "--read-only-tmpfs=false", *LIMITS]
    done = _run([*argv, "--entrypoint", "/bin/sh", image, "-c", "id -u; touch /x || echo ro"])
    assert done.returncode == 0, done.stderr
    uid, ro = done.stdout.split()
    assert uid == "10001" and ro == "ro"


def test_the_running_image_answers_healthz_metrics_and_a_release_cloudevent(
    container: str, kube: Any
) -> None:
    metrics = requests.get(f"{container}/metrics", timeout=5)
    assert metrics.status_code == 200
    for m in CATALOGUE:
        assert f"# TYPE {m.name} " in metrics.text, m.name
    kube.reset_requests()
    event = CloudEvent(
        {"type": "io.cocoonstack.cocoonset.changed", "source": "//tests/image", "id": "img-1"},
        {"namespace": "team-a", "name": "agent"},
    )
    headers, body = to_binary(event)
    # A set change, as the cluster's event source brings it: the audit door's token.
    headers = {**headers, "Authorization": "Bearer image-test-audit-token-0123456789abcd"}
    resp = requests.post(f"{container}/release", headers=headers, data=body, timeout=60)
    # The set does not exist: read, found absent, acknowledged (2xx), nothing written.
    assert resp.status_code == 200, resp.text
    paths = [(r["method"], r["path"]) for r in kube.requests()]
    assert ("GET", "/apis/cocoonset.cocoonstack.io/v1/namespaces/team-a/cocoonsets/agent") in paths
    assert all(method == "GET" for method, _ in paths), paths
