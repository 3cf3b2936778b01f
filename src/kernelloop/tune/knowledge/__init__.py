"""The knowledge base: facts (checkable device statements) and experience (conditional heuristics).

Entries live in versioned TOML files under `kernelloop/base/builtin/knowledge/` (package data); see `loader` for the format.
"""

from .loader import (EVIDENCE_NAMES, Experience, Fact, FactStatus, KnowledgeBase, KnowledgeError, check_fact,
                     load_file, load_knowledge)

__all__ = ["EVIDENCE_NAMES", "Experience", "Fact", "FactStatus", "KnowledgeBase", "KnowledgeError", "check_fact",
           "load_file", "load_knowledge"]
