"""`kernelloop keys`: the user's package signing key and the trust store of public keys (deliver/package/signing.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from . import common
from .common import esc

keys_app = typer.Typer(rich_markup_mode=None, help="The package signing key (Ed25519, in the user's config folder, outside every "
                            "workspace) and the trust store of public keys packages may be signed with.",
                       no_args_is_help=True)


JSON = Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")]


def _emit(result: dict, as_json: bool) -> None:
    """The result as JSON, or one `name: value` line per field."""
    if as_json:
        print(json.dumps(result, indent=1))
        return
    for k, v in result.items():
        shown = ", ".join(v) if isinstance(v, list) else ("-" if v is None else v)
        print(f"{k}: {shown}")


def _fail(e: Exception) -> None:
    common.console(stderr=True).print(f"[red]{esc(e)}[/red]")
    raise typer.Exit(common.BAD_INPUT)


@keys_app.command("generate")
def generate(force: Annotated[bool, typer.Option("--force", help="Replace an existing key.")] = False,
             as_json: JSON = False) -> None:
    """Generate the signing key `export` signs packages with."""
    from ..deliver.package.signing import SigningError, generate_key, key_id, read_public
    try:
        path = generate_key(force=force)
    except SigningError as e:
        _fail(e)
    pub = path.with_suffix(".pub")
    _emit({"private_key": str(path), "public_key": str(pub), "key_id": key_id(read_public(pub))}, as_json)


@keys_app.command("show")
def show(as_json: JSON = False) -> None:
    """The signing key's files and id, and the trusted public keys."""
    from ..deliver.package.signing import PUB_FILE, SigningError, signing_dir, trusted_keys
    try:
        trusted = sorted(trusted_keys())
    except SigningError as e:
        _fail(e)
    pub = signing_dir() / PUB_FILE
    _emit({"signing_dir": str(signing_dir()), "public_key": str(pub) if pub.is_file() else None,
           "trusted": trusted}, as_json)


@keys_app.command("trust")
def trust(pubkey: Annotated[Path, typer.Argument(help="A public key file (PEM, as `keys generate` writes, or "
                                                      "64 hex digits).")],
          as_json: JSON = False) -> None:
    """Accept packages signed with this public key."""
    from ..deliver.package.signing import SigningError, trust as add
    try:
        _emit({"trusted": str(add(pubkey))}, as_json)
    except SigningError as e:
        _fail(e)
