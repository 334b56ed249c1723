"""Fusion: greedy regions over the Program.

Placeholder until the greedy pass lands: one kernel per instruction, so
every backend already runs fused Programs (the only kind it needs to run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.domain import region_domain
from ..ir.program import Instr, Kernel, Param, Program


@dataclass
class Plan:
    """What runs: the fused program and one entry per launch."""

    program: Program
    kernels: list[Any] = field(default_factory=list)


def _one_kernel_per_instr(program: Program) -> Program:
    types = program.types()
    body: list[Any] = []
    for stmt in program.body:
        if isinstance(stmt, Kernel):
            body.append(stmt)
            continue
        assert isinstance(stmt, Instr)
        args = tuple(dict.fromkeys(stmt.args))
        kernel = Kernel(f"k{len(body)}_{stmt.op}", (stmt.name,), args,
                        tuple(Param(a, types[a]) for a in args), [stmt], (stmt.name,),
                        (stmt.type,), {})
        kernel.attrs["kind"] = region_domain(kernel).kind
        body.append(kernel)
    return Program(program.name, program.inputs, body, program.outputs)


def plan_for(program: Program, key: Any) -> Plan:
    """The plan for a program: every statement inside a kernel block."""
    fused = _one_kernel_per_instr(program)
    return Plan(fused, fused.kernels)
