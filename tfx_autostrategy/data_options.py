"""The data options `run` and `compile` share: column names and text settings.

Defined once, so that a pipeline compiled for Kubeflow or Vertex AI reads the
same columns and tokenises the same way as `autostrategy run` with the same
flags, with the same defaults and checks.
"""

import argparse
import os

from tfx_autostrategy.components import settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds the column names and Transform's text settings to `parser`."""
  defaults = settings.TextSettings()
  parser.add_argument('--text-column', default=defaults.text_column)
  parser.add_argument('--label-column', default=defaults.label_column)
  parser.add_argument('--id-column', default=defaults.id_column,
                      help="'' if the data has no id column")
  parser.add_argument('--slice-column', default=defaults.slice_column,
                      help="column to slice metrics by ('' for none)")
  parser.add_argument('--sequence-length', type=int,
                      default=defaults.sequence_length)
  parser.add_argument('--char-ngram-length', type=int,
                      default=defaults.char_ngram_length,
                      help='character n-gram ids per example after padding')
  parser.add_argument('--vocab-size', type=int, default=defaults.vocab_size)
  parser.add_argument('--sentencepiece-model', default='',
                      help='SentencePiece model file (a remote URI for '
                      'compile): tokenise with it instead of the word '
                      'vocabulary')


def text_settings(args: argparse.Namespace) -> settings.TextSettings:
  """The TextSettings of parsed `add_arguments` options.

  A local SentencePiece path becomes absolute (the local run's components
  do not run in the caller's directory); a remote URI stays as it is.

  Raises:
    ValueError: a setting out of range, naming it.
  """
  model = args.sentencepiece_model
  if model and '://' not in model:
    model = os.path.abspath(model)
  return settings.TextSettings(
      text_column=args.text_column, label_column=args.label_column,
      id_column=args.id_column, slice_column=args.slice_column,
      sequence_length=args.sequence_length, vocab_size=args.vocab_size,
      char_ngram_length=args.char_ngram_length,
      tokenizer='sentencepiece' if model else 'words',
      sentencepiece_model=model)
