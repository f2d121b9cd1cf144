"""The Deployment variant's NetworkPolicy admits the callers that exist, and no one else.

Checked statically: no CNI here enforces NetworkPolicy (the local kube-apiserver
has no network plugin), so the rendered policy is evaluated by the rules of the
NetworkPolicy API (peers OR'ed, a peer's selectors AND'ed, ports per rule)
against the pods and addresses a cluster would send, and the server-side dry run
(test_kustomize.py) validates its schema.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.deploy.test_kustomize import FILLED, _copy, _render

pytestmark = pytest.mark.needs_tool("kubectl")

SERVE_NS = "cocoon-system"
PORT = 8080
Peer = tuple[str, dict[str, str], str | None]  # (namespace, pod labels, source IP)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _render(_copy(tmp_path_factory.mktemp("k8s"), FILLED, ["deployment"]))


def _policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    return dict(found["spec"])


@pytest.fixture(scope="module")
def policy(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    return _policy(rendered)


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        assert expr["operator"] == "In", "extend this evaluator for the new operator"
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def _peer_admits(peer: dict[str, Any], src: Peer) -> bool:
    namespace, labels, ip = src
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        if ip is None or ipaddress.ip_address(ip) not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(
            ipaddress.ip_address(ip) in ipaddress.ip_network(c) for c in block.get("except", [])
        )
    if ip is not None and namespace == "":
        return False  # an address outside the cluster's pods matches only an ipBlock
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": namespace}
        if not _matches(peer["namespaceSelector"], ns_labels):
            return False
    elif namespace != SERVE_NS:
        return False  # a podSelector alone selects the policy's own namespace
    return _matches(peer.get("podSelector") or {}, labels)


def admits(policy: dict[str, Any], src: Peer, port: int = PORT) -> bool:
    for rule in policy.get("ingress") or []:
        ports = rule.get("ports")
        if ports and not any(p.get("port") in (port, "http") for p in ports):
            continue
        peers = rule.get("from")
        if not peers or any(_peer_admits(p, src) for p in peers):
            return True
    return False


APISERVER_ADAPTER = {"eventing.knative.dev/source": "apiserver-source-controller"}
PING_ADAPTER = {
    "eventing.knative.dev/source": "ping-source-controller",
    "sources.knative.dev/role": "adapter",
}


def _name(source: str) -> dict[str, str]:
    return {"eventing.knative.dev/sourceName": source}


CALLERS: dict[str, Peer] = {
    # Knative Eventing's labels on its adapters' pods (docs/security.md cites the version).
    "the release source's adapter": (
        SERVE_NS,
        {**APISERVER_ADAPTER, **_name("cocoon-release")},
        None,
    ),
    "the wake source's adapter": (SERVE_NS, {**APISERVER_ADAPTER, **_name("cocoon-wake")}, None),
    "PingSource adapter": ("knative-eventing", PING_ADAPTER, None),
    "the registry": (
        FILLED["registryNamespace"],
        {"app.kubernetes.io/name": "docker-registry"},
        None,
    ),
    "Prometheus": (FILLED["prometheusNamespace"], {"app.kubernetes.io/name": "prometheus"}, None),
    "the API server's audit webhook": ("", {}, "10.0.0.5"),
}
STRANGERS: dict[str, Peer] = {
    "a tenant's pod": ("team-a", {"app": "agent"}, None),
    "a tenant's pod labelled like the registry": (
        "team-a",
        {"app.kubernetes.io/name": "docker-registry"},
        None,
    ),
    "another pod in the registry's namespace": (FILLED["registryNamespace"], {"app": "x"}, None),
    "a pod in Prometheus's namespace that is not Prometheus": (
        FILLED["prometheusNamespace"],
        {"app.kubernetes.io/name": "grafana"},
        None,
    ),
    "an address outside the control plane": ("", {}, "10.0.0.99"),
    "another pod in serve's namespace": (
        SERVE_NS,
        {"app.kubernetes.io/name": "cocoon-operator"},
        None,
    ),
    "another ApiServerSource's adapter there": (
        SERVE_NS,
        {**APISERVER_ADAPTER, **_name("other")},
        None,
    ),
    "a tenant's pod labelled like an adapter": (
        "team-a",
        {**APISERVER_ADAPTER, **_name("cocoon-wake")},
        None,
    ),
    "another pod in Knative Eventing's namespace": (
        "knative-eventing",
        {"app.kubernetes.io/name": "eventing-controller"},
        None,
    ),
}


@pytest.mark.parametrize("caller", list(CALLERS))
def test_each_caller_that_exists_is_admitted_on_the_serving_port(
    policy: dict[str, Any], caller: str
) -> None:
    assert admits(policy, CALLERS[caller])
    assert not admits(policy, CALLERS[caller], port=9090)


@pytest.mark.parametrize("stranger", list(STRANGERS))
def test_anyone_else_is_refused(policy: dict[str, Any], stranger: str) -> None:
    assert not admits(policy, STRANGERS[stranger])


def test_every_rule_names_its_callers_and_the_serving_port(
    policy: dict[str, Any], rendered: list[dict[str, Any]]
) -> None:
    assert policy["policyTypes"] == ["Ingress"]  # egress is not modelled (left open)
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (port,) = container["ports"]
    assert port["containerPort"] == PORT
    assert policy["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    for rule in policy["ingress"]:
        assert rule.get("from"), "a rule without `from` admits every source"
        assert rule["ports"] == [{"protocol": "TCP", "port": PORT}]


def test_the_shipped_defaults_admit_no_address_until_apiservercidr_is_set(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO_ROOT / "infra/k8s/config.yaml").read_text(encoding="utf-8"))
    shipped = {**FILLED, **config["data"]}
    found = _policy(_render(_copy(tmp_path, shipped, ["deployment"])))
    assert not admits(found, ("", {}, "10.0.0.5"))
    registry = (shipped["registryNamespace"], {"app.kubernetes.io/name": shipped["registryApp"]})
    assert admits(found, (*registry, None))
