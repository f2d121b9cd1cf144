"""Installed = working: the built wheel, in a fresh venv, outside the clone.

The wheel is built with `uv build`, installed with `uv pip install` into a new
venv (the lock's versions as constraints; offline from the uv cache when it
holds them, else from the package index), and every command runs from that
venv with the working directory outside the repository, so nothing can come
from the checkout: `serve` answers a release CloudEvent (encoded by the real
cloudevents SDK) after reading the set from a Kubernetes API, `validate` and
`crd` behave as documented, and the local stack, which the wheel leaves out (it
is not production code), refuses to start in one line naming the clone's
command (the demo from a clone: tests/e2e/test_demo.py). python-hcl2 8.x,
which ships a top-level `cli` package, installs beside it and both keep working.

The Kubernetes API `serve` talks to is the embedded one, run by this test
process (the test venv deliberately lacks the `local` extra it needs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from cloudevents.http import CloudEvent, to_binary

from devstack.processes import free_port
from shared.crd import cocoonset_crd
from tests.conftest import REPO_ROOT
from tests.fixtures.tools import require_tool

pytestmark = pytest.mark.needs_tool("uv")

# devstack (the local stack) is not production code: not in the wheel (pyproject.toml).
TOP_LEVEL = {"cocoon_hibernation", "functions", "shared"}
CLONE_HINT = "it runs from a clone: uv sync --extra local"
AUDIT_TOKEN = "wheel-test-audit-token-0123456789abcd"


def _uv(args: list[str], *, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UV_LINK_MODE": "copy"}
    env.pop("VIRTUAL_ENV", None)  # never the repo's venv
    return subprocess.run(
        ["uv", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def _uv_offline_first(args: list[str], *, cwd: Path) -> None:
    """Offline from the uv cache when it has everything, else from the index (a registry)."""
    done = _uv([*args, "--offline"], cwd=cwd)
    if done.returncode != 0:
        done = _uv(args, cwd=cwd)
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stderr[-2000:]}"


def _venv_with(root: Path, name: str, requirement: str, *extras: str) -> Path:
    """A fresh venv `root/name` with `requirement` installed at the lock's versions.

    The lock is exported (no dev group, the given extras) as constraints, as a
    user installing from this commit gets them.
    """
    pins = root / f"pins-{name}.txt"
    exported = _uv(
        [
            "export",
            "--frozen",
            "--no-dev",
            "--no-hashes",
            "--no-emit-project",
            "--no-header",
            "--no-annotate",
            "--quiet",
            *(arg for extra in extras for arg in ("--extra", extra)),
            "--output-file",
            str(pins),
        ],
        cwd=REPO_ROOT,
    )
    assert exported.returncode == 0, exported.stderr
    venv = root / name
    _uv_offline_first(["venv", "--quiet", "--python", sys.executable, str(venv)], cwd=root)
    _uv_offline_first(
        [
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            "-c",
            str(pins),
            requirement,
        ],
        cwd=root,
    )
    return venv


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # a working directory with no checkout in it

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def cli(self) -> str:
        return str(self.venv / "bin" / "cocoon-hibernation")

    def run(self, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
        return subprocess.run(
            list(argv),
            check=False,
            capture_output=True,
            text=True,
            cwd=self.outside,
            env=env,
            input=stdin,
            timeout=120,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    require_tool("uv")
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    _uv_offline_first(["build", "--wheel", "--out-dir", str(dist), str(REPO_ROOT)], cwd=root)
    (wheel,) = dist.glob("cocoon_hibernation-*.whl")
    venv = _venv_with(root, "venv", str(wheel))
    outside = root / "elsewhere"
    outside.mkdir()
    yield Installed(wheel=wheel, venv=venv, outside=outside)


def test_the_wheel_installs_only_the_projects_own_top_level_packages(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        tops = {
            n.split("/", 1)[0] for n in whl.namelist() if not n.split("/")[0].endswith(".dist-info")
        }
        entry_points = whl.read(next(n for n in whl.namelist() if n.endswith("entry_points.txt")))
    # No `cli`, `infra` or `main`: names other distributions (python-hcl2 8.x) also use.
    assert tops == TOP_LEVEL
    assert b"cocoon-hibernation = cocoon_hibernation.main:main" in entry_points
    # The same command as a kubectl plugin (`kubectl hibernation …`).
    assert b"kubectl-hibernation = cocoon_hibernation.main:kubectl_plugin" in entry_points
    assert (
        b"kubectl_complete-hibernation = cocoon_hibernation.main:kubectl_complete" in entry_points
    )


def test_installed_code_is_imported_from_the_venv_not_the_clone(installed: Installed) -> None:
    probe = (
        "import json, cocoon_hibernation, functions.entrypoints, shared;"
        "print(json.dumps([m.__file__ for m in (cocoon_hibernation, functions.entrypoints,"
        " shared)]))"
    )
    done = installed.run(installed.python, "-c", probe)
    assert done.returncode == 0, done.stderr
    for file in json.loads(done.stdout):
        assert Path(file).resolve().is_relative_to(installed.venv.resolve()), file


def test_crd_from_the_installed_wheel(installed: Installed) -> None:
    done = installed.run(installed.cli, "crd")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == cocoonset_crd()


def test_validate_from_the_installed_wheel(installed: Installed) -> None:
    valid = sorted(str(p) for p in (REPO_ROOT / "examples" / "valid").glob("*.yaml"))
    invalid = sorted(str(p) for p in (REPO_ROOT / "examples" / "invalid").glob("*.yaml"))
    ok = installed.run(installed.cli, "validate", *valid)
    assert ok.returncode == 0, ok.stderr
    bad = installed.run(installed.cli, "validate", *invalid)
    assert bad.returncode == 1
    # One `FILE: NS/NAME: field: message` line per invalid manifest.
    for path in invalid:
        assert f"{path}: " in bad.stdout + bad.stderr


def test_version_is_the_wheels(installed: Installed) -> None:
    done = installed.run(installed.cli, "--version")
    assert done.returncode == 0, done.stderr
    version = installed.wheel.name.split("-")[1]
    assert done.stdout.strip() == f"cocoon-hibernation {version}"


def test_python_dash_m_runs_the_same_command_line(installed: Installed) -> None:
    done = installed.run(installed.python, "-m", "cocoon_hibernation", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: cocoon-hibernation ")
    assert "serve" in done.stdout and "validate" in done.stdout


@pytest.mark.parametrize(
    "argv",
    [["demo"], ["devstack", "up"], ["devstack", "kube", "--kubeconfig", "kc"]],
    ids=["demo", "devstack-up", "devstack-kube"],
)
def test_the_local_stack_is_not_in_the_wheel_and_says_where_it_runs_in_one_line(
    installed: Installed, argv: list[str]
) -> None:
    done = installed.run(installed.cli, *argv)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert CLONE_HINT in lines[0]
    assert not (installed.outside / "kc").exists()  # nothing started, nothing written
    probe = installed.run(installed.python, "-c", "import devstack")
    assert probe.returncode != 0  # the emulator and simulator are not installed


def _wait_healthy(url: str, proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve exited before answering /healthz"
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"serve did not answer {url} within {timeout} s")


def _serve_one_release(
    installed: Installed,
    kube: Any,
    kubeconfig: Path,
    *,
    wrap: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> str:
    """Start the installed `serve`, answer one release CloudEvent, stop it; return its log."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}},
        "PORT": str(port),  # the port comes from $PORT, as on Knative
        "KUBECONFIG": str(kubeconfig),
        "COCOON_INGEST_TOKEN": "wheel-test-registry-token-0123456789",
        "COCOON_AUDIT_TOKEN": AUDIT_TOKEN,
        "COCOON_REGISTRY_BASE": "127.0.0.1:9/snapshots",
        "COCOON_REGISTRY_INSECURE": "true",
        "COCOON_LOG_FORMAT": "json",
        **(extra_env or {}),
    }
    log = installed.outside / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*(wrap or []), installed.cli, "serve", "--host", "127.0.0.1"],
            cwd=installed.outside,  # no main.py here: the targets come from the package
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(f"{base}/healthz", proc)
        kube.reset_requests()
        event = CloudEvent(
            {"type": "io.cocoonstack.cocoonset.changed", "source": "//tests/wheel", "id": "w-1"},
            {"namespace": "team-a", "name": "agent"},
        )
        headers, body = to_binary(event)
        # A set change, as the cluster's event source brings it: the audit door's token.
        headers = {**headers, "Authorization": f"Bearer {AUDIT_TOKEN}"}
        resp = requests.post(f"{base}/release", headers=headers, data=body, timeout=30)
        # The set does not exist: read, found absent, acknowledged (2xx), nothing retried.
        assert resp.status_code == 200, log.read_text()
        paths = [(r["method"], r["path"]) for r in kube.requests()]
        assert (
            "GET",
            "/apis/cocoonset.cocoonstack.io/v1/namespaces/team-a/cocoonsets/agent",
        ) in paths, paths
        assert all(method == "GET" for method, _ in paths), paths  # read only: nothing to do
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert proc.returncode in (0, -signal.SIGTERM), text
    return text


