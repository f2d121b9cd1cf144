"""cocoon-webhook's rules as this project applies them: `validate`, and the refusals'
classification.

The expected messages are cocoon-webhook's own (admission/pod_mutator.go at a281f3e;
the CocoonSet rules from admission/cocoonset_validator.go, the version named by
`shared.admission.RULES_SOURCE`), written out here as text so a drift of ours from
them fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from cocoon_hibernation.cmd_validate import check_files
from shared import admission as adm
from shared import constants as k
from shared import names
from shared.clients.kube import translate
from shared.errors import AdmissionDenied, PermanentError, WebhookDenied

IMG = "ghcr.io/acme/agent:1"


def _set(spec: dict[str, Any], annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": meta, "spec": spec}


def _validate(tmp_path: Path, obj: dict[str, Any]) -> tuple[int, list[str]]:
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump(obj))
    report = check_files([str(path)])
    return report.exit_code, [v.split(": ", 2)[2] for v in report.violations]


WEBHOOK_RULES = [
    ({"agent": {"image": ""}}, "spec.agent.image is required"),
    ({"agent": {"image": IMG, "replicas": -1}}, "spec.agent.replicas must be >= 0, got -1"),
    ({"agent": {"image": IMG, "mode": "fork"}}, 'spec.agent.mode must be clone or run, got "fork"'),
    (
        {"agent": {"image": IMG, "os": "plan9"}},
        'spec.agent.os must be linux, windows, android, or macos, got "plan9"',
    ),
    (
        {"agent": {"image": IMG, "connType": "telnet"}},
        'spec.agent.connType must be ssh, rdp, vnc, or adb, got "telnet"',
    ),
    (
        {"agent": {"image": IMG, "backend": "qemu"}},
        'spec.agent.backend must be cloud-hypervisor or firecracker, got "qemu"',
    ),
    (
        {"agent": {"image": IMG, "mode": "run", "backend": "firecracker", "os": "windows"}},
        "spec.agent: firecracker does not support Windows guests",
    ),
    (
        {"agent": {"image": "https://x/img.qcow2", "mode": "run", "backend": "firecracker"}},
        "spec.agent: firecracker requires an OCI image, cloudimg URLs are not supported "
        '(got "https://x/img.qcow2")',
    ),
    (
        {"agent": {"image": IMG, "backend": "firecracker"}},
        "spec.agent: firecracker does not support clone mode, use mode=run instead",
    ),
    (
        {"agent": {"image": "registry.local:5000/agent:1"}},
        'spec.agent.image "registry.local:5000/agent:1" must be repo[:tag] when mode is clone '
        "(no registry port or digest)",
    ),
    (
        {"agent": {"image": "agent@sha256:" + "a" * 64}},
        f'spec.agent.image "agent@sha256:{"a" * 64}" must be repo[:tag] when mode is clone '
        "(no registry port or digest)",
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "", "image": IMG}]},
        "spec.toolboxes[0].name is required",
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "7", "image": IMG}]},
        'spec.toolboxes[0].name "7" must not be purely numeric (conflicts with agent slot naming)',
    ),
    (
        {
            "agent": {"image": IMG},
            "toolboxes": [{"name": "web", "image": IMG}, {"name": "web", "image": IMG}],
        },
        'spec.toolboxes[1].name "web" duplicates an earlier toolbox',
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "web", "image": IMG, "mode": "fork"}]},
        'spec.toolboxes[0].mode must be run, clone, or static, got "fork"',
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "web", "mode": "static"}]},
        "spec.toolboxes[0].staticIP is required when mode=static",
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "web", "mode": "static"}]},
        "spec.toolboxes[0].staticVMID is required when mode=static",
    ),
    (
        {"agent": {"image": IMG}, "toolboxes": [{"name": "web"}]},
        "spec.toolboxes[0].image is required when mode is run or clone",
    ),
    (
        {
            "agent": {"image": IMG},
            "toolboxes": [{"name": "web", "image": IMG, "backend": "firecracker"}],
        },
        'spec.toolboxes[0].backend "firecracker" must match spec.agent.backend "cloud-hypervisor"',
    ),
    (
        {"agent": {"image": IMG}, "snapshotPolicy": "sometimes"},
        'spec.snapshotPolicy must be always, main-only, or never, got "sometimes"',
    ),
    (
        {"agent": {"image": IMG}, "hibernatePolicy": "delete"},
        'spec.hibernatePolicy must be retain or release, got "delete"',
    ),
]


@pytest.mark.parametrize(("spec", "message"), WEBHOOK_RULES, ids=[m[:48] for _, m in WEBHOOK_RULES])
def test_validate_applies_each_webhook_rule_with_its_message(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    code, found = _validate(tmp_path, _set(spec))
    assert code == 1
    assert f"cocoon-webhook: {message}" in found
    assert message in adm.cocoonset_refusal(_set(spec)).removeprefix(adm.MSG_SPEC_PREFIX)


def test_static_toolboxes_skip_the_image_and_backend_rules_but_keep_conn_type() -> None:
    ok = {"name": "win", "mode": "static", "staticIP": "10.0.0.9", "staticVMID": "v1"}
    assert adm.cocoonset_errors(_set({"agent": {"image": IMG}, "toolboxes": [ok]})) == []
    bad = {**ok, "connType": "telnet"}
    assert adm.cocoonset_errors(_set({"agent": {"image": IMG}, "toolboxes": [bad]})) == [
        'spec.toolboxes[0].connType must be ssh, rdp, vnc, or adb, got "telnet"'
    ]


def test_a_valid_set_passes_and_macos_is_accepted(tmp_path: Path) -> None:
    code, found = _validate(tmp_path, _set({"agent": {"image": IMG, "os": "macos"}}))
    assert (code, found) == (0, [])


def test_spec_unchanged_updates_skip_the_rules() -> None:
    bad = _set({"agent": {"image": "registry.local:5000/a:1"}, "suspend": True})
    relabelled = {**bad, "metadata": {**bad["metadata"], "labels": {"x": "y"}}}
    assert adm.cocoonset_refusal(relabelled, old=bad) is None
    # spec.suspend is a spec change: the functions' writes are judged.
    woken = {**bad, "spec": {**bad["spec"], "suspend": False}}
    assert adm.cocoonset_refusal(woken, old=bad) is not None


# --- unknown fields and the project's annotations ---------------------------------------


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (_set({"agent": {"image": IMG}, "hibernatPolicy": "release"}), "spec.hibernatPolicy"),
        (_set({"agent": {"image": IMG, "replica": 0}}), "spec.agent.replica"),
        (
            _set({"agent": {"image": IMG}, "toolboxes": [{"name": "w", "image": IMG, "vnc": 1}]}),
            "spec.toolboxes[0].vnc",
        ),
        ({**_set({"agent": {"image": IMG}}), "sepc": {}}, "sepc"),
        (
            {
                **_set({"agent": {"image": IMG}}),
                "metadata": {"name": "s", "annotation": {k.ANN_IDLE_TIMEOUT: "30m"}},
            },
            "metadata.annotation",
        ),
    ],
    ids=["hibernatPolicy", "agent.replica", "toolbox.vnc", "top-level", "metadata"],
)
def test_unknown_fields_are_flagged(tmp_path: Path, obj: dict[str, Any], field: str) -> None:
    code, found = _validate(tmp_path, obj)
    assert code == 1
    assert f'{field}: unknown field "{field}"' in found


BAD_ANNOTATIONS = {
    k.ANN_IDLE_TIMEOUT: "30 minutes",
    k.ANN_SLEEP_SCHEDULE: "every night",
    k.ANN_WAKE_SCHEDULE: "0 8 * * 1-5",  # no time zone
    k.ANN_RECLAIMABLE_AFTER: "soon",
    k.ANN_IDLE_CPU_BELOW: "little",
    k.ANN_LAST_ACTIVITY: "yesterday",
    k.ANN_IDLE_EXEMPT_UNTIL: "2026-13-01T00:00:00Z",
}


@pytest.mark.parametrize(("key", "value"), BAD_ANNOTATIONS.items(), ids=list(BAD_ANNOTATIONS))
def test_bad_annotation_values_are_flagged(tmp_path: Path, key: str, value: str) -> None:
    code, found = _validate(tmp_path, _set({"agent": {"image": IMG}}, {key: value}))
    assert code == 1
    assert [f for f in found if f.startswith(f"metadata.annotations[{key}]")], found


def test_good_annotation_values_pass(tmp_path: Path) -> None:
    good = {
        k.ANN_IDLE_TIMEOUT: "30m",
        k.ANN_SLEEP_SCHEDULE: "0 20 * * 1-5 UTC",
        k.ANN_WAKE_SCHEDULE: "0 8 * * 1-5 Europe/Berlin",
        k.ANN_RECLAIMABLE_AFTER: "2h",
        k.ANN_IDLE_CPU_BELOW: "50m",
        k.ANN_LAST_ACTIVITY: "2026-01-01T00:00:00Z",
        k.ANN_IDLE_EXEMPT_UNTIL: "2026-02-01T00:00:00+01:00",
    }
    spec = {"agent": {"image": IMG}, "hibernatePolicy": "release"}
    assert _validate(tmp_path, _set(spec, good)) == (0, [])


# --- the pod rule and the refusal's classification ----------------------------------------


def _pod(tolerate: bool = True, owned: bool = True) -> dict[str, Any]:
    owners = [{"kind": "CocoonSet", "name": "s"}] if owned else []
    tolerations = [{"key": adm.TOLERATION_KEY, "operator": "Exists"}] if tolerate else []
    return {"metadata": {"ownerReferences": owners}, "spec": {"tolerations": tolerations}}


def test_pod_rule() -> None:
    creators = adm.parse_creators(adm.DEFAULT_POD_CREATORS + ", cocoon-wake@p.iam")
    assert adm.pod_refusal(_pod(tolerate=False), "anyone", creators) is None
    assert adm.pod_refusal(_pod(owned=False), "cocoon-wake@p.iam", creators) == adm.MSG_BARE_POD
    assert adm.pod_refusal(_pod(), "cocoon-wake@p.iam", creators) is None
    assert adm.pod_refusal(_pod(), "u@p", creators) == (
        'cocoon pods must be created by the CocoonSet controller, got user "u@p"'
    )


def _denied(status: int, message: str) -> ApiException:
    err = ApiException(status=status, reason="Bad Request")
    err.body = json.dumps({"kind": "Status", "reason": "Forbidden", "message": message})
    return err


def test_the_webhooks_refusal_is_a_typed_admission_denial_naming_webhook_user_and_fix() -> None:
    user = "cocoon-wake@p.iam.gserviceaccount.com"
    # How kube-apiserver renders cocoon-webhook's Deny (no code: 400).
    message = f'admission webhook "{adm.POD_WEBHOOK}" denied the request: ' + adm.creator_message(
        user
    )
    err = translate(_denied(400, message), "CREATE pod team-a/agent-0")
    assert isinstance(err, WebhookDenied)
    assert isinstance(err, AdmissionDenied) and isinstance(err, PermanentError)
    assert (err.webhook, err.user) == (adm.POD_WEBHOOK, user)
    assert f"POD_CREATORS={adm.DEFAULT_POD_CREATORS},{user}" in err.fix
    assert err.server_message == message


def test_a_cocoonset_refusal_points_at_validate() -> None:
    message = (
        f'admission webhook "{adm.COCOONSET_WEBHOOK}" denied the request: '
        f"{adm.MSG_SPEC_PREFIX}spec.agent.image is required"
    )
    err = translate(_denied(400, message), "PATCH cocoonset team-a/agent")
    assert isinstance(err, WebhookDenied) and err.user == ""
    assert "cocoon-hibernation validate" in err.fix


def test_a_plain_400_is_still_a_plain_permanent_error() -> None:
    err = translate(_denied(400, "the body is not a Pod"), "CREATE pod")
    assert type(err) is PermanentError


# --- told once per situation; a later wake is told again ------------------------------------


class _Events:
    """Only emit_event (the report's one request): named Events, as the server keeps them."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def emit_event(self, cs: Any, *, reason: str, message: str, type: str, key: str) -> bool:
        if key in self.names:
            return False  # AlreadyExists
        self.names[key] = message
        return True


def test_a_refusal_is_told_once_per_generation_and_counted_with_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from shared.models import CocoonSet
    from shared.refusal import METRIC_ADMISSION_REFUSED, report_refusal

    user = "cocoon-wake@p.iam.gserviceaccount.com"
    message = f'admission webhook "{adm.POD_WEBHOOK}" denied the request: ' + adm.creator_message(
        user
    )
    err = translate(_denied(400, message), "CREATE pod")
    assert isinstance(err, WebhookDenied)
    events = _Events()
    cs = CocoonSet.model_validate(
        {
            **_set({"agent": {"image": IMG}}),
            "metadata": {"name": "s", "namespace": "ns", "generation": 4},
        }
    )
    assert report_refusal(events, cs, "CreateMain", err) is True  # type: ignore[arg-type]
    assert report_refusal(events, cs, "CreateMain", err) is False  # type: ignore[arg-type]
    (text,) = events.names.values()
    assert adm.POD_WEBHOOK in text and user in text and "POD_CREATORS=" in text
    # The next wake (the generation moved with spec.suspend) is a new situation.
    later = cs.model_copy(update={"metadata": cs.metadata.model_copy(update={"generation": 6})})
    assert report_refusal(events, later, "CreateMain", err) is True  # type: ignore[arg-type]
    counts = [
        line for line in capsys.readouterr().out.splitlines() if METRIC_ADMISSION_REFUSED in line
    ]
    assert len(counts) == 2


# --- deploy-check's admission part, decided from the cluster's answers ---------------------


class _Cluster:
    def __init__(self, configs: dict[str, list[dict[str, Any]]], refuse: set[str]) -> None:
        self.configs, self.refuse = configs, refuse
        self.created: list[tuple[str, str | None]] = []

    def list_webhook_configurations(self) -> dict[str, list[dict[str, Any]]]:
        return self.configs

    def list_sets(self, namespace: str | None) -> Any:
        return iter([])

    def get_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        env = [{"name": "POD_CREATORS", "value": adm.DEFAULT_POD_CREATORS + ",ci-bot"}]
        return {"spec": {"template": {"spec": {"containers": [{"env": env}]}}}}

    def dry_run_create_pod(
        self, namespace: str, body: dict[str, Any], *, as_user: str | None = None
    ) -> dict[str, Any]:
        self.created.append((namespace, as_user))
        if as_user in self.refuse:
            msg = adm.pod_refusal(body, as_user or "", [adm.DEFAULT_POD_CREATORS])
            raise translate(
                _denied(400, f'admission webhook "{adm.POD_WEBHOOK}" denied the request: {msg}'),
                "CREATE pod",
            )
        return body


WEBHOOK_CONFIGS = {
    "mutating": [{"metadata": {"name": "cw"}, "webhooks": [{"name": adm.POD_WEBHOOK}]}]
}


def test_deploy_check_admission_keeps_the_current_entries_in_its_fix() -> None:
    from cocoon_hibernation.cmd_deploy_check import Level
    from cocoon_hibernation.deploy_check_admission import admission_findings

    users = {"a@p.iam", "b@p.iam"}
    cluster = _Cluster(WEBHOOK_CONFIGS, refuse={"a@p.iam"})
    (f,) = admission_findings(cluster, users=users, namespaces=["ns"])
    assert f.level is Level.FAIL
    assert f"POD_CREATORS={adm.DEFAULT_POD_CREATORS},ci-bot,a@p.iam,b@p.iam" in f.message
    assert sorted(cluster.created) == [("ns", "a@p.iam"), ("ns", "b@p.iam")]


def test_deploy_check_admission_without_the_webhook_or_namespaces() -> None:
    from cocoon_hibernation.cmd_deploy_check import Level
    from cocoon_hibernation.deploy_check_admission import admission_findings

    (none,) = admission_findings(_Cluster({"mutating": []}, set()), users={"a"}, namespaces=["ns"])
    assert none.level is Level.OK and "not installed" in none.message
    (empty,) = admission_findings(_Cluster(WEBHOOK_CONFIGS, set()), users={"a"}, namespaces=[])
    assert empty.level is Level.FAIL  # could not prove it: never a silent pass


def test_a_reclaim_victim_the_webhook_refuses_is_told_once_and_skipped() -> None:
    from datetime import UTC, datetime, timedelta

    from shared.models import CocoonSet
    from shared.seats.reclaim.decide import Candidate
    from shared.seats.reclaim.executor import _suspend_victim

    message = (
        f'admission webhook "{adm.COCOONSET_WEBHOOK}" denied the request: '
        f"{adm.MSG_SPEC_PREFIX}spec.toolboxes[0].image is required when mode is run or clone"
    )

    class Kube(_Events):
        def patch_set(self, ref: Any, patch: Any, *, resource_version: Any = None) -> Any:
            raise translate(_denied(400, message), f"PATCH cocoonset {ref}")

    victim = CocoonSet.model_validate(_set({"agent": {"image": IMG}, "hibernatePolicy": "release"}))
    waker = CocoonSet.model_validate(
        {**_set({"agent": {"image": IMG}}), "metadata": {"name": "w", "namespace": "ns"}}
    )
    cand = Candidate(cs=victim, idle_for=timedelta(hours=2), reclaimable_after=timedelta(hours=1))
    kube = Kube()
    now = datetime.now(UTC)
    assert _suspend_victim(kube, cand, waker, now) is None  # type: ignore[arg-type]
    assert _suspend_victim(kube, cand, waker, now) is None  # type: ignore[arg-type]
    (text,) = kube.names.values()
    assert text.startswith("seat reclaim suspend refused by the admission webhook")
    assert adm.COCOONSET_WEBHOOK in text


def _named(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    obj = _set(spec)
    obj["metadata"]["name"] = name
    return obj


def test_the_derived_vm_name_may_be_46_characters_and_no_more(tmp_path: Path) -> None:
    # vk-ns-<set>-0-<6 hex>: a 31-character set name makes 46 characters.
    fits = "a" * 31
    assert len(names.vm_name("ns", fits, 0)) == names.MANAGED_VM_NAME_MAX == 46
    assert adm.cocoonset_errors(_named(fits, {"agent": {"image": IMG}})) == []

    long_name = "a" * 32
    vm = names.vm_name("ns", long_name, 0)
    code, found = _validate(tmp_path, _named(long_name, {"agent": {"image": IMG}}))
    assert code == 1
    assert found == [
        f'cocoon-webhook: spec.agent derives VM name "{vm}" (47 characters); '
        "maximum is 46 to reserve the hibernate import suffix"
    ]


def test_the_vm_name_is_that_of_the_highest_slot() -> None:
    # replicas=10 derives slot 10's name (two digits), one character longer than slot 0's.
    spec = {"agent": {"image": IMG, "replicas": 10}}
    vm = names.vm_name("ns", "a" * 31, 10)
    assert adm.cocoonset_errors(_named("a" * 31, spec)) == [
        f'spec.agent derives VM name "{vm}" (47 characters); '
        "maximum is 46 to reserve the hibernate import suffix"
    ]


def test_a_macos_agent_may_derive_up_to_63_characters() -> None:
    spec = {"agent": {"image": IMG, "os": "macos"}}
    assert adm.cocoonset_errors(_named("a" * 48, spec)) == []
    vm = names.vm_name("ns", "a" * 49, 0)
    assert adm.cocoonset_errors(_named("a" * 49, spec)) == [
        f'spec.agent derives VM name "{vm}" (64 characters); maximum is 63'
    ]


def test_a_toolbox_vm_name_is_held_to_the_limit_unless_static() -> None:
    # vk-ns-<set>-<toolbox>-<6 hex>: 14 + 20 + 12 = 46 fits, a 13-character toolbox does not.
    set_name = "s" * 20
    ok = {"agent": {"image": IMG}, "toolboxes": [{"name": "b" * 12, "image": IMG}]}
    assert adm.cocoonset_errors(_named(set_name, ok)) == []
    long_tb = {"agent": {"image": IMG}, "toolboxes": [{"name": "b" * 13, "image": IMG}]}
    vm = names.toolbox_vm_name("ns", set_name, "b" * 13)
    assert adm.cocoonset_errors(_named(set_name, long_tb)) == [
        f'spec.toolboxes[0] derives VM name "{vm}" (47 characters); '
        "maximum is 46 to reserve the hibernate import suffix"
    ]
    static = {"name": "b" * 13, "mode": "static", "staticIP": "10.0.0.9", "staticVMID": "v1"}
    assert (
        adm.cocoonset_errors(_named(set_name, {"agent": {"image": IMG}, "toolboxes": [static]}))
        == []
    )
