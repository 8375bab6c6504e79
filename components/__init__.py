"""The TFX components: `trainer/` (AutoStrategyTrainer), `transform/` (the
`preprocessing_fn`), `gate/` (AnomaliesGate) and `inline_schema/`.

The library they run lives in `tfx_autostrategy/` (`distribute/`,
`modeling/`, `preflight/`, `settings.py`, `conventions.py`).
"""
