"""kubectl-native: `kubectl hibernation …`, shell completion, next steps that run as printed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cocoon_hibernation import _common

BIN = Path(sys.executable).parent


def test_kubectl_runs_the_plugin_as_kubectl_hibernation(tmp_path: Path) -> None:
    plugin = BIN / "kubectl-hibernation"
    if not plugin.exists():
        pytest.skip("the scripts are not installed (run `uv sync`)")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    kubectl = shutil.which("kubectl", path=env["PATH"])
    argv = [kubectl, "hibernation", "--help"] if kubectl else [str(plugin), "--help"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("Usage: kubectl hibernation [OPTIONS] COMMAND [ARGS]...")
    bad = subprocess.run(
        [str(plugin), "status", "--nope"], env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("(see kubectl hibernation status --help)")


def test_shell_completion_completes_commands_and_options() -> None:
    script = BIN / "cocoon-hibernation"
    if not script.exists():
        pytest.skip("the scripts are not installed (run `uv sync`)")

    def complete(words: str, cword: int) -> list[str]:
        env = {
            **os.environ,
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
            "_COCOON_HIBERNATION_COMPLETE": "bash_complete",
        }
        out = subprocess.run(
            [str(script)], check=False, env=env, capture_output=True, text=True
        ).stdout
        return out.split()

    assert complete("cocoon-hibernation st", 1) == ["plain,status"]
    assert complete("cocoon-hibernation status --wa", 2) == ["plain,--watch"]


@pytest.mark.parametrize(
    ("argv0", "on_path", "cwd", "expected"),
    [
        pytest.param("bin/cocoon-hibernation", True, None, "cocoon-hibernation", id="on-path"),
        pytest.param("bin/kubectl-hibernation", True, None, "kubectl hibernation", id="plugin"),
        pytest.param(
            "bin/cocoon-hibernation", False, "project", "uv run cocoon-hibernation", id="clone"
        ),
        pytest.param(
            "bin/cocoon-hibernation",
            False,
            "elsewhere",
            "uv run --project {project} cocoon-hibernation",
            id="clone-elsewhere",
        ),
    ],
)
def test_the_next_steps_we_print_run_as_printed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv0: str,
    on_path: bool,
    cwd: str | None,
    expected: str,
) -> None:
    # `demo --keep` and `devstack up` printed `cocoon-hibernation status`, which is not
    # on PATH in a clone (it needs `uv run`).
    project = tmp_path / "clone"
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    script = project / ".venv" / argv0
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.setattr(sys, "prefix", str(project / ".venv"))

    def which(name: str, *args: object, **kw: object) -> str | None:
        if name == "uv":
            return "/usr/bin/uv"
        return str(script) if on_path else None

    monkeypatch.setattr(shutil, "which", which)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(project if cwd == "project" else elsewhere)
    assert _common.invocation() == expected.format(project=project)


def test_kubectl_completes_the_plugin(tmp_path: Path) -> None:
    # kubectl (1.26+) asks kubectl_complete-hibernation, in cobra's protocol.
    script = BIN / "kubectl_complete-hibernation"
    if not script.exists():
        pytest.skip("the scripts are not installed (run `uv sync`)")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def complete(*words: str) -> list[str]:
        kubectl = shutil.which("kubectl", path=env["PATH"])
        argv = [kubectl, "__complete", "hibernation", *words] if kubectl else [str(script), *words]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
        return [line.split("\t")[0] for line in out.splitlines()]

    assert complete("st") == ["status", ":4"]
    assert complete("status", "-o", "") == ["table", "json", "yaml", ":4"]
    assert complete("validate", "") == [":0"]  # file names: the shell's own completion
