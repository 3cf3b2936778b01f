"""The LLM as a PTX-level proposer: one hot window of a recovered kernel's PTX, the SASS of its source lines and
where the time goes (the static estimate or a profile's samples) in the prompt; the answer is the window's new
text, validated here before it becomes a `PtxCandidate`: it must parse, stay inside the window, and pass the static
checks -- ptxas's errors and the checks' refusals go back to the model verbatim for repair (`roles.converse`).

Prompts: `builtin/prompts/ptx/<version>/` (system.md, ptx.md) and the source-level set's `repair.md` wording.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ...ptx.checks import check_edit
from ...ptx.records import HotWindow, ProfileSamples, PtxCandidate, RecoveredKernel
from ...ptx.rules import Context
from ...ptx.windows import window_sass
from ....base.records.base import sha256_hex
from .prompts import PromptSet
from ..proposal import ProposalInvalid
from .recorder import LLMClient
from .roles import Limits, converse

PTX_PROMPTS = "v1"


class PtxAnswer(BaseModel):
    """What the model answers."""

    window: str = Field(description="The label of the window rewritten")
    ptx: str = Field(description="The window's new lines, in full")
    hypothesis: str = Field(description="What gets faster and why, falsifiable (a metric and a direction)")
    reorders_fp: bool = Field(False, description="The edit reorders floating-point work")


def load_ptx_prompts(version: str = PTX_PROMPTS, root: str | Path | None = None) -> PromptSet:
    from ....base.builtin import prompts_dir
    folder = Path(root or prompts_dir() / "ptx") / version
    templates = {p.stem: p.read_text() for p in sorted(folder.glob("*.md"))}
    missing = [r for r in ("system", "ptx") if r not in templates]
    if missing:
        raise FileNotFoundError(f"PTX prompt set {folder} lacks {', '.join(missing)}.md")
    repair = (prompts_dir() / "v1" / "repair.md").read_text()
    return PromptSet(version=f"ptx-{version}", folder=folder, templates={**templates, "repair": repair})


class LlmPtxProposer:
    """Asks the model for one edit per hot window (the `windows` hottest), each validated and statically checked."""

    def __init__(self, client: LLMClient, prompts: PromptSet | None = None, windows: int = 1,
                 limits: Limits = Limits()):
        self.client, self.prompts = client, prompts or load_ptx_prompts()
        self.windows, self.limits = windows, limits
        self.name = f"llm:{client.config.model}:{self.prompts.tag}"
        self.errors: list[str] = []

    def prompt(self, kernel: RecoveredKernel, window: HotWindow, others: list[HotWindow],
               profile: ProfileSamples | None = None) -> tuple[str, str]:
        lines = kernel.ptx.split("\n")
        numbered = "\n".join(f"{i + 1:5d}  {lines[i]}" for i in range(window.start, window.end + 1))
        share = (f"{window.profile_metric or 'samples'} (Nsight Compute's source counters, per SASS instruction "
                 f"below)" if window.source == "profile" else "estimated issue slots (static: loops x16)")
        profile_text = (f"Share of the kernel's {share}: "
                        f"{window.weight:.0%}; {'a loop body' if window.loop else 'straight-line code'}; "
                        f"{window.ptx_instructions} PTX instructions, about {window.sass_instructions:.0f} SASS "
                        f"instructions; kernel source lines {window.source_lines[:20]}.")
        other = "\n".join(f"- {w.label or 'entry block'}: {w.weight:.0%}, lines {w.start + 1}-{w.end + 1}"
                          f"{', loop' if w.loop else ''}" for w in others) or "(none)"
        system = self.prompts.render("system", op=kernel.metadata.get("name", kernel.name), kernel=kernel.name)
        user = self.prompts.render("ptx", kernel=kernel.name, window_label=window.label or "entry block",
                                   first=window.start + 1, last=window.end + 1, profile=profile_text,
                                   window=numbered, sass="\n".join(window_sass(kernel, window, profile=profile)),
                                   others=other,
                                   schema=json.dumps(PtxAnswer.model_json_schema(), separators=(",", ":")))
        return system, user

    def _validator(self, kernel: RecoveredKernel, window: HotWindow, ctx: Context, parent: str, op: str):
        def validate(text: str) -> PtxCandidate:
            try:
                answer = PtxAnswer.model_validate_json(text.strip().removeprefix("```json").removesuffix("```"))
            except ValidationError as e:
                raise ProposalInvalid(f"not a PtxAnswer: {e.errors()[0]['msg']} at "
                                      f"{'.'.join(map(str, e.errors()[0]['loc']))}") from None
            if answer.window not in (window.label, "entry block" if not window.label else window.label):
                raise ProposalInvalid(f"you were asked to rewrite {window.label or 'entry block'}, not "
                                      f"{answer.window}")
            lines = kernel.ptx.split("\n")
            edited = "\n".join(lines[:window.start] + answer.ptx.split("\n") + lines[window.end + 1:])
            if edited == kernel.ptx:
                raise ProposalInvalid("the window is unchanged")
            violations = check_edit(kernel.ptx, edited, metadata=kernel.metadata)
            if violations:   # ptxas's stderr and the checks' messages, verbatim
                raise ProposalInvalid("\n".join(f"{v.rule}: {v.message}" for v in violations))
            cand = ctx.candidate(edited, "llm", answer.hypothesis, [window], parent, op)
            return cand.model_copy(update={"proposer": self.name, "reorders_fp": answer.reorders_fp})
        return validate

    def propose(self, kernel: RecoveredKernel, windows: list[HotWindow], parent: str, op: str = "",
                profile: ProfileSamples | None = None) -> list[PtxCandidate]:
        """One edit per hot window asked about (`profile`: the values per SASS instruction the windows were
        weighed with, shown beside the window's SASS)."""
        ctx = Context(kernel, windows)
        out = []
        for w in windows[:self.windows]:
            system, user = self.prompt(kernel, w, [x for x in windows if x is not w][:5], profile)
            key = f"ptx|{self.client.config.model}|{sha256_hex(kernel.ptx)[:16]}|{w.start}"   # another model asks anew
            result = converse(self.client, self.prompts, "ptx", system, user, key,
                              self._validator(kernel, w, ctx, parent, op), self.limits)
            if result.value is not None:
                out.append(result.value)
            else:
                self.errors.append(f"{w.label or 'entry block'}: {result.error}")
        return out
