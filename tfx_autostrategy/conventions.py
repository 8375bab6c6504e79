"""The data and naming conventions several modules share, spelled once.

Pure Python (no TensorFlow or TFX import): the CLI's preflight, the CSV check
and the compiler read them before TFX is loaded.

- `--data` layouts: `data_root/*.csv` (one input split, which CsvExampleGen
  splits by a hash of each example, 4 buckets train : 1 bucket eval, so that
  the split is the same in every run) or `data_root/train/*.csv` plus
  `data_root/eval/*.csv` (`--presplit`).
- Labels: integers 0 and 1 (the curated schema's domain; the CSV check, the
  Trainer's label check and the one-class checks use them).
- The Evaluator's default AUC threshold and the default pipeline name, shared
  by the local run and the compiled pipelines.
- The TPU multiple: TPUs tile by 8, so a TPU core's batch and the fixed text
  lengths are multiples of it (`distribution_plan`, `text_lengths`).
- The Trainer's epoch-end log record, which the CLI turns into a progress
  line (`pipeline/progress_log.py`); spelled here because the Trainer must
  not import `pipeline/` (its import closure keys its cache).
"""

from typing import Dict

# A TPU core's batch and the padded text lengths are multiples of this.
TPU_MULTIPLE = 8

FILE_PATTERN = '*.csv'
# CsvExampleGen's name for the one input split of the single layout.
SINGLE_SPLIT = 'single_split'
TRAIN_SPLIT = 'train'
EVAL_SPLIT = 'eval'
PRESPLIT_SPLITS = (TRAIN_SPLIT, EVAL_SPLIT)
# Hash buckets of the single layout's output splits.
HASH_BUCKETS = {TRAIN_SPLIT: 4, EVAL_SPLIT: 1}
SPLIT_RATIO = f'{HASH_BUCKETS[TRAIN_SPLIT]}:{HASH_BUCKETS[EVAL_SPLIT]}'

LABELS = (0, 1)

DEFAULT_AUC_THRESHOLD = 0.6
DEFAULT_PIPELINE_NAME = 'autostrategy'

# The Trainer's epoch-end log record (`callbacks.EpochLog`): epoch, epochs and
# the epoch's values as JSON.
EPOCH_FINISHED_MESSAGE = 'autostrategy: epoch %d/%d finished %s'


def input_patterns(presplit: bool) -> Dict[str, str]:
  """Input split name -> file pattern relative to the data root."""
  if presplit:
    return {split: f'{split}/{FILE_PATTERN}' for split in PRESPLIT_SPLITS}
  return {SINGLE_SPLIT: FILE_PATTERN}


def eval_share(total_rows: int) -> int:
  """About how many of `total_rows` single-layout rows the eval split gets."""
  return total_rows * HASH_BUCKETS[EVAL_SPLIT] // sum(HASH_BUCKETS.values())

# What a Trainer run leaves for its readers (the pipeline's Evaluator config,
# the report, rehearsals): in model_run the epoch history and the distribution
# plan it trained with (with its stand-ins, when it was a rehearsal); the
# exported model's serving signature and its output.
HISTORY_FILE = 'history.json'
PLAN_FILE = 'plan.json'
SERVING_SIGNATURE = 'serving_default'
PROBABILITIES = 'probabilities'
