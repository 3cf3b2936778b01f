"""Outside agents (Claude Code, Codex, ...) as proposers judged by kernelloop.

- `interface`: what an agent may know about an op (launch signature, tensor shapes and dtypes, rules);
- `workspace`: `agent init` -- a folder with copies for reading, the interface, the baseline figures and a
  manifest that pins the op folder by its hashes;
- `submit`: compile -> verify -> benchmark (-> profile) of a submitted kernel through the real controller and
  the workspace's run archive, answered as a JSON verdict;
- `status`: the run's front, counts and recent submissions;
- `mcp_server`: the same operations as MCP tools over stdio.
"""

from ...tune.propose.interface import RULES, launch_signature, op_interface, template_params, workload_shapes
from .status import workspace_status
from .submit import Submission, SubmissionError, SubmissionProposer, submit
from .workspace import Workspace, WorkspaceError, baseline_figures, init_workspace

__all__ = ["RULES", "Submission", "SubmissionError", "SubmissionProposer", "Workspace", "WorkspaceError",
           "baseline_figures", "init_workspace", "launch_signature", "op_interface", "submit", "template_params",
           "workload_shapes", "workspace_status"]
