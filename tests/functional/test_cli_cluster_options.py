"""The cluster commands find the cluster as kubectl does, and say plainly when it lacks the CRD.

- kubeconfig: `--kubeconfig`, else `$KUBECONFIG` (a list, merged as kubectl merges
  it: the first file to set a value wins), else `~/.kube/config` (where
  `gcloud container clusters get-credentials` writes), else in-cluster; `--context`.
  Each case runs with a temporary HOME, against the embedded API and a real
  kube-apiserver (TLS, with the CA as a file path relative to the kubeconfig).
- a cluster without the CocoonSet CRD (a fresh embedded API whose CRD was
  deleted through the API): status, wake and `sweep --dry-run` exit non-zero
  saying "CocoonSet CRD not installed".
- the command line as a whole: `--version` is the wheel's, click's usage errors
  carry the one `error: ` prefix, every command's --help documents its exit codes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cocoon_hibernation.cmd_status import command as status
from cocoon_hibernation.cmd_sweep import command as sweep
from cocoon_hibernation.cmd_wake import command as wake
from cocoon_hibernation.main import COMMANDS
from cocoon_hibernation.main import main as cli
from devstack.kubehttp import KubeHTTP, set_path
from shared import constants as k
from shared.clients.kube import reset_clients

NS = "team"


def _env(home: Path, **extra: str | None) -> dict[str, str | None]:
    # No KUBECONFIG, no in-cluster service account: only HOME decides.
    base: dict[str, str | None] = {
        "HOME": str(home),
        "KUBECONFIG": None,
        "KUBERNETES_SERVICE_HOST": None,
        "COCOON_REGISTRY_BASE": None,
    }
    return {**base, **extra}


ON_BOTH = pytest.mark.parametrize("kube_backend", ["embedded", "real"], indirect=True)


def _http(kube: Any, backend: str) -> KubeHTTP:
    if backend == "real":
        return KubeHTTP(kube.url, token=kube.tokens["admin"], ca_file=str(kube.dir / "ca.crt"))
    return KubeHTTP(kube.url)


@pytest.fixture
def one_set(kube: Any, kube_backend: str) -> None:
    reset_clients()
    api = _http(kube, kube_backend)
    api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    api.post(
        set_path(NS),
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {"name": "kept", "namespace": NS},
            "spec": {"hibernatePolicy": "retain", "agent": {"image": "img:1"}},
        },
    )


def _names(result: Any) -> list[str]:
    assert result.exit_code == 0, result.output
    return [f"{r['namespace']}/{r['name']}" for r in json.loads(result.stdout)["sets"]]


def _config(kubeconfig: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    return data


def _renamed(kubeconfig: Path, name: str, *, server: str | None = None) -> dict[str, Any]:
    """The fixture's kubeconfig with its cluster, user and context called `name`."""
    cfg = _config(kubeconfig)
    cluster = dict(cfg["clusters"][0]["cluster"])
    if server is not None:
        cluster["server"] = server
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": cfg["users"][0]["user"]}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


