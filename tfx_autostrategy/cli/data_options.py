"""The data options `run` and `compile` share: column names and text settings.

Defined once, so that a pipeline compiled for Kubeflow or Vertex AI reads the
same columns and tokenises the same way as `autostrategy run` with the same
flags, with the same defaults and checks.

`--sequence-length` and `--char-ngram-length` default to `auto`: a length
picked from the training texts (`preflight/text_lengths`). `run` counts them
in its CSV preflight; `compile` reads the training CSVs through
`tf.io.gfile` (`scan_remote`) and fails, naming the path, when it cannot.

With `--model hub --hub-model-path DIR`, DIR's own tokenizer is used when
`modeling/pretrained_dir.describe` recognises DIR (a Hugging Face
checkpoint, a TF Hub BERT-family SavedModel): nothing else needs saying,
`--sentencepiece-model` is refused as a conflict, and `--sequence-length
auto` counts that tokenizer's tokens up to the checkpoint's positions. A
SavedModel it does not recognise keeps the older way: its ids come from
`--sentencepiece-model` (ids + 1, 0 is padding).
"""

import argparse
import dataclasses
import os
from typing import Dict, Mapping, Optional, Union

from tfx_autostrategy import conventions
from tfx_autostrategy.modeling import pretrained_dir
from tfx_autostrategy.preflight import text_lengths
from tfx_autostrategy import settings

_DEFAULTS = settings.TextSettings()
_SENTENCEPIECE_NOTE = ('SentencePiece pieces are not counted; the fixed '
                       'default')


def length_option(value: str) -> Union[str, int]:
  """argparse type of a length option: 'auto' or a whole number."""
  if value == text_lengths.AUTO:
    return value
  try:
    return int(value)
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"expected 'auto' or a whole number, got {value!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds the column names and Transform's text settings to `parser`."""
  defaults = settings.TextSettings()
  parser.add_argument('--text-column', default=defaults.text_column)
  parser.add_argument('--label-column', default=defaults.label_column)
  parser.add_argument('--id-column', default=defaults.id_column,
                      help="'' if the data has no id column")
  parser.add_argument('--slice-column', default=defaults.slice_column,
                      help="column to slice metrics by ('' for none)")
  parser.add_argument('--sequence-length', type=length_option,
                      default=text_lengths.AUTO,
                      help='word ids per example after padding; auto: the '
                      '95th percentile of the training texts, rounded up to '
                      f'a multiple of 8, at most {text_lengths.WORD_CAP} '
                      '(with --model hub and a pretrained checkpoint: its '
                      'tokens, special ones included, at most its positions)')
  parser.add_argument('--char-ngram-length', type=length_option,
                      default=text_lengths.AUTO,
                      help='character n-gram ids per example after padding; '
                      'auto: as --sequence-length, at most '
                      f'{text_lengths.NGRAM_CAP}')
  parser.add_argument('--vocab-size', type=int, default=defaults.vocab_size)
  parser.add_argument('--sentencepiece-model', default='',
                      help='SentencePiece model file (a remote URI for '
                      'compile): tokenise with it instead of the word '
                      'vocabulary')


def text_settings(args: argparse.Namespace,
                  lengths: Optional[Mapping[str, int]] = None
                 ) -> settings.TextSettings:
  """The TextSettings of parsed `add_arguments` options.

  A local SentencePiece path becomes absolute (the local run's components
  do not run in the caller's directory); a remote URI stays as it is.

  Args:
    args: the parsed options.
    lengths: TextSettings field -> length, for the length options left at
      'auto' (`Lengths.values`, or `placeholder_lengths` for checking the
      other options before the data is read).

  Raises:
    ValueError: a setting out of range, naming it, or an 'auto' length
      missing from `lengths`.
  """
  model = _absolute(args.sentencepiece_model)
  values = {}
  for field, (flag, _, _) in text_lengths.FIELDS.items():
    value = getattr(args, field)
    if value == text_lengths.AUTO:
      if field not in (lengths or {}):
        raise ValueError(f'{flag} auto has not been resolved from the data')
      value = lengths[field]
    values[field] = value
  described = pretrained(args)
  if described:
    if model:
      raise ValueError(
          f'--sentencepiece-model {args.sentencepiece_model} conflicts with '
          f'--hub-model-path {args.hub_model_path}: the {described.model_type}'
          f' checkpoint there is tokenised with its own {described.tokenizer}'
          ' tokenizer; drop --sentencepiece-model')
    length = values[text_lengths.SEQUENCE_LENGTH]
    if described.max_length and length > described.max_length:
      raise ValueError(
          f'--sequence-length {length} exceeds the {described.max_length} '
          f'positions of the {described.model_type} checkpoint at '
          f'{described.path}')
    if length < 3:
      raise ValueError(f'--sequence-length {length} is too short for a '
                       'pretrained encoder: it counts the 2 special tokens')
  tokenizer = ('pretrained' if described else
               'sentencepiece' if model else 'words')
  return settings.TextSettings(
      text_column=args.text_column, label_column=args.label_column,
      id_column=args.id_column, slice_column=args.slice_column,
      vocab_size=args.vocab_size, tokenizer=tokenizer,
      sentencepiece_model=model,
      pretrained_model=described.path if described else '', **values)


def _absolute(path: str) -> str:
  """A local path made absolute (the local run's components do not run in
  the caller's directory); a remote URI as it is."""
  return os.path.abspath(path) if path and '://' not in path else path


