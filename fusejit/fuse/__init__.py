"""Fusion: greedy regions over the Program (placeholder until the fusion pass lands)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.program import Program


@dataclass
class Plan:
    """What runs: the (fused) program and one entry per launch."""

    program: Program
    kernels: list[Any] = field(default_factory=list)


def plan_for(program: Program, key: Any) -> Plan:
    """The plan for a program (unfused for now)."""
    return Plan(program)
