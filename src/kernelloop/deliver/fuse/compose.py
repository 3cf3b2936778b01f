"""Composition: the model's exported graph with its matches replaced by the package's fused ops.

    fused = FusedModel(model)
    sites = fused.add_graph(exported_program, example_inputs, choices, package)   # per example shape

The exported program's module (`ExportedProgram.module()`: an nn.Module over the model's own parameters, called
with the model's own arguments) is rewritten node by node: for each chosen occurrence, the op's inputs are taken
from the graph (views the op's interface leaves out are peeled, rows flattened with a reshape), one call of the
package op is inserted after the last of them, its results reshaped back and put in place of the subgraph's
values, and the subgraph's nodes removed. Patterns that span module boundaries (the residual add of one decoder
layer and the norm of the next) are one match like any other. A call decides per input, as `kernelloop.apply`
does, between the package's dispatcher (eager inference) and its torch op (torch.compile, export, autograd):
inputs no dispatch entry takes run the op's reference, the model's own subgraph.

Overlapping choices (SwiGLU's dual GEMM and its elementwise tail cover the same nodes) are resolved before by
`choose`: by measured gain (the unfused eager sequence's time minus the fused kernel's) where the GPU measured
one, else by the number of model ops replaced.

`FusedModel` keeps one rewritten graph per example shape (the export specialises shapes) and runs the original
model for inputs of any other shape (counted per reason in `fallbacks`).
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass

import torch
import torch.fx as fx
from pydantic import Field
from torch import nn

from ..integrate.apply import kernel_caller
from ...base.records import Record
from . import graph as G
from .evidence import Realisation
from .masks import MaskRewrite, causal_sdpa

INVERSE = {"aten.transpose.int": lambda args: ("aten.transpose.int", args),
           "aten.unsqueeze.default": lambda args: ("aten.squeeze.dim", args)}
ATEN = {"aten.transpose.int": torch.ops.aten.transpose.int, "aten.unsqueeze.default": torch.ops.aten.unsqueeze.default,
        "aten.squeeze.dim": torch.ops.aten.squeeze.dim}


class Site(Record):
    """One occurrence of a realised pattern in one example shape's graph, and whether it was replaced."""

    shape: str = Field(description="The example's input shapes, e.g. '2x8'.")
    op: str
    kind: str
    pattern: str
    nodes: list[str] = Field(description="The graph nodes the op replaces.")
    module_paths: list[str] = Field(default_factory=list)
    gain_us: float | None = Field(None, description="Measured gain per call (eager sequence minus the kernel).")
    replaced: bool
    reason: str = Field("", description="Why it was left alone.")


@dataclass
class Choice:
    """A candidate site: a realisation at one occurrence (nodes by name in the shape's graph)."""

    realisation: Realisation
    occurrence: int
    nodes: list[str]          # every step node of the occurrence, in signature order
    workload: dict[str, int]
    module_paths: list[str]

    @property
    def covered(self) -> set[str]:
        return {self.nodes[k] for k in self.realisation.plan.steps}

    def gain_us(self) -> float | None:
        ev = self.realisation.evidence
        if ev is None or not ev.device.is_cuda:
            return None
        for w in ev.workloads:
            if w.axes == self.workload and w.kernel_us is not None and w.eager_us is not None:
                return w.eager_us - w.kernel_us
        return None


def choose(choices: list[Choice]) -> tuple[list[Choice], list[tuple[Choice, str]]]:
    """Non-overlapping choices, the best first: by measured gain when measured (a measured loss is never taken),
    else by the number of model ops replaced. Returns (chosen, [(left out, why)])."""
    def rank(c: Choice):
        g = c.gain_us()
        return (g is not None, g if g is not None else 0.0, len(c.covered))
    taken: set[str] = set()
    chosen, left = [], []
    for c in sorted(choices, key=rank, reverse=True):
        g = c.gain_us()
        if g is not None and g <= 0:
            left.append((c, f"measured no gain ({g:.2f} us per call)"))
        elif c.covered & taken:
            left.append((c, "overlaps a site with a larger gain"))
        else:
            chosen.append(c)
            taken |= c.covered
    return chosen, left


def _operand(name: str) -> str:
    return name if name.startswith("%") else "in" + name.lstrip("inp")


