"""Pretraining input: `splits` (validated shard lists, the per-host pipelines), `read_errors`
(what a failed read of a split means), `data_order` (the seeded order both pipelines follow),
`data_tf` (tf.data, TensorFlow backend), `data_grain` (grain, JAX without TensorFlow) and
`masking` (inside the compiled train step)."""
