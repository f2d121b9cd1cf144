"""Object identity, existence and naming, as kube-apiserver reports them."""

from __future__ import annotations

import re

from kubernetes import client

from tests.conformance.helpers import Custom, cocoonset, expect_error, new_namespace, pod


def test_create_sets_uid_creation_timestamp_and_resource_version(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", pod("p1"))
    assert re.fullmatch(r"[0-9a-f-]{36}", created.metadata.uid)
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.resource_version.isdigit()
    fetched = core.read_namespaced_pod("p1", "default")
    assert fetched.metadata.uid == created.metadata.uid
    assert fetched.metadata.resource_version == created.metadata.resource_version


def test_resource_version_is_store_wide_and_monotonic(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    custom = Custom(k8s_api)
    rvs = [
        int(core.create_namespaced_pod("default", pod("a")).metadata.resource_version),
        int(custom.create(cocoonset("s"))["metadata"]["resourceVersion"]),
        int(core.create_namespaced_pod("default", pod("b")).metadata.resource_version),
    ]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    listed = core.list_namespaced_pod("default")
    assert int(listed.metadata.resource_version) >= rvs[-1]


def test_create_existing_name_is_409_already_exists(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("dup"))
    st = expect_error(409, core.create_namespaced_pod, "default", pod("dup"))
    assert st["reason"] == "AlreadyExists"
    assert st["message"] == 'pods "dup" already exists'
    assert st["details"] == {"name": "dup", "kind": "pods"}


def test_custom_resource_already_exists_names_group_qualified_resource(
    k8s_api: client.ApiClient,
) -> None:
    custom = Custom(k8s_api)
    custom.create(cocoonset("x"))
    st = expect_error(409, custom.create, cocoonset("x"))
    assert st["message"] == 'cocoonsets.cocoonset.cocoonstack.io "x" already exists'
    assert st["details"]["group"] == "cocoonset.cocoonstack.io"


def test_get_missing_object_is_404_not_found_status(k8s_api: client.ApiClient) -> None:
    st = expect_error(404, Custom(k8s_api).get, "nope")
    assert st["reason"] == "NotFound"
    assert st["message"] == 'cocoonsets.cocoonset.cocoonstack.io "nope" not found'
    assert st["details"] == {
        "name": "nope",
        "group": "cocoonset.cocoonstack.io",
        "kind": "cocoonsets",
    }


def test_create_in_missing_namespace_is_404_namespace_not_found(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    st = expect_error(404, core.create_namespaced_pod, "ghost", pod("p"))
    assert st["message"] == 'namespaces "ghost" not found'
    assert st["details"] == {"name": "ghost", "kind": "namespaces"}


def test_list_in_missing_namespace_is_empty_not_an_error(k8s_api: client.ApiClient) -> None:
    assert client.CoreV1Api(k8s_api).list_namespaced_pod("ghost").items == []


def test_default_and_system_namespaces_exist_and_new_ones_can_be_created(
    k8s_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(k8s_api)
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    new_namespace(core, "team-a")
    ns = core.read_namespace("team-a")
    assert ns.status.phase == "Active"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "team-a"
    core.create_namespaced_pod("team-a", pod("p"))
    assert [p.metadata.name for p in core.list_namespaced_pod("team-a").items] == ["p"]


def test_name_must_be_dns1123_subdomain_422(k8s_api: client.ApiClient) -> None:
    st = expect_error(422, Custom(k8s_api).create, cocoonset("Bad_Name"))
    assert st["reason"] == "Invalid"
    assert st["message"].startswith(
        'CocoonSet.cocoonset.cocoonstack.io "Bad_Name" is invalid: metadata.name: Invalid '
        'value: "Bad_Name": a lowercase RFC 1123 subdomain'
    )
    assert st["details"]["causes"][0]["field"] == "metadata.name"


def test_generate_name_appends_five_random_characters(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    body = pod("")
    body["metadata"] = {"generateName": "worker-"}
    created = core.create_namespaced_pod("default", body)
    assert re.fullmatch(r"worker-[bcdfghjklmnpqrstvwxz2456789]{5}", created.metadata.name)


def test_pod_create_applies_api_defaults_and_default_tolerations(k8s_api: client.ApiClient) -> None:
    p = client.CoreV1Api(k8s_api).create_namespaced_pod("default", pod("p"))
    assert p.spec.restart_policy == "Always"
    assert p.spec.termination_grace_period_seconds == 30
    assert p.spec.dns_policy == "ClusterFirst"
    assert p.spec.scheduler_name == "default-scheduler"
    assert p.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert p.spec.containers[0].termination_message_path == "/dev/termination-log"
    assert {(t.key, t.toleration_seconds) for t in p.spec.tolerations} == {
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    }
    assert p.status.qos_class == "BestEffort"


def test_a_limit_without_a_request_is_requested_at_the_limit(k8s_api: client.ApiClient) -> None:
    # What a client reading the pod back compares (the operator's drift check does).
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1500m", "memory": "2Gi"},
        "requests": {"memory": "1Gi"},
    }
    p = client.CoreV1Api(k8s_api).create_namespaced_pod("default", body)
    assert p.spec.containers[0].resources.requests == {"cpu": "1500m", "memory": "1Gi"}
    assert p.spec.containers[0].resources.limits == {"cpu": "1500m", "memory": "2Gi"}
    assert p.status.qos_class == "Burstable"


def test_pod_without_containers_is_422_required_value(k8s_api: client.ApiClient) -> None:
    body = pod("p")
    body["spec"]["containers"] = []
    st = expect_error(422, client.CoreV1Api(k8s_api).create_namespaced_pod, "default", body)
    assert st["message"] == 'Pod "p" is invalid: spec.containers: Required value'


def test_pod_spec_is_immutable_except_image(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    st = expect_error(
        422, core.patch_namespaced_pod, "p", "default", {"spec": {"restartPolicy": "Never"}}
    )
    assert (
        "pod updates may not change fields other than `spec.containers[*].image`" in st["message"]
    )
    patched = core.patch_namespaced_pod(
        "p",
        "default",
        {"spec": {"containers": [{"name": "main", "image": "registry.local/agent:2"}]}},
    )
    assert patched.spec.containers[0].image == "registry.local/agent:2"
    assert patched.metadata.generation == 2


def test_binding_subresource_assigns_the_node_once(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("p"))
    core.create_namespaced_pod_binding(
        "p",
        "default",
        {
            "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
        },
        _preload_content=False,
    )
    bound = core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "node-1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    st = expect_error(
        409,
        core.create_namespaced_pod_binding,
        "p",
        "default",
        {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-2"}},
    )
    assert 'is already assigned to node "node-1"' in st["message"]


def test_nodes_are_cluster_scoped_with_status_subresource(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_node({"metadata": {"name": "node-1", "labels": {"pool": "a"}}})
    core.patch_node_status(
        "node-1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    node = core.read_node("node-1")
    assert node.status.conditions[0].type == "Ready"
    assert [n.metadata.name for n in core.list_node(label_selector="pool=a").items] == ["node-1"]


def test_dry_run_validates_without_persisting(k8s_api: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod("default", pod("dry"), dry_run="All")
    assert core.list_namespaced_pod("default").items == []