def test_serve_from_the_installed_wheel_answers_a_release_cloudevent(
    installed: Installed, kube: Any, kubeconfig: Path
) -> None:
    _serve_one_release(installed, kube, kubeconfig)


# The root filesystem remounted read-only for `serve` alone (a private mount
# namespace), as `readOnlyRootFilesystem: true` leaves a pod: /dev/shm stays a
# writable tmpfs. The environment is the image's (infra/Dockerfile).
READ_ONLY_ROOT = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount -o remount,bind,ro / && exec "$@"',
    "sh",
]
IMAGE_ENV = {"TMPDIR": "/dev/shm", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/nonexistent"}


def test_serve_runs_on_a_read_only_root_filesystem(
    installed: Installed, kube: Any, kubeconfig: Path
) -> None:
    probe = subprocess.run(
        [*READ_ONLY_ROOT, "sh", "-c", "! touch /.cocoon-ro-probe 2>/dev/null"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot remount / read-only in a mount namespace here: {probe.stderr.strip()}")
    text = _serve_one_release(installed, kube, kubeconfig, wrap=READ_ONLY_ROOT, extra_env=IMAGE_ENV)
    assert "Read-only file system" not in text, text
    assert "Traceback" not in text, text


def test_python_hcl2_8_installs_beside_it_and_both_work(installed: Installed) -> None:
    """python-hcl2 8.x ships a top-level `cli`: it must shadow nothing of ours."""
    hcl2_version = version("python-hcl2")  # the dev group's, so the uv cache has it
    assert int(hcl2_version.split(".")[0]) >= 8
    _uv_offline_first(
        ["pip", "install", "--quiet", "--python", installed.python, f"python-hcl2=={hcl2_version}"],
        cwd=installed.outside,
    )
    parsed = installed.run(
        installed.python,
        "-c",
        "import hcl2, json; print(json.dumps(hcl2.loads('a = 1\\n')))",
    )
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["a"] in (1, "1")
    hcl_cli = installed.run(str(installed.venv / "bin" / "hcl2tojson"), "--help")
    assert hcl_cli.returncode == 0, hcl_cli.stderr
    ours = installed.run(installed.cli, "--help")
    assert ours.returncode == 0, ours.stderr
    assert "Slot-release hibernation for cocoonstack" in ours.stdout
    crd = installed.run(installed.cli, "crd")
    assert crd.returncode == 0 and yaml.safe_load(crd.stdout) == cocoonset_crd()