def pretrained(args: argparse.Namespace
              ) -> Optional[pretrained_dir.PretrainedDir]:
  """The checkpoint whose tokenizer Transform uses; None for the others.

  That is `--hub-model-path` under `--model hub`, unless it is a SavedModel
  without a known tokenizer and `--sentencepiece-model` is given.

  Raises:
    ValueError: the directory is missing or unsupported (naming why).
  """
  path = _absolute(getattr(args, 'hub_model_path', '') or '')
  if getattr(args, 'model', '') != 'hub' or not path:
    return None
  try:
    return pretrained_dir.describe(path)
  except ValueError as error:
    if args.sentencepiece_model and pretrained_dir.is_savedmodel(path):
      return None
    raise ValueError(f'--hub-model-path: {error}') from None


def placeholder_lengths(args: argparse.Namespace) -> Dict[str, int]:
  """The TextSettings defaults for every length option left at 'auto'."""
  return {field: getattr(_DEFAULTS, field) for field in text_lengths.FIELDS
          if getattr(args, field) == text_lengths.AUTO}


def length_counter(text: settings.TextSettings, args: argparse.Namespace
                  ) -> Optional[text_lengths.LengthCounter]:
  """What the scan of the training texts must count; None if nothing.

  A SentencePiece tokenizer's pieces are not counted (that needs its model
  in the preflight): its `auto` sequence length is the fixed default. A
  pretrained checkpoint's tokens are (`tfx_autostrategy/preflight/token_counts.py`).
  """
  fields = [field for field in placeholder_lengths(args)
            if not (field == text_lengths.SEQUENCE_LENGTH and
                    text.tokenizer == 'sentencepiece')]
  if not fields:
    return None
  length = None
  if (text.tokenizer == 'pretrained' and
      text_lengths.SEQUENCE_LENGTH in fields):
    from tfx_autostrategy.preflight import token_counts  # pylint: disable=g-import-not-at-top
    described = pretrained_dir.describe(text.pretrained_model)
    cap = described.max_length or text_lengths.PRETRAINED_CAP
    length = text_lengths.PretrainedLength(
        token_counts.counter(described),
        cap // conventions.TPU_MULTIPLE * conventions.TPU_MULTIPLE)
  return text_lengths.LengthCounter(fields, text.char_ngram_min,
                                    text.char_ngram_max, length)


@dataclasses.dataclass(frozen=True)
class Lengths:
  """The length options as resolved.

  Attributes:
    values: TextSettings field -> length, for the options left at 'auto'.
    line: what to print ('lengths: ...'); '' if every length was given.
    summary: field -> how it was set, for summary.json.
  """
  values: Dict[str, int]
  line: str
  summary: Dict[str, Dict]


def resolve_lengths(args: argparse.Namespace,
                    counter: Optional[text_lengths.LengthCounter],
                    training_only: bool) -> Lengths:
  """Picks the 'auto' lengths from `counter` (filled by a scan of the data).

  Args:
    args: the parsed options.
    counter: `length_counter`'s counter after the scan (None: none needed).
    training_only: the counted texts are a train split, not all rows.
  """
  choices = text_lengths.pick_all(counter) if counter else {}
  auto = placeholder_lengths(args)
  given = {field: getattr(args, field) for field in text_lengths.FIELDS
           if field not in choices}
  notes = {field: _SENTENCEPIECE_NOTE for field in auto if field in given}
  given.update({field: auto[field] for field in notes})
  values = {field: choice.length for field, choice in choices.items()}
  values.update({field: given[field] for field in notes})
  return Lengths(
      values, text_lengths.describe(choices, given, training_only, notes,
                                    counter.units if counter else None) or '',
      text_lengths.to_summary(choices, given))


def scan_remote(data_root: str, presplit: bool, text: settings.TextSettings,
                counter: text_lengths.LengthCounter) -> None:
  """Counts the training texts under a URI, at compile time (tf.io.gfile).

  Records are found and checked as the `run` preflight finds them
  (`csv_scanner`), file by file.

  Args:
    data_root: the `--data` URI.
    presplit: the data has train/ and eval/ subdirectories.
    text: the column names.
    counter: filled with the training texts.

  Raises:
    ValueError: the files cannot be listed or read, or none match; the
      message names the path and says to pass numbers.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.preflight import csv_layout  # pylint: disable=g-import-not-at-top
  from tfx_autostrategy.preflight import csv_scanner  # pylint: disable=g-import-not-at-top
  split = (conventions.TRAIN_SPLIT if presplit else conventions.SINGLE_SPLIT)
  pattern = data_root.rstrip('/') + '/' + conventions.input_patterns(
      presplit)[split]
  advice = '; pass a number instead of auto: ' + ' '.join(
      f'{text_lengths.FIELDS[field][0]} {getattr(_DEFAULTS, field)}'
      for field in counter.fields)
  try:
    paths = sorted(tf.io.gfile.glob(pattern))
  except tf.errors.OpError as error:
    raise ValueError(f'--data {data_root}: cannot list {pattern} to pick the '
                     f'lengths from the training texts ({error.message})'
                     f'{advice}') from None
  if not paths:
    raise ValueError(f'--data {data_root}: no training CSV files match '
                     f'{pattern}, so the lengths cannot be picked from the '
                     f'data at compile time{advice}')
  allowed = {str(label): label for label in conventions.LABELS}
  for path in paths:
    try:
      with tf.io.gfile.GFile(path, 'rb') as handle:
        columns = csv_layout.read_header(path, handle, text.text_column,
                                         text.label_column)
        csv_scanner.FileScanner(
            columns, text.text_column, text.label_column, text.id_column,
            allowed, 'strict').scan(path, handle, csv_scanner.SplitStats(),
                                    counter)
    except tf.errors.OpError as error:
      raise ValueError(f'--data {data_root}: cannot read {path} ({error.message})'
                       f'{advice}') from None
