"""Accelerators: detect -> strategy -> plan, the chain the Trainer's `run_fn` runs.

`devices` finds what this process can use (TPU, GPUs, a multi-worker
`TF_CONFIG`, CPU), `cluster` reads cluster specs, `strategies` builds the
matching `tf.distribute` strategy, `distribution_plan` turns settings and
strategy into the plan (replicas, global batch, precision, steps per
execution, XLA, backups); `cpu_replicas` and `rehearsal` are the logical-CPU
stand-ins that `autostrategy rehearse` and the tests run.

May import `tfx_autostrategy.settings` and `.conventions` only: nothing from
the TFX components, the pipeline, the remote targets or the commands.
"""
