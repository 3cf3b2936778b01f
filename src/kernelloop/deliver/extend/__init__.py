"""Extending the representation with a regression check over every op's task set (`kernelloop extend`)."""

from .regress import (Change, Extension, ExtensionResult, Task, TaskVerdict, check_extension, ledger_entries, record,
                      repository_ledger, run_tasks, task_set)

__all__ = ["Change", "Extension", "ExtensionResult", "Task", "TaskVerdict", "check_extension", "ledger_entries",
           "record", "repository_ledger", "run_tasks", "task_set"]
