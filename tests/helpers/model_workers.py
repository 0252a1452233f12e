"""Worker-side code of the model-kind tests (imported by forked processes): one process group trains many
(model, configuration, grid) cases, so a spawn is paid once per world size."""

from __future__ import annotations

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_run
from gridgnn.nn.trace import model_spec
from gridgnn.train.run.grid_train import train_on_grid
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.training import load_graph


def models_worker(rank: int, world_size: int, cases: list[dict]) -> list[dict]:
    """Train every case (``TrainConfig`` keyword arguments, any task) on this world; per case every rank returns
    its final weights, rank 0 also losses, accuracies (None for a task scored otherwise), each epoch's (train,
    val, test) metric values, the measured communication of each epoch per rank and
    phase, and the cost model's prediction for the same step; its set-up (``setup``: every rank's
    `gridgnn.train.run.grid_train.spmm_setup_record`) and the predicted index exchange (``predicted_setup``)."""
    graphs, out = {}, []
    for kwargs in cases:
        config = TrainConfig(**kwargs)
        key = (config.dataset, config.directed, config.task)
        graph = graphs.setdefault(key, load_graph(config))
        config, shape, ordered = resolve_run(config, graph, world_size)
        trained, model = train_on_grid(config, ordered, return_model=True, shape=shape)
        record = {"weights": [p.detach().cpu().numpy() for p in model.parameters()]}
        if rank == 0:
            prediction = predict_run(model_spec(config, ordered), ordered, trained.shape, config)  # as it trained
            record.update(loss=[r.loss for r in trained.result.epochs],
                          acc=[(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                          metric=[(r.train_metric, r.val_metric, r.test_metric) for r in trained.result.epochs],
                          comm=trained.comm, grid=trained.shape.label(),
                          predicted={"bytes": prediction.bytes_by_phase, "calls": prediction.calls_by_phase},
                          setup=trained.spmm_setup, predicted_setup={
                              "index_exchange_bytes": prediction.setup_sum("bytes", "all_to_all").tolist(),
                              "index_exchange_calls": prediction.setup_sum("calls", "all_to_all").tolist()})
        out.append(record)
    return out