@ON_BOTH
def test_home_kube_config_is_read_when_kubeconfig_is_unset(
    one_set: None, kubeconfig: Path, tmp_path: Path
) -> None:
    # The old main: `error: no KUBECONFIG and not running in a cluster`.
    (tmp_path / ".kube").mkdir()
    cfg = _config(kubeconfig)
    cluster = cfg["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        # A CA file beside the kubeconfig, named relative to it (as kubectl resolves it).
        ca = base64.b64decode(cluster.pop("certificate-authority-data"))
        (tmp_path / ".kube" / "ca.crt").write_bytes(ca)
        cluster["certificate-authority"] = "ca.crt"
    (tmp_path / ".kube" / "config").write_text(yaml.safe_dump(cfg), "utf-8")
    result = CliRunner().invoke(status, ["-o", "json"], env=_env(tmp_path))
    assert _names(result) == [f"{NS}/kept"]


def test_no_kubeconfig_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    result = CliRunner().invoke(status, [], env=_env(tmp_path))
    assert result.exit_code == 1
    line = result.output.strip()
    assert line.count("\n") == 0 and line.startswith("error: no kubeconfig")
    assert str(tmp_path / ".kube" / "config") in line


@ON_BOTH
def test_kubeconfig_list_merged_as_kubectl_does_with_context(
    one_set: None, kubeconfig: Path, tmp_path: Path
) -> None:
    dead = "http://127.0.0.1:9"  # nothing listens on the discard port
    first = tmp_path / "first.yaml"
    second = tmp_path / "second.yaml"
    # first: current-context `live`, and a context `dead`; second: defines `live`, and
    # claims current-context `dead`. kubectl takes the first current-context (the
    # library's own merge takes the last), and each name from the first file defining it.
    live = _renamed(kubeconfig, "live")
    dead_cfg = _renamed(kubeconfig, "dead", server=dead)
    first.write_text(yaml.safe_dump({**dead_cfg, "current-context": "live"}), encoding="utf-8")
    second.write_text(yaml.safe_dump({**live, "current-context": "dead"}), encoding="utf-8")
    missing = tmp_path / "missing.yaml"  # skipped, as kubectl skips it
    listed = f"{missing}:{first}:{second}"

    result = CliRunner().invoke(status, ["-o", "json"], env=_env(tmp_path, KUBECONFIG=listed))
    assert _names(result) == [f"{NS}/kept"]

    result = CliRunner().invoke(
        status, ["-o", "json", "--context", "dead"], env=_env(tmp_path, KUBECONFIG=listed)
    )
    assert result.exit_code == 1 and "127.0.0.1:9" in result.output

    only_first = CliRunner().invoke(
        status,
        ["-o", "json", "--context", "live", "--kubeconfig", str(second)],
        env=_env(tmp_path, KUBECONFIG=str(first)),
    )
    assert _names(only_first) == [f"{NS}/kept"]


def test_an_unknown_context_is_one_line(kubeconfig: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        status, ["--context", "nope"], env=_env(tmp_path, KUBECONFIG=str(kubeconfig))
    )
    assert result.exit_code == 1
    assert result.output.strip().startswith("error: context 'nope' is not in kubeconfig")
    assert result.output.strip().count("\n") == 0


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(
            "apiVersion: v1\nclusters: [\n",
            "invalid YAML: line 3, column 1: expected the node content, but found '<stream end>'",
            id="malformed",
        ),
        pytest.param(
            '"just a string"\n',
            "not a kubeconfig (a string; expected a mapping with clusters, users and contexts)",
            id="bare-string",
        ),
        pytest.param(
            "- a\n- b\n",
            "not a kubeconfig (a list; expected a mapping with clusters, users and contexts)",
            id="list",
        ),
    ],
)
@pytest.mark.parametrize("how", ["--kubeconfig", "KUBECONFIG"])
def test_a_kubeconfig_that_is_no_kubeconfig_is_one_line(
    tmp_path: Path, content: str, says: str, how: str
) -> None:
    # Was a yaml.parser.ParserError traceback, or "'str' object does not support item
    # assignment".
    bad = tmp_path / "config"
    bad.write_text(content, encoding="utf-8")
    args, env = (["--kubeconfig", str(bad)], _env(tmp_path))
    if how == "KUBECONFIG":
        args, env = [], _env(tmp_path, KUBECONFIG=str(bad))
    for command in (status, sweep):
        result = CliRunner().invoke(command, args, env=env)
        assert result.exit_code == 1, result.output
        assert result.output == f"error: cannot load kubeconfig {bad}: {says}\n"


def test_v_shows_each_api_call_on_stderr(one_set: None, kubeconfig: Path, tmp_path: Path) -> None:
    # `-v` printed nothing more; kubectl -v=6 shows each request: method, URL, status, time.
    from shared.clients.kube import observe_requests

    env = _env(tmp_path, KUBECONFIG=str(kubeconfig))
    try:
        quiet = CliRunner().invoke(cli, ["status", "-o", "json"], env=env)
        loud = CliRunner().invoke(cli, ["-v", "status", "-o", "json"], env=env)
    finally:
        observe_requests(None)
    assert quiet.exit_code == loud.exit_code == 0, loud.output
    assert "GET " not in quiet.stderr
    assert json.loads(loud.stdout) == json.loads(quiet.stdout)  # stdout stays the answer
    calls = [line for line in loud.stderr.splitlines() if line.startswith("GET ")]
    sets = f"/apis/{k.GROUP}/{k.VERSION}/cocoonsets"
    assert any(sets in line and " 200 in " in line for line in calls), loud.stderr
    assert all(line.endswith(" milliseconds") for line in calls)


# --- a cluster without the CRD ---------------------------------------------------------


