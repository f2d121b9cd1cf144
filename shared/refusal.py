"""A write refused by admission, told once: one Warning Event on the set and one count.
Acknowledged (the sweep tries again at its pace). The Event is keyed by (write, generation,
server message): a redelivery adds nothing, a later refused wake is told again."""

from __future__ import annotations

from shared import constants as k
from shared import log
from shared.constants import METRIC_ADMISSION_REFUSED
from shared.errors import AdmissionDenied, WebhookDenied
from shared.models import CocoonSet
from shared.ports import KubeApi


def refusal_message(write: str, err: AdmissionDenied) -> str:
    if isinstance(err, WebhookDenied):
        who = f" for user {err.user}" if err.user else ""
        return (
            f"{write} refused by the admission webhook {err.webhook}{who}: "
            f"{err.server_message}. Fix: {err.fix}"
        )
    return f"{write} refused by the API server: {err.server_message}"


def report_refusal(kube: KubeApi, cs: CocoonSet, write: str, err: AdmissionDenied) -> bool:
    """The Warning (required: a failed POST fails the caller); True when this call made it."""
    webhook = getattr(err, "webhook", "")
    log.warning(
        "write refused by admission",
        set=f"{cs.namespace}/{cs.name}",
        step=write,
        webhook=webhook,
        error=str(err),
    )
    created = kube.emit_event(
        cs,
        reason=k.REASON_WRITE_REFUSED,
        message=refusal_message(write, err),
        type="Warning",
        key=f"{write}/{cs.metadata.generation}/{err.server_message}",
    )
    if created:
        labels = {"namespace": cs.namespace, "cocoonset": cs.name, "write": write}
        log.count(METRIC_ADMISSION_REFUSED, 1, **labels, webhook=webhook)
    return created
