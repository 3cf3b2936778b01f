"""`kernelloop ptx recover`: a compiled kernel's PTX and metadata, and its round trip through Triton's ptxas."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import common

ptx_app = typer.Typer(add_completion=False, no_args_is_help=True,
                      help="Compiled kernels at the PTX level: recovery and round trip (docs/ptx.md).")


@ptx_app.command("recover")
def recover(
    path: Annotated[Path, typer.Argument(help="A candidate JSON, a Triton cache entry folder, a .ptx or a .cubin.")],
    workload: Annotated[Optional[str], typer.Option(
        help="A candidate's workload axes, e.g. 'M=4096,N=4096' (default: the op's first workload).")] = None,
    dtype: Annotated[str, typer.Option(help="The workload's dtype (with --workload).")] = "fp16",
    arch: Annotated[int, typer.Option(help="Target compute capability.")] = 90,
    as_json: Annotated[bool, typer.Option("--json", help="Print the Recovery record as JSON (without PTX/cubin).")] = False,
) -> None:
    """Recover the PTX and metadata of every kernel PATH holds, re-assemble it with Triton's ptxas and compare."""
    from ..ptx.recover import parse_axes
    from ..ptx.recover import recover as run
    from ..records import Candidate, Workload
    console = common.console(stderr=as_json, soft_wrap=True)
    if not path.exists():
        console.print(f"[red]bad argument:[/red] {path} does not exist")
        raise typer.Exit(common.BAD_INPUT)
    w = None
    if workload:
        op = Candidate.from_json(path.read_text()).op if path.is_file() and path.suffix == ".json" else ""
        w = Workload(op=op, axes=parse_axes(workload), dtype=dtype)
    try:
        result = run(path, workload=w, arch=arch)
    except (ValueError, OSError) as e:
        console.print(f"[red]cannot recover:[/red] {e}")
        raise typer.Exit(common.BAD_INPUT)
    if as_json:
        data = result.model_dump(mode="json", exclude={"kernels": {"__all__": {"kernel": {"ptx", "cubin_b64",
                                                                                          "metadata"}}}})
        data["round_trip_ok"] = result.round_trip_ok
        print(common_json(data))
    else:
        console.print(f"{result.source} ({result.origin}): "
                      + ("recoverable" if result.recoverable else f"[red]not recoverable[/red]: {result.reason}"))
        for rep in result.kernels:
            k, rt = rep.kernel, rep.round_trip
            console.print(f"  {k.name or '?'}: target {k.target or '?'}, PTX {k.ptx_version or '-'}, "
                          f"warps {k.num_warps}, threads {k.threads}, shared {k.shared_bytes}, registers {k.registers}")
            if not k.recoverable:
                console.print(f"    not recoverable: {k.reason}")
            elif rt is None:
                console.print("    round trip: not run (no ptxas/cuobjdump)")
            elif not rt.assembled:
                console.print(f"    round trip: [red]ptxas refused it[/red]\n{rt.error}")
            else:
                same = "byte-identical cubin" if rt.identical_cubin else (
                    "no original cubin to compare" if not rt.compared_to_cubin else "cubin bytes differ")
                console.print(f"    round trip: {'[green]ok[/green]' if rt.ok else '[red]differs[/red]'} ({same}; "
                              f"{rt.sass_instructions} SASS instructions, {rt.registers} registers)")
                for d in rt.differences:
                    console.print(f"      {d.kind}: {d.what}: {d.original} -> {d.reassembled}")
    raise typer.Exit(common.OK if result.recoverable and result.round_trip_ok else common.FAILED)


def common_json(data: dict) -> str:
    import json
    return json.dumps(data, indent=2, sort_keys=True)
