"""The exact model: dispatch rules and cost formulas. Pure Python; never imports torch."""

from harness.model.cost import StepCost, WorkloadCost, step_cost, workload_cost
from harness.model.dispatch import CompileKey, Dispatch, dispatch
from harness.model.summary import ConfigSummary, summarize

__all__ = ["CompileKey", "ConfigSummary", "Dispatch", "StepCost", "WorkloadCost", "dispatch",
           "step_cost", "summarize", "workload_cost"]
