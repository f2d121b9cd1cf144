"""`terraform validate` and `terraform test` against the real provider schemas.

The providers come from the local filesystem mirror that
infra/scripts/build-terraform.sh checks (never from a registry: the CLI
config allows the mirror only). When the mirror lacks them the tests skip
with the script's exact reason; the Go module proxy does not serve
terraform-provider-google v7 (see the script).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy._hcl import EXAMPLE_DIR, MODULE_DIR
from tests.deploy._terraform import clean_env, providers_config, terraform_binary


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl"))
    return dst


def _tf(
    binary: str, cwd: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args],
        cwd=cwd,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def tf() -> tuple[str, str]:
    return terraform_binary(), providers_config()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The terraform/ tree copied, so init never writes into the repository."""
    root = tmp_path / "terraform"
    _copy(MODULE_DIR.parent.parent, root)
    return root


@pytest.mark.parametrize("where", ["module", "example"])
def test_terraform_validate(tf: tuple[str, str], tree: Path, tmp_path: Path, where: str) -> None:
    binary, config = tf
    rel = (MODULE_DIR if where == "module" else EXAMPLE_DIR).relative_to(MODULE_DIR.parent.parent)
    cwd = tree / rel
    env = clean_env(tmp_path, TF_CLI_CONFIG_FILE=config)
    init = _tf(binary, cwd, env, "init", "-backend=false", "-input=false")
    assert init.returncode == 0, init.stderr + init.stdout
    out = _tf(binary, cwd, env, "validate", "-no-color")
    assert out.returncode == 0, out.stderr + out.stdout


def test_terraform_test_with_mock_providers(
    tf: tuple[str, str], tree: Path, tmp_path: Path
) -> None:
    """The module's tests/*.tftest.hcl: plans and mock applies with representative variables."""
    binary, config = tf
    cwd = tree / MODULE_DIR.relative_to(MODULE_DIR.parent.parent)
    env = clean_env(tmp_path, TF_CLI_CONFIG_FILE=config)
    init = _tf(binary, cwd, env, "init", "-backend=false", "-input=false")
    assert init.returncode == 0, init.stderr + init.stdout
    out = _tf(binary, cwd, env, "test", "-no-color")
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 failed" in out.stdout or "Success!" in out.stdout, out.stdout
