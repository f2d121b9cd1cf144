"""A write refused by admission, told once: one Warning Event on the set and one count.

Permanent for the invocation (acknowledged; the sweep tries again at its pace). The Event is
keyed by (write, generation, server message): a redelivery adds nothing, a later refused wake
(the generation moves with each suspend flip) is told again.
"""

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
    log.warning(
        "write refused by admission",
        set=f"{cs.namespace}/{cs.name}",
        step=write,
        webhook=getattr(err, "webhook", ""),
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
        log.count(
            METRIC_ADMISSION_REFUSED,
            namespace=cs.namespace,
            cocoonset=cs.name,
            write=write,
            webhook=getattr(err, "webhook", ""),
        )
    return created
