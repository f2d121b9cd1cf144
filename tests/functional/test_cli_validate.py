"""`cocoon-hibernation validate` and `crd`, driven as a user drives them.

Through click's CliRunner for the tables, and once as a real subprocess of the
installed console script (what `uv run cocoon-hibernation` runs) over every
shipped example.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cocoon_hibernation.cmd_validate import OFFLINE_RULES
from cocoon_hibernation.main import main
from shared.crd import cocoonset_crd
from tests.conftest import REPO_ROOT

CLASS_RE = "'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'"
NAME_RE = "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"
RELEASE = (
    'spec: Invalid value: "object": '
    "hibernatePolicy=release requires agent.replicas=0 and no toolboxes"
)

# examples/invalid/<name>.yaml -> the exact stdout lines after "FILE: "
INVALID_EXAMPLES = {
    "release-with-replicas": [f"default/release-with-replicas: {RELEASE}"],
    "release-with-toolboxes": [f"team-a/release-with-toolboxes: {RELEASE}"],
    "bad-snapshot-class": [
        "default/bad-snapshot-class: spec.snapshotCompatibilityClass: Invalid value: "
        '"intel/sapphire-rapids": spec.snapshotCompatibilityClass in body should match '
        f"{CLASS_RE}"
    ],
    "snapshot-class-too-long": [
        "default/snapshot-class-too-long: spec.snapshotCompatibilityClass: "
        "Too long: may not be more than 63 bytes"
    ],
    "bad-toolbox-name": [
        'default/bad-toolbox-name: spec.toolboxes[0].name: Invalid value: "Web_Browser": '
        f"spec.toolboxes[0].name in body should match {NAME_RE}",
        # cocoon-webhook's rule on the same name (docs/validation.md of cocoon-webhook).
        'default/bad-toolbox-name: cocoon-webhook: spec.toolboxes[0].name "Web_Browser" '
        "must match RFC 1123 label: a lowercase RFC 1123 label must consist of lower case "
        "alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ],
    "port-out-of-range": [
        "default/port-out-of-range: spec.agent.probePort: Invalid value: 70000: "
        "spec.agent.probePort in body should be less than or equal to 65535",
        "default/port-out-of-range: spec.toolboxes[0].vncPort: Invalid value: -1: "
        "spec.toolboxes[0].vncPort in body should be greater than or equal to 0",
    ],
    "bad-enum": [
        'default/bad-enum: spec.hibernatePolicy: Unsupported value: "delete": '
        'supported values: "retain", "release"',
        "default/bad-enum: cocoon-webhook: spec.hibernatePolicy must be retain or release, "
        'got "delete"',
    ],
}
INVALID_EXAMPLES.update(
    {
        "typo-field": [
            'default/typo-field: spec.hibernatPolicy: unknown field "spec.hibernatPolicy"'
        ],
        "clone-image-with-port": [
            "default/clone-image-with-port: cocoon-webhook: spec.agent.image "
            '"registry.local:5000/agent:1" must be repo[:tag] when mode is clone '
            "(no registry port or digest)"
        ],
        "bad-idle-timeout": [
            "default/bad-idle-timeout: "
            "metadata.annotations[cocoonset.cocoonstack.io/idle-timeout]: "
            'Invalid value: "30 minutes": '
            "invalid duration '30 minutes' (expected e.g. 45s, 30m, 2h)"
        ],
    }
)
VALID_EXAMPLES = ["examples/valid/release-set.yaml", "examples/valid/retain-set.yaml"]


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # Paths in the output are as given on the command line: run from the repo root.
    monkeypatch.chdir(REPO_ROOT)
    return CliRunner()


def test_every_invalid_example_is_covered() -> None:
    shipped = {p.stem for p in (REPO_ROOT / "examples" / "invalid").glob("*.yaml")}
    assert shipped == set(INVALID_EXAMPLES)


def test_valid_examples_pass(runner: CliRunner) -> None:
    result = runner.invoke(main, ["validate", *VALID_EXAMPLES])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert (
        result.stderr
        == "checked 2 CocoonSets in 2 files (2 other documents skipped); " + OFFLINE_RULES + "\n"
    )


@pytest.mark.parametrize("name", sorted(INVALID_EXAMPLES))
def test_each_invalid_example_fails_with_its_message(runner: CliRunner, name: str) -> None:
    path = f"examples/invalid/{name}.yaml"
    result = runner.invoke(main, ["validate", path])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"{path}: {line}" for line in INVALID_EXAMPLES[name]]
    assert result.stderr == "checked 1 CocoonSet in 1 file; " + OFFLINE_RULES + "\n"


def test_json_list_and_multi_document_input(runner: CliRunner, tmp_path: Path) -> None:
    bad = {
        "apiVersion": "cocoonset.cocoonstack.io/v1",
        "kind": "CocoonSet",
        "metadata": {"name": "j", "namespace": "n"},
        "spec": {"agent": {"image": "i", "replicas": -1}},
    }
    as_json = tmp_path / "list.json"
    as_json.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [bad]}))
    multi = tmp_path / "multi.yaml"
    multi.write_text(
        "---\n"
        + yaml.safe_dump({**bad, "spec": {"agent": {"image": "i"}}})
        + "---\n---\n"  # an empty document is no document
        + yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    )
    result = runner.invoke(main, ["validate", str(as_json), str(multi)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{as_json}: n/j: spec.agent.replicas: Invalid value: -1: "
        "spec.agent.replicas in body should be greater than or equal to 0",
        f"{as_json}: n/j: cocoon-webhook: spec.agent.replicas must be >= 0, got -1",
    ]
    assert (
        result.stderr
        == "checked 2 CocoonSets in 2 files (1 other document skipped); " + OFFLINE_RULES + "\n"
    )


def test_stdin(runner: CliRunner) -> None:
    text = (REPO_ROOT / "examples/invalid/bad-enum.yaml").read_text()
    result = runner.invoke(main, ["validate", "-"], input=text)
    assert result.exit_code == 1
    assert result.stdout.startswith("-: default/bad-enum: spec.hibernatePolicy: Unsupported value")


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        pytest.param("missing.yaml", None, "missing.yaml: no such file", id="missing"),
        pytest.param(
            "broken.yaml",
            "kind: CocoonSet\nspec: [unclosed\n",
            "broken.yaml: invalid YAML: line 3, column 1: "
            "expected ',' or ']', but got '<stream end>'",
            id="bad-yaml",
        ),
        pytest.param(
            "broken.json",
            '{"kind": "CocoonSet",}',
            "broken.json: invalid JSON: line 1, column 22: Expecting property name enclosed in "
            "double quotes",
            id="bad-json",
        ),
        pytest.param(
            "binary.yaml", b"\xff\xfe\x00", "binary.yaml: not UTF-8 text (byte 0)", id="binary"
        ),
    ],
)
def test_unreadable_input_is_one_line_and_exit_2(
    runner: CliRunner, tmp_path: Path, name: str, content: str | bytes | None, error: str
) -> None:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    ok = REPO_ROOT / VALID_EXAMPLES[0]
    result = runner.invoke(main, ["validate", str(path), str(ok)])
    assert result.exit_code == 2
    assert result.stdout == ""
    # The readable file is still checked; the broken one is a single line.
    assert result.stderr.splitlines() == [
        f"error: {tmp_path}/{error}",
        "checked 1 CocoonSet in 1 file (1 other document skipped); " + OFFLINE_RULES,
    ]


def test_no_files_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(main, ["validate"])
    assert result.exit_code == 2
    assert "Missing argument 'FILE…'" in result.stderr


def test_crd_prints_the_generated_crd(runner: CliRunner) -> None:
    as_yaml = runner.invoke(main, ["crd"])
    as_json = runner.invoke(main, ["crd", "-o", "json"])
    assert as_yaml.exit_code == as_json.exit_code == 0
    assert yaml.safe_load(as_yaml.stdout) == cocoonset_crd()
    assert json.loads(as_json.stdout) == cocoonset_crd()


def test_help_lists_commands_without_importing_them() -> None:
    # A fresh interpreter: `--help` must not load a command module (or pydantic,
    # which every command that reads CocoonSets pulls in), so it stays fast.
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from cocoon_hibernation.main import main\n"
        "r = CliRunner().invoke(main, ['--help'])\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m.startswith('cocoon_hibernation.cmd_') or m == 'pydantic')\n"
        "print(r.exit_code, loaded)\n"
        "print(r.output)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("0 []\n")
    # The summary column is as wide as the longest command name.
    assert re.search(r"\n  validate +Check CocoonSet manifests as kube-apiserver would\.", out)
    assert re.search(r"\n  crd +Print the CocoonSet CRD generated from the models\.", out)
    assert re.search(r"\n  deploy-check +What would fail before terraform apply\.", out)


def _console_script() -> str:
    beside = Path(sys.executable).parent / "cocoon-hibernation"
    found = str(beside) if beside.exists() else shutil.which("cocoon-hibernation")
    if found is None:
        pytest.skip("the console script is not installed (run `uv sync`)")
    return found


def test_the_console_script_over_all_examples() -> None:
    invalid = [f"examples/invalid/{name}.yaml" for name in sorted(INVALID_EXAMPLES)]
    proc = subprocess.run(
        [_console_script(), "validate", *VALID_EXAMPLES, *invalid],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    expected = [
        f"examples/invalid/{name}.yaml: {line}"
        for name in sorted(INVALID_EXAMPLES)
        for line in INVALID_EXAMPLES[name]
    ]
    assert proc.stdout.splitlines() == expected
    n = len(VALID_EXAMPLES) + len(INVALID_EXAMPLES)
    assert (
        proc.stderr
        == f"checked {n} CocoonSets in {n} files (2 other documents skipped); {OFFLINE_RULES}\n"
    )

    valid = subprocess.run(
        [_console_script(), "validate", *VALID_EXAMPLES],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (valid.returncode, valid.stdout) == (0, "")


# A check that checked nothing must not pass: each input below exits 1 with one line
# saying why (stdout the finding, or stderr the error when there is no finding).
SET = "metadata: {name: a, namespace: n}\nspec: {agent: {image: agent}}\n"


@pytest.mark.parametrize(
    ("content", "stdout", "stderr"),
    [
        pytest.param(
            "", "", "error: no CocoonSet in the input: checked 0 CocoonSets in 1 file", id="empty"
        ),
        pytest.param(
            "---\n---\n",
            "",
            "error: no CocoonSet in the input: checked 0 CocoonSets in 1 file",
            id="only-separators",
        ),
        pytest.param(
            "[1, 2, 3]\n",
            "F: document 1: not a Kubernetes object (a list)",
            "checked 0 CocoonSets in 1 file; " + OFFLINE_RULES,
            id="list",
        ),
        pytest.param(
            "hello\n",
            'F: document 1: not a Kubernetes object (a string, "hello")',
            "checked 0 CocoonSets in 1 file; " + OFFLINE_RULES,
            id="bare-string",
        ),
        pytest.param(
            "apiVersion: cocoonset.cocoonstack.io/v1\nkind: Cocoonset\n" + SET,
            'F: n/a: kind: Unsupported value: "Cocoonset": supported values: "CocoonSet"',
            "checked 1 CocoonSet in 1 file; " + OFFLINE_RULES,
            id="kind-case",
        ),
        pytest.param(
            "apiVersion: cocoonstack.io/v1\nkind: CocoonSet\n" + SET,
            'F: n/a: apiVersion: Unsupported value: "cocoonstack.io/v1": '
            'supported values: "cocoonset.cocoonstack.io/v1"',
            "checked 1 CocoonSet in 1 file; " + OFFLINE_RULES,
            id="wrong-api-version",
        ),
        pytest.param(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
            "",
            "error: no CocoonSet in the input: checked 0 CocoonSets in 1 file "
            "(1 other document skipped)",
            id="no-cocoonset",
        ),
        pytest.param(
            "apiVersion: cocoonset.cocoonstack.io/v1\nkind: CocoonSet\n"
            "metadata:\n  name: a\n  namespace: n\n  annotations:\n"
            "    cocoonset.cocoonstack.io/idel-timeout: 30m\n"
            "spec: {agent: {image: agent}}\n",
            "F: n/a: metadata.annotations[cocoonset.cocoonstack.io/idel-timeout]: unknown "
            'annotation key "cocoonset.cocoonstack.io/idel-timeout": the functions ignore it '
            '(did you mean "cocoonset.cocoonstack.io/idle-timeout"?)',
            "checked 1 CocoonSet in 1 file; " + OFFLINE_RULES,
            id="misspelt-annotation-key",
        ),
    ],
)
def test_what_checked_nothing_fails_with_one_line(
    runner: CliRunner, tmp_path: Path, content: str, stdout: str, stderr: str
) -> None:
    with runner.isolated_filesystem(temp_dir=tmp_path):
        (Path.cwd() / "F").write_text(content)
        result = runner.invoke(main, ["validate", "F"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ([stdout] if stdout else [])
    assert result.stderr.splitlines() == [stderr]


def test_annotation_keys_the_project_and_the_operator_use_pass(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(
        "apiVersion: cocoonset.cocoonstack.io/v1\nkind: CocoonSet\n"
        "metadata:\n  name: a\n  namespace: n\n  annotations:\n"
        "    cocoonset.cocoonstack.io/idle-timeout: 30m\n"
        "    cocoonset.cocoonstack.io/reclaimable-after: 1h\n"
        "    cocoonset.cocoonstack.io/hibernated-on-node: node-1\n"
        "    cocoonset.cocoonstack.io/hibernated-image: agent\n"
        "    example.com/anything: goes\n"
        "spec: {agent: {image: agent}}\n"
    )
    result = runner.invoke(main, ["validate", str(path)])
    assert (result.exit_code, result.stdout) == (0, "")


def test_json_output_carries_counts_and_each_violation(runner: CliRunner) -> None:
    bad = "examples/invalid/bad-enum.yaml"
    result = runner.invoke(main, ["validate", "-o", "json", *VALID_EXAMPLES, bad])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["valid"], report["files"], report["cocoonsets"], report["skipped"]) == (
        False,
        3,
        3,
        2,
    )
    assert [v["file"] for v in report["violations"]] == [bad, bad]
    assert report["violations"][0]["object"] == "default/bad-enum"
    assert report["violations"][0]["message"].startswith("spec.hibernatePolicy: Unsupported value")
    ok = runner.invoke(main, ["validate", "-o", "json", *VALID_EXAMPLES])
    assert ok.exit_code == 0
    assert json.loads(ok.stdout)["valid"] is True
