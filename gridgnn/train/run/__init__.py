"""From a `TrainConfig` to a finished run: settling it once (`resolve`, `auto`, `world`), the memory guard
(`memory_guard`), training in one process (`training`, `base`) or as one worker of a grid (`worker`,
`process_group`, `grid_train`, `host_placement`, `grid_metrics`), and a trained model's inputs for
``gridgnn predict`` (`inference`).

The top room of `gridgnn.train`: it drives `loop`, `checkpoint` and `outputs`, and nothing there imports it.
"""
