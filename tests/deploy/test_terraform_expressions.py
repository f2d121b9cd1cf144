"""The module's validations and decisions, evaluated by Terraform itself.

Each location validation is table-tested against real Google Cloud region and
zone names (and near-misses), first with Python's re on the regex the module
declares, then through `terraform console` (Terraform's RE2 and functions).
The console needs no provider, so these run wherever a terraform CLI does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.deploy._hcl import MODULE_DIR, hcl_regexes, load_dir
from tests.deploy._terraform import condition_source, console

VARIABLES_TF = MODULE_DIR / "variables.tf"

# Real regions, including every shape a regex can trip on: two-digit numbers
# (europe-west10, europe-west12), long first words (northamerica-south1),
# short ones (me-central2, us-east5).
REGIONS = [
    "africa-south1",
    "asia-east1",
    "asia-east2",
    "asia-northeast1",
    "asia-northeast3",
    "asia-south2",
    "asia-southeast2",
    "australia-southeast1",
    "australia-southeast2",
    "europe-central2",
    "europe-north1",
    "europe-north2",
    "europe-southwest1",
    "europe-west1",
    "europe-west4",
    "europe-west9",
    "europe-west10",
    "europe-west12",
    "me-central1",
    "me-central2",
    "me-west1",
    "northamerica-northeast1",
    "northamerica-northeast2",
    "northamerica-south1",
    "southamerica-east1",
    "southamerica-west1",
    "us-central1",
    "us-east1",
    "us-east4",
    "us-east5",
    "us-south1",
    "us-west4",
]
ZONES = [
    "europe-west10-a",
    "europe-west12-c",
    "europe-west1-b",
    "me-central2-b",
    "africa-south1-a",
    "northamerica-south1-b",
    "us-central1-f",
    "us-east5-c",
]
MULTI_REGIONS = ["us", "europe", "asia"]
NOT_LOCATIONS = [
    "",
    "Europe-west1",
    "europe_west1",
    "europe-west",
    "europewest1",
    "europe-west1-",
    "europe-west1-bb",
    "europe-west1-1",
    "europe-west1 ",
    " europe-west1",
    "global",
    "europe-west1/b",
]

# (variable, attribute path in the console expression, accepted, rejected)
TABLE = {
    "region": (REGIONS, ZONES + MULTI_REGIONS + NOT_LOCATIONS),
    "gke_cluster": (REGIONS + ZONES, MULTI_REGIONS + NOT_LOCATIONS),
    "artifact_registry": (REGIONS + MULTI_REGIONS, ZONES + NOT_LOCATIONS),
}
# Which validation block of the variable checks the location.
CONDITION_INDEX = {"region": 0, "gke_cluster": 1, "artifact_registry": 0}


def _location_regex(variable: str) -> re.Pattern[str]:
    module = load_dir(MODULE_DIR)
    condition = module.variables[variable]["validation"][CONDITION_INDEX[variable]]["condition"]
    (pattern,) = hcl_regexes(condition)
    # RE2's `$` is end of text; Python's also matches before a final newline.
    return re.compile(pattern.pattern.replace("$", r"\Z"))


@pytest.mark.parametrize("variable", sorted(TABLE))
def test_location_validation_accepts_real_names(variable: str) -> None:
    accepted, rejected = TABLE[variable]
    pattern = _location_regex(variable)
    wrongly_rejected = [v for v in accepted if not pattern.search(v)]
    wrongly_accepted = [v for v in rejected if pattern.search(v)]
    assert not wrongly_rejected, f"{variable} rejects real locations {wrongly_rejected}"
    assert not wrongly_accepted, f"{variable} accepts {wrongly_accepted}"


@pytest.mark.parametrize("variable", sorted(TABLE))
def test_location_validation_in_real_terraform(variable: str, tmp_path: Path) -> None:
    accepted, rejected = TABLE[variable]
    source = condition_source(VARIABLES_TF, variable, CONDITION_INDEX[variable])
    expr = re.sub(r"var\.\w+(\.\w+)?", "loc", source)
    values = accepted + rejected
    verdicts = console(tmp_path, f"{{for loc in {json.dumps(values)} : loc => {expr}}}")
    assert [v for v in accepted if not verdicts[v]] == []
    assert [v for v in rejected if verdicts[v]] == []


# --- the cluster CA with a DNS-based endpoint ----------------------------------------


def test_dns_endpoint_trusts_the_system_roots(tmp_path: Path) -> None:
    """The DNS endpoint's certificate is not from the cluster CA: pinning that CA breaks TLS."""
    module = load_dir(MODULE_DIR)
    assert module.locals["kube_ca"].startswith('${local.kube_server_is_dns_endpoint ? "" :')
    text = (MODULE_DIR / "main.tf").read_text(encoding="utf-8")
    (source,) = re.findall(r"^\s*kube_server_is_dns_endpoint\s*=\s*(.+)$", text, re.MULTILINE)
    expr = source.replace("var.kube_server_override", "u")
    assert "var." not in expr and "local." not in expr, expr
    cases = {
        "https://gke-0123456789abcdef-acme-prod.europe-west1.gke.goog": True,
        "https://gke-0123456789abcdef-acme-prod.europe-west10.gke.goog:443": True,
        "https://gke-0123456789abcdef-acme-prod.us-central1.gke.goog/": True,
        "https://10.0.0.2": False,
        "https://34.76.1.2:443": False,
        "https://kube.example.com": False,
        "https://gke.goog.example.com": False,
    }
    got = console(tmp_path, f"{{for u in {json.dumps(list(cases))} : u => {expr}}}")
    assert got == cases
    # No override: the data source's endpoint, with the cluster CA.
    unset = source.replace("var.kube_server_override", "null")
    assert console(tmp_path, unset) is False


def test_functions_get_the_decided_ca(tmp_path: Path) -> None:
    module = load_dir(MODULE_DIR)
    functions = (MODULE_DIR / "functions.tf").read_text(encoding="utf-8")
    assert re.search(r"COCOON_KUBE_CA\s*=\s*local\.kube_ca\b", functions)
    # Empty means "system roots" on the code side: Settings reads "" as no CA.
    from shared.config import Settings

    settings = Settings.from_env(
        {
            "COCOON_KUBE_AUTH": "google",
            "COCOON_KUBE_SERVER": "https://x.gke.goog",
            "COCOON_KUBE_CA": "",
        }
    )
    assert settings.kube_ca is None
    assert module.locals["kube_server_is_dns_endpoint"]
