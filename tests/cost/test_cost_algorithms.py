"""The table of per-algorithm cost modules (`gridgnn.cost.algorithms`): every grid algorithm has one, each
provides all the `AlgorithmCosts` Protocol asks, and the SpMM registry names the same algorithms."""

from __future__ import annotations

import inspect

from gridgnn.cost.algorithms import COSTS, AlgorithmCosts, costs_of
from gridgnn.grid.shape import ALGORITHMS
from gridgnn.spmm.registry import SPARSE_CLASSES, SPMM_CLASSES


def test_every_grid_algorithm_has_a_cost_module_and_an_spmm():
    assert set(COSTS) == set(ALGORITHMS) == set(SPMM_CLASSES) == set(SPARSE_CLASSES)
    assert costs_of("1.5d") is costs_of("1d")  # 1D is 1.5D with c = 1: one module for both


def test_each_cost_module_provides_the_whole_protocol_with_its_signatures():
    wanted = {name: member for name, member in vars(AlgorithmCosts).items()
              if not name.startswith("_") and (callable(member) or name.isupper())}
    wanted.update({name: None for name in AlgorithmCosts.__annotations__})
    assert {"blocks", "spmm_terms", "schedule", "attention_terms", "graph_bytes", "count_bounds",
            "DENSE_BUFFERS"} <= set(wanted)
    for algo, module in COSTS.items():
        for name, member in wanted.items():
            assert hasattr(module, name), (algo, name)
            if callable(member):  # the same parameters as the Protocol's method, less ``self``
                protocol = list(inspect.signature(member).parameters)[1:]
                assert list(inspect.signature(getattr(module, name)).parameters) == protocol, (algo, name)
