"""Planning: rank grid configurations with the cost model (`plan`), and measure a machine (`calibrate`)."""

from gridgnn.plan.planner import Plan, PlanEntry, candidate_shapes, plan

__all__ = ["Plan", "PlanEntry", "candidate_shapes", "plan"]
