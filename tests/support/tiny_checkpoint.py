"""Tiny random Hugging Face checkpoints (config.json + model.safetensors).

Written with the tensor names and layouts of the published BERT, RoBERTa
(XLM-R) and DistilBERT checkpoints (PyTorch's [out, in] linear weights, the
model prefix, a pretraining head beside the encoder), so the converter meets
what a real checkpoint of each family holds, at a size that converts in
seconds.
"""

import json
import os
import struct

import numpy as np


def write_safetensors(path, tensors):
  header, chunks, offset = {}, [], 0
  for name, value in tensors.items():
    raw = np.ascontiguousarray(value, dtype='<f4').tobytes()
    header[name] = {'dtype': 'F32', 'shape': list(value.shape),
                    'data_offsets': [offset, offset + len(raw)]}
    chunks.append(raw)
    offset += len(raw)
  encoded = json.dumps(header).encode()
  with open(path, 'wb') as f:
    f.write(struct.pack('<Q', len(encoded)) + encoded + b''.join(chunks))


def write(root, model_type, seed=0, drop=(), extra=()):
  """Writes a checkpoint to `root`; returns (config dict, tensors by name
  without the model prefix)."""
  rng = np.random.default_rng(seed)
  width, inner, layers, vocab, positions = 16, 32, 2, 50, 40
  r = lambda *shape: rng.normal(0, 0.5, shape).astype(np.float32)
  t = {}
  if model_type == 'distilbert':
    config = dict(model_type='distilbert', vocab_size=vocab, dim=width,
                  n_layers=layers, n_heads=4, hidden_dim=inner,
                  max_position_embeddings=positions, activation='gelu')
    prefix, layer_prefix = 'distilbert.', 'transformer.layer.'
    sub = dict(q='attention.q_lin', k='attention.k_lin', v='attention.v_lin',
               o='attention.out_lin', ln1='sa_layer_norm', i='ffn.lin1',
               o2='ffn.lin2', ln2='output_layer_norm')
  else:
    config = dict(model_type=model_type, vocab_size=vocab, hidden_size=width,
                  num_hidden_layers=layers, num_attention_heads=4,
                  intermediate_size=inner, max_position_embeddings=positions,
                  type_vocab_size=1 if model_type == 'xlm-roberta' else 2,
                  layer_norm_eps=1e-5, hidden_act='gelu',
                  pad_token_id=1 if model_type == 'xlm-roberta' else 0)
    prefix = 'roberta.' if model_type == 'xlm-roberta' else 'bert.'
    layer_prefix = 'encoder.layer.'
    sub = dict(q='attention.self.query', k='attention.self.key',
               v='attention.self.value', o='attention.output.dense',
               ln1='attention.output.LayerNorm', i='intermediate.dense',
               o2='output.dense', ln2='output.LayerNorm')
    t['embeddings.token_type_embeddings.weight'] = r(
        config['type_vocab_size'], width)
    t['pooler.dense.weight'] = r(width, width)
    t['pooler.dense.bias'] = r(width)
  t['embeddings.word_embeddings.weight'] = r(vocab, width)
  t['embeddings.position_embeddings.weight'] = r(positions, width)
  t['embeddings.LayerNorm.weight'] = 1 + r(width)
  t['embeddings.LayerNorm.bias'] = r(width)
  for i in range(layers):
    p = f'{layer_prefix}{i}.'
    for name, (rows, cols) in dict(q=(width, width), k=(width, width),
                                   v=(width, width), o=(width, width),
                                   i=(inner, width), o2=(width, inner)).items():
      t[p + sub[name] + '.weight'] = r(rows, cols)
      t[p + sub[name] + '.bias'] = r(rows)
    for name in ('ln1', 'ln2'):
      t[p + sub[name] + '.weight'] = 1 + r(width)
      t[p + sub[name] + '.bias'] = r(width)
  stored = {prefix + k: v for k, v in t.items() if k not in drop}
  stored.update({k: r(2) for k in extra})
  # A pretraining head beside the encoder is skipped, not an error.
  stored['cls.predictions.bias'] = r(vocab)
  os.makedirs(root, exist_ok=True)
  with open(os.path.join(root, 'config.json'), 'w') as f:
    json.dump(config, f)
  write_safetensors(os.path.join(root, 'model.safetensors'), stored)
  return config, t