@pytest.fixture(scope="module")
def no_crd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig for an API server that does not serve CocoonSets."""
    from devstack.kubeapi import EmbeddedKube

    kube = EmbeddedKube()
    kube.start()
    crd = f"{k.PLURAL}.{k.GROUP}"
    KubeHTTP(kube.url).delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    path: Path = kube.write_kubeconfig(tmp_path_factory.mktemp("nocrd") / "config")
    yield path
    kube.stop()


def test_status_without_the_crd(no_crd: Path, tmp_path: Path) -> None:
    reset_clients()
    result = CliRunner().invoke(status, [], env=_env(tmp_path, KUBECONFIG=str(no_crd)))
    assert result.exit_code == 1
    assert result.output.startswith("error: CocoonSet CRD not installed")
    assert result.output.strip().count("\n") == 0


def test_wake_without_the_crd(no_crd: Path, tmp_path: Path) -> None:
    # The old main read the 404 as "this set does not exist".
    reset_clients()
    result = CliRunner().invoke(wake, [f"{NS}/a"], env=_env(tmp_path, KUBECONFIG=str(no_crd)))
    assert result.exit_code == 1
    assert result.output.startswith("error: CocoonSet CRD not installed")


def test_sweep_dry_run_without_the_crd_fails(no_crd: Path, tmp_path: Path) -> None:
    # The old main printed `nothing to do ... 1 error(s)` and exited 0.
    reset_clients()
    result = CliRunner().invoke(sweep, ["--dry-run"], env=_env(tmp_path, KUBECONFIG=str(no_crd)))
    assert result.exit_code == 1, result.output
    assert "error: sweep met 1 error(s): list sets: CocoonSet CRD not installed" in result.stderr


@ON_BOTH
def test_sweep_takes_the_cluster_options(one_set: None, kubeconfig: Path, tmp_path: Path) -> None:
    reset_clients()
    result = CliRunner().invoke(
        sweep,
        ["--dry-run", "--kubeconfig", str(kubeconfig), "-n", NS, "-o", "json"],
        env=_env(tmp_path),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["dry_run"], summary["sets"], summary["errors"]) == (True, 1, 0)
    # -l is the API server's selector: the full syntax, the server's verdict.
    for selector, sets in (("team in (x,y)", 0), ("!team", 1)):
        selected = CliRunner().invoke(
            sweep,
            ["--dry-run", "--kubeconfig", str(kubeconfig), "-l", selector, "-o", "json"],
            env=_env(tmp_path),
        )
        assert selected.exit_code == 0, selected.output
        assert json.loads(selected.stdout)["sets"] == sets, selector


def test_a_malformed_selector_is_bad_usage(one_set: None, kubeconfig: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        wake, ["-l", "team in (", "--kubeconfig", str(kubeconfig)], env=_env(tmp_path)
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: -l team in (: ")


# --- the command line as a whole ----------------------------------------------------------


def test_version_is_the_wheels() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"cocoon-hibernation {version('cocoon-hibernation')}"


def test_usage_errors_have_the_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["status", "--no-such-option"], prog_name="cocoon-hibernation")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No such option") and "--no-such-option" in err
    assert err.strip().count("\n") == 0


@pytest.mark.parametrize("args", [[], ["devstack"]], ids=["bare", "group"])
def test_no_arguments_is_help_on_stdout_and_exit_0(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    # It printed the help as an error (stderr, exit 2); kubectl prints it and exits 0.
    with pytest.raises(SystemExit) as info:
        cli.main(args, prog_name="cocoon-hibernation")
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"Usage: cocoon-hibernation {' '.join(args)}".rstrip() + " [OPTIONS]")
    assert "Commands:" in out and err == ""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_documents_its_exit_codes(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Exit codes: 0" in text and "1 " in text and "2 bad usage" in text, name


def test_log_lines_follow_v_and_q(capsys: pytest.CaptureFixture[str]) -> None:
    from cocoon_hibernation._common import set_verbosity
    from shared import log

    set_verbosity(0, False)
    log.debug("hidden")
    log.info("hidden too")
    log.warning("shown")
    set_verbosity(2, False)
    log.debug("debug shown")
    set_verbosity(0, True)
    log.warning("quiet hides it")
    err = capsys.readouterr().err
    assert "hidden" not in err and "quiet hides it" not in err
    assert "shown" in err and "debug shown" in err


def test_the_verbosity_options_leave_the_services_logs_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `serve` (a Deployment's or Knative's process) logs JSON on stdout at every level,
    # counters included: the group's -v/-q must not turn that into warnings on stderr.
    from shared import log
    from shared.config import LogFormat

    log.configure(LogFormat.JSON, None)
    assert CliRunner().invoke(cli, ["-q", "crd", "-o", "json"]).exit_code == 0
    capsys.readouterr()
    log.debug("still here")
    out = capsys.readouterr().out
    assert json.loads(out)["message"] == "still here"


@pytest.mark.parametrize("command", [status, wake, sweep], ids=["status", "wake", "sweep"])
def test_a_variable_with_a_bad_value_is_bad_input(command: Any, tmp_path: Path) -> None:
    args = [f"{NS}/a"] if command is wake else []
    env = _env(tmp_path, COCOON_WAKE_DEADLINE="soon")
    result = CliRunner().invoke(command, args, env=env)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: COCOON_WAKE_DEADLINE")
    assert result.output.strip().count("\n") == 0


def test_status_usage_errors_are_two(tmp_path: Path) -> None:
    result = CliRunner().invoke(status, ["-A", "-n", NS], env=_env(tmp_path))
    assert (result.exit_code, result.output.strip()) == (2, "error: -A and -n together")
    bad_output = CliRunner().invoke(status, ["-o", "wide"], env=_env(tmp_path))
    assert bad_output.exit_code == 2
