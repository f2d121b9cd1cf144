"""deploy-check's admission part: would cocoon-webhook admit the wake's restore pod? Each
function's user is proved by a dry-run create as that user (a refusal FAILs with the POD_CREATORS
to set), and sets the CocoonSet validator would refuse are named (their suspend writes fail)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cocoon_hibernation.findings import Finding, Level
from shared import admission as adm
from shared.errors import CocoonError, WebhookDenied

if TYPE_CHECKING:
    from cocoon_hibernation._kube import KubeClient

PROBE_SET = "deploy-check-probe"


def find_webhook(
    configs: Mapping[str, Iterable[Mapping[str, Any]]], kind: str, webhook: str
) -> str | None:
    """The name of the `kind` ("mutating"/"validating") configuration holding `webhook`."""
    for cfg in configs.get(kind) or ():
        for hook in cfg.get("webhooks") or ():
            if hook.get("name") == webhook:
                return str((cfg.get("metadata") or {}).get("name", ""))
    return None


def set_findings(kube: KubeClient, config: str, namespaces: Sequence[str]) -> list[Finding]:
    """Sets breaking the CocoonSet webhook's rules: it refuses the functions' suspend writes."""
    from shared.models import dump  # noqa: PLC0415 - lazy: pydantic only with a cluster

    check = "cocoon-webhook sets"
    try:
        sets = [cs for ns in namespaces for page in kube.list_sets(ns) for cs in page]
    except CocoonError as err:
        return [Finding(Level.FAIL, check, f"could not list the sets: {err}")]
    judged = [(cs, adm.cocoonset_errors(dump(cs))) for cs in sets]
    bad = [f"{cs.namespace}/{cs.name} ({'; '.join(errs)})" for cs, errs in judged if errs]
    if bad:
        why = (
            f"{config} will refuse the functions' spec.suspend writes on {len(bad)} set(s) "
            f"breaking its rules: {', '.join(bad)} "
            "(fix them; `cocoon-hibernation validate` lists every rule)"
        )
        return [Finding(Level.FAIL, check, why)]
    return [Finding(Level.OK, check, f"every set in {', '.join(namespaces)} passes {config}")]


def current_pod_creators(deployment: Mapping[str, Any] | None) -> list[str] | None:
    """POD_CREATORS as the webhook's Deployment sets it (its default when unset)."""
    if deployment is None:
        return None
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in containers.get("containers") or ():
        for env in container.get("env") or ():
            if env.get("name") == "POD_CREATORS":
                if "valueFrom" in env:
                    return None  # from a ConfigMap or Secret: not read here
                return adm.parse_creators(str(env.get("value") or ""))
    return adm.parse_creators(adm.DEFAULT_POD_CREATORS)


def probe_pod(namespace: str) -> dict[str, Any]:
    """The wake's restore pod for a stand-in set: the webhook judges tolerations, owner and user."""
    from shared import constants as k  # noqa: PLC0415 - lazy: only with a cluster
    from shared.models import CocoonSet  # noqa: PLC0415
    from shared.reconcile.mainpod import build_main_pod  # noqa: PLC0415

    cs = CocoonSet.model_validate(
        {
            "apiVersion": k.API_VERSION,
            "kind": k.KIND,
            "metadata": {
                "name": PROBE_SET,
                "namespace": namespace,
                "uid": "00000000-0000-0000-0000-000000000000",
                "generation": 1,
            },
            "spec": {
                "suspend": False,
                "hibernatePolicy": "release",
                "agent": {"image": "deploy-check/probe:1"},
            },
        }
    )
    return build_main_pod(cs, hint="")


def admission_findings(
    kube: KubeClient, *, users: Iterable[str], namespaces: Sequence[str]
) -> list[Finding]:
    """What admission says of the restore pod of each of `users` in each namespace."""
    check = "cocoon-webhook"
    try:
        configs = kube.list_webhook_configurations()
        config = find_webhook(configs, "mutating", adm.POD_WEBHOOK)
        validator = find_webhook(configs, "validating", adm.COCOONSET_WEBHOOK)
    except CocoonError as err:
        return [Finding(Level.FAIL, check, f"could not list webhook configurations: {err}")]
    if config is None:
        why = f"not installed (no {adm.POD_WEBHOOK} webhook): no POD_CREATORS to satisfy"
        return [Finding(Level.OK, check, why)]
    if not namespaces:
        why = (
            f"installed ({config}) but namespaces is empty: admission of the restore pod "
            "not proven (set namespaces in the tfvars)"
        )
        return [Finding(Level.FAIL, check, why)]
    try:
        current = current_pod_creators(
            kube.get_deployment(adm.WEBHOOK_NAMESPACE, adm.WEBHOOK_DEPLOYMENT)
        )
    except CocoonError:
        current = None  # not readable: the fix is phrased from the default
    refused: dict[str, str] = {}
    other: list[str] = []
    wanted = sorted(set(users))
    for ns in namespaces:
        for user in wanted:
            try:
                kube.dry_run_create_pod(ns, probe_pod(ns), as_user=user)
            except WebhookDenied as err:
                if err.user or adm.creator_message(user) in err.server_message:
                    refused.setdefault(user, ns)
                else:
                    other.append(f"{user} in {ns}: {err.server_message}")
            except CocoonError as err:
                other.append(f"{user} in {ns}: {err}")
    out: list[Finding] = []
    if refused:
        keep = list(current) if current is not None else [adm.DEFAULT_POD_CREATORS]
        fixed = ",".join(keep + [u for u in wanted if u not in keep])
        why = (
            f"{config} refuses the restore pod of {', '.join(sorted(refused))} "
            f"(not in POD_CREATORS): set POD_CREATORS={fixed} on "
            f"Deployment {adm.WEBHOOK_NAMESPACE}/{adm.WEBHOOK_DEPLOYMENT} ({adm.DOCS})"
        )
        out.append(Finding(Level.FAIL, check, why))
    if other:
        why = (
            "could not prove admission of the restore pod (a dry run as each function, "
            "which needs `impersonate` on users): " + "; ".join(other)
        )
        out.append(Finding(Level.FAIL, check, why))
    if not out:
        why = f"{config} admits the restore pod of every function in {', '.join(namespaces)}"
        out.append(Finding(Level.OK, check, why + " (dry run)"))
    if validator is not None:
        out += set_findings(kube, validator, namespaces)
    return out
