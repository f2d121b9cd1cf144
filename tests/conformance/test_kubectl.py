"""kubectl against the embedded API: discovery, server-side printing, apply, selectors."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conformance.helpers import Custom

pytestmark = pytest.mark.needs_tool("kubectl")

MANIFEST = """\
apiVersion: cocoonset.cocoonstack.io/v1
kind: CocoonSet
metadata:
  name: demo
spec:
  agent:
    image: registry.local/agent:1
  hibernatePolicy: release
---
apiVersion: v1
kind: Pod
metadata:
  name: demo-0
  labels: {app: demo}
spec:
  containers:
  - name: main
    image: registry.local/agent:1
"""


def _kubectl(kubeconfig: Path, cache: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kubectl_get_apply_and_label_selection(
    kubeconfig: Path, k8s_api: client.ApiClient, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    assert _kubectl(kubeconfig, cache, "get", "cocoonsets", "-o", "name") == ""
    out = _kubectl(kubeconfig, cache, "apply", "-f", "-", stdin=MANIFEST)
    assert "cocoonset.cocoonset.cocoonstack.io/demo created" in out
    assert "pod/demo-0 created" in out
    table = _kubectl(kubeconfig, cache, "get", "cocoonsets")
    assert table.split("\n")[0].split() == ["NAME", "PHASE", "READY", "DESIRED", "AGE"]
    assert table.split("\n")[1].split()[0] == "demo"
    pods = _kubectl(kubeconfig, cache, "get", "pods", "-l", "app=demo", "-o", "name")
    assert pods.strip() == "pod/demo-0"
    assert _kubectl(kubeconfig, cache, "get", "pods", "-l", "app=other", "-o", "name").strip() == ""
    # Re-apply with a change: kubectl computes a patch (merge for the CRD, strategic for the pod).
    changed = MANIFEST.replace("hibernatePolicy: release", "hibernatePolicy: retain").replace(
        "{app: demo}", "{app: demo, tier: a}"
    )
    out = _kubectl(kubeconfig, cache, "apply", "-f", "-", stdin=changed)
    assert "cocoonset.cocoonset.cocoonstack.io/demo configured" in out
    assert Custom(k8s_api).get("demo")["spec"]["hibernatePolicy"] == "retain"
    assert client.CoreV1Api(k8s_api).read_namespaced_pod("demo-0", "default").metadata.labels == {
        "app": "demo",
        "tier": "a",
    }
    assert (
        _kubectl(
            kubeconfig, cache, "get", "cocoonset", "demo", "-o", "jsonpath={.spec.agent.replicas}"
        )
        == "0"
    )


def test_kubectl_short_name_cs_is_componentstatuses_not_cocoonsets(
    kubeconfig: Path, k8s_api: client.ApiClient, tmp_path: Path
) -> None:
    # The CocoonSet CRD declares the short name `cs` (as upstream's does), but the core
    # group's deprecated ComponentStatus owns it: kubectl picks the core one.
    Custom(k8s_api).create(
        {
            "apiVersion": "cocoonset.cocoonstack.io/v1",
            "kind": "CocoonSet",
            "metadata": {"name": "demo"},
            "spec": {"agent": {"image": "registry.local/agent:1"}},
        }
    )
    result = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "c"),
            "get",
            "cs",
            "demo",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "NotFound" in result.stderr and "componentstatus" in result.stderr


def test_kubectl_create_generators_post_protobuf_bodies(
    kubeconfig: Path, k8s_api: client.ApiClient, tmp_path: Path
) -> None:
    # kubectl's typed generators send application/vnd.kubernetes.protobuf, as to a real cluster.
    cache = tmp_path / "cache"
    assert (
        _kubectl(kubeconfig, cache, "create", "namespace", "team-b").strip()
        == "namespace/team-b created"
    )
    _kubectl(
        kubeconfig, cache, "create", "configmap", "cfg", "-n", "team-b", "--from-literal=mode=fast"
    )
    _kubectl(
        kubeconfig,
        cache,
        "create",
        "secret",
        "generic",
        "tok",
        "-n",
        "team-b",
        "--from-literal=t=abc",
    )
    core = client.CoreV1Api(k8s_api)
    assert core.read_namespace("team-b").status.phase == "Active"
    assert core.read_namespaced_config_map("cfg", "team-b").data == {"mode": "fast"}
    assert core.read_namespaced_secret("tok", "team-b").data == {"t": "YWJj"}


@pytest.mark.embedded_only("waits on the emulator's request log to know kubectl's watch is open")
def test_kubectl_get_watch_prints_rows_as_objects_change(
    kube: Any, kubeconfig: Path, k8s_api: client.ApiClient, tmp_path: Path
) -> None:
    import threading
    import time

    core = client.CoreV1Api(k8s_api)
    pod = {"metadata": {"name": "w0"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
    core.create_namespaced_pod("default", pod)

    def once_watching() -> None:
        # Change the pod only after kubectl's watch request is in, so the row order is fixed.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any("watch=" in r["query"] for r in kube.requests()):
                break
            time.sleep(0.02)
        core.patch_namespaced_pod_status("w0", "default", {"status": {"phase": "Running"}})

    t = threading.Thread(target=once_watching)
    t.start()
    argv = ["get", "pods", "-w", "--request-timeout=5s"]
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    t.join()
    rows = [line.split() for line in result.stdout.strip().splitlines()]
    assert rows[0][:3] == ["NAME", "READY", "STATUS"]
    assert [r[2] for r in rows[1:]] == ["Pending", "Running"]
