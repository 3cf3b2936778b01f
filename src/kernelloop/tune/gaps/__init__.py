"""Capability gaps: proposals the representation could not express, rules whose targets lie outside every space,
refused schedule edits and recurring failure classes, recorded in the archive and ranked (`kernelloop gaps`)."""

from .rank import GAP_EVENT, CapabilityGap, GapRank, failure_gaps, gaps_of, rank, record_gap

__all__ = ["CapabilityGap", "GAP_EVENT", "GapRank", "failure_gaps", "gaps_of", "rank", "record_gap"]
