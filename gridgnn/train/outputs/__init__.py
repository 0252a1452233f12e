"""What a run writes or prints: the ``--metrics-out`` document (`metrics`), the ``--log-csv`` file
(`epoch_csv`), TensorBoard events (`tensorboard_log`), the per-epoch lines (`progress`), and the products of a
trained model (`products`: predictions, embeddings and the model file; `per_vertex`: their file formats;
`row_writer`: one file written by many ranks).

Builds on `gridgnn.train.loop`, and on `gridgnn.train.checkpoint` for the names kept in a checkpoint folder,
which no output may take.
"""
