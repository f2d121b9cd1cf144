"""`cocoon-hibernation crd`: print the CocoonSet CRD generated from the models."""

from __future__ import annotations

import click
import yaml

from cocoon_hibernation._common import EXIT_CODES_HELP, emit_structured, output_choice
from shared.crd import cocoonset_crd


@click.command(name="crd", epilog=EXIT_CODES_HELP)
@output_choice(("yaml", "json"))
def command(output: str) -> None:
    """Print the CocoonSet CustomResourceDefinition (kubectl apply -f - ready)."""
    crd = cocoonset_crd()
    if output == "json":
        emit_structured(crd, output)
    else:
        click.echo(
            yaml.safe_dump(crd, sort_keys=True, allow_unicode=True, explicit_start=True), nl=False
        )
