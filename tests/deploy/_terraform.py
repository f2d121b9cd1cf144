"""A real Terraform CLI for the deploy tests, found or built by infra/scripts/build-terraform.sh.

`terraform console` evaluates the module's own expressions (validation
conditions, locals) with Terraform's RE2 and functions: no provider needed.
`providers_config()` is the CLI config of the local provider mirror, for
`terraform validate` and `terraform test`.

Under CI=true a missing CLI is a failure, not a skip: the script builds
OpenTofu from the Go module proxy when no terraform is on PATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "infra" / "scripts" / "build-terraform.sh"
_cache: dict[str, tuple[int, str, str]] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _run_script(mode: str) -> tuple[int, str, str]:
    if mode not in _cache:
        proc = subprocess.run(
            ["bash", str(SCRIPT), mode], check=False, capture_output=True, text=True, timeout=3600
        )
        _cache[mode] = (proc.returncode, proc.stdout.strip(), proc.stderr.strip())
    return _cache[mode]


def terraform_binary() -> str:
    rc, out, err = _run_script("cli")
    if rc != 0 or not out:
        message = f"no terraform CLI (build-terraform.sh cli exited {rc}): {err}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return out.splitlines()[-1]


def providers_config() -> str:
    """CLI config installing providers from the local mirror; skips with the reason if absent."""
    rc, out, err = _run_script("providers")
    if rc != 0 or not out:
        # The proxy refuses the providers (see the script): in CI this is
        # reported as a skip with the exact answer, never silently.
        pytest.skip(
            f"provider mirror unavailable (build-terraform.sh providers exited {rc}): {err}"
        )
    return out.splitlines()[-1]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TF_CLI_CONFIG_FILE": "/dev/null",
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
    }
    env.update(extra)
    return env


def console(workdir: Path, expression: str) -> Any:
    """Evaluate `expression` with Terraform (no configuration, no provider) and decode it."""
    binary = terraform_binary()
    env = clean_env(workdir)
    out = subprocess.run(
        [binary, "console"],
        check=False,
        input=f"jsonencode({expression})\n",
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(json.loads(out.stdout.strip().splitlines()[-1]))


def condition_source(variables_tf: Path, variable: str, index: int = 0) -> str:
    """The text of the index-th `condition = ...` line of `variable` in variables.tf."""
    text = variables_tf.read_text(encoding="utf-8")
    start = text.index(f'variable "{variable}" {{')
    end = text.find('\nvariable "', start + 1)
    block = text[start : end if end != -1 else len(text)]
    conditions = re.findall(r"^\s*condition\s*=\s*(.+)$", block, flags=re.MULTILINE)
    return conditions[index].strip()