class _Rewrite:
    def __init__(self, gm: fx.GraphModule):
        self.gm, self.g = gm, gm.graph
        self.by_name = {n.name: n for n in self.g.nodes}

    def order(self) -> dict[fx.Node, int]:
        return {n: i for i, n in enumerate(self.g.nodes)}

    def site(self, c: Choice, package, scalars: dict[str, float]) -> str:
        """Replace one occurrence; '' when done, else why not (the graph is then unchanged)."""
        plan = c.realisation.plan
        missing = [n for n in c.nodes if n not in self.by_name]
        if missing:
            return f"nodes {missing[:3]} are not in the graph"
        steps = [self.by_name[n] for n in c.nodes]
        operands = {_operand(k): v for k, v in G.operand_nodes(steps, set()).items()}
        removed = [steps[k] for k in plan.steps]
        # metadata asserts on the subgraph's values go with it
        asserts = [u for n in removed for u in n.users if G.target(u) in G.IGNORED]
        removed_set = set(removed) | set(asserts)
        outputs = {operands[_operand(p.operand)] for p in plan.outputs}
        for n in removed:
            if n not in outputs and any(u not in removed_set for u in n.users):
                return f"{n.name} is used outside the subgraph but is not one of the op's results"
        ins = []
        for p in plan.inputs:
            node = operands[_operand(p.operand)]
            peel = list(p.views)
            while peel and G.target(node) == peel[-1].target and list(node.args[1:]) == peel[-1].args:
                node = node.args[0]
                peel.pop()
            ins.append((p, node, peel))
        order = self.order()
        last = max((node for _, node, _ in ins), key=order.__getitem__)
        first_use = min((u for o in outputs for u in o.users if u not in removed_set), key=order.__getitem__,
                        default=None)
        if first_use is not None and order[first_use] <= order[last]:
            return "an input of the op is computed after a use of its result"
        call = kernel_caller(package[c.realisation.op])
        with self.g.inserting_before(last.next):   # each new node before the same one: creation order kept
            args = []
            for p, node, peel in ins:
                for v in reversed(peel):
                    target, vargs = INVERSE[v.target](v.args)
                    node = self.g.call_function(ATEN[target], (node, *vargs))
                shape = [c.workload[a] for a in p.axes]
                val = G.val(operands[_operand(p.operand)])
                if not p.views and (val is None or list(val.shape) != shape):
                    node = self.g.call_function(torch.ops.aten.reshape.default, (node, shape))
                args.append(node)
            out = self.g.call_function(call, (*args, *(scalars[k] for k in plan.scalars)))
            results = []
            for i, p in enumerate(plan.outputs):
                r = out if len(plan.outputs) == 1 else self.g.call_function(operator.getitem, (out, i))
                for v in p.views:
                    r = self.g.call_function(ATEN[v.target], (r, *v.args))
                orig = operands[_operand(p.operand)]
                val = G.val(orig)
                if not p.views and val is not None and list(val.shape) != [c.workload[a] for a in p.axes]:
                    r = self.g.call_function(torch.ops.aten.reshape.default, (r, list(val.shape)))
                if "val" in orig.meta:   # what later sites and passes read of the value it stands for
                    r.meta["val"] = orig.meta["val"]
                results.append((orig, r))
        for orig, r in results:
            orig.replace_all_uses_with(r, delete_user_cb=lambda u: u not in removed_set)
        for n in [*dict.fromkeys(asserts), *reversed(removed)]:
            if not n.users:
                self.g.erase_node(n)
        return ""

    def finish(self) -> fx.GraphModule:
        self.g.eliminate_dead_code()
        self.g.lint()
        self.gm.recompile()
        return self.gm


def rewrite(ep: torch.export.ExportedProgram, choices: list[Choice], package, shape: str,
            masks: list[MaskRewrite] | None = None) -> tuple[fx.GraphModule, list[Site]]:
    """The exported program's module with `choices` (non-overlapping) replaced; a Site per choice. Causal masks
    that export made explicit go back to SDPA as `is_causal` where provably the same (masks.py); each SDPA call
    with a mask is recorded in `masks` when a list is given."""
    gm = ep.module()
    rw = _Rewrite(gm)
    found = causal_sdpa(gm, shape)
    if masks is not None:
        masks.extend(found)
    sites = []
    for c in choices:
        r = c.realisation
        why = rw.site(c, package, dict(r.plan.scalars))
        sites.append(Site(shape=shape, op=r.op, kind=r.plan.kind, pattern=r.pattern, nodes=sorted(c.covered),
                          module_paths=c.module_paths, gain_us=c.gain_us(), replaced=not why, reason=why))
    return rw.finish(), sites


def shape_key(args: tuple, kwargs: dict | None = None) -> str:
    """'2x8' for one tensor argument of shape [2, 8] ('2x8,2x8' for two); non-tensors are left out."""
    tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
    return ",".join("x".join(str(d) for d in t.shape) for t in tensors)


class FusedModel(nn.Module):
    """The model with its fused graphs: `forward` takes the model's own arguments and runs the rewritten graph of
    their shapes, or the original model for a shape it has none for. `fallbacks` counts the calls the original
    model served, per reason (as a package kernel's `fallbacks` does): {"no fused graph for shape 1x5": 1}."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.graphs = nn.ModuleDict()
        self.fallbacks: Counter[str] = Counter()

    def add_graph(self, shape: str, gm: fx.GraphModule) -> None:
        self.graphs[shape.replace(",", "_")] = gm

    def forward(self, *args, **kwargs):
        key = shape_key(args, kwargs).replace(",", "_")
        if key in self.graphs:
            return self.graphs[key](*args, **kwargs)
        shape = key.replace("_", ",") or "without tensors"
        self.fallbacks[f"no fused graph for shape {shape}"] += 1
        return self.model(*args, **kwargs)
