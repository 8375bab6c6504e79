"""The checks a run makes on its CSVs before TFX is imported.

`csv_layout` finds the files and their layout, `csv_scanner` reads them once,
`csv_check` rejects bad input naming file, line, column and value,
`csv_report` words what it found; `text_lengths` and `token_counts` pick the
`auto` lengths (characters, words, n-grams, or a pretrained tokenizer's
tokens). Pure Python: no TensorFlow.

May import `tfx_autostrategy.settings`, `.conventions` and
`.modeling.pretrained_dir` (a checkpoint's tokenizer) only.
"""
