"""The run report: OUT/report.html, one self-contained page per run.

`facts` gathers what a run left (summary.json, the MLMD store through
`pipeline.mlmd_runs`, the Trainer's history and plan, the Evaluator's TFMA
output, statistics and anomalies); `plots` draws its curves with matplotlib
(Agg) into PNGs; `render` writes the page.

May import `tfx_autostrategy.pipeline`, the TFX components (to read their
artifacts), `.settings` and `.conventions`; only the commands import it.
"""
