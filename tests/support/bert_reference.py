"""An independent BERT / RoBERTa / DistilBERT reader and forward pass.

Written in NumPy from the published model definitions, reading the
safetensors file with its own few lines; it shares no code with
tfx_autostrategy/modeling/hf_checkpoint.py, which tests/modeling/
test_hf_checkpoint.py and tests/pipeline/test_hub_tpu_rehearsal.py check
against it. Token ids come from Hugging Face's own tokenizer.
"""

import json
import math
import os

import numpy as np
import tensorflow as tf


def read_safetensors(path):
  with open(path, 'rb') as f:
    data = f.read()
  size = int.from_bytes(data[:8], 'little')
  header = json.loads(data[8:8 + size])
  out = {}
  for name, info in header.items():
    if name == '__metadata__':
      continue
    start, end = info['data_offsets']
    dtype = {'F32': '<f4', 'I64': '<i8'}[info['dtype']]
    out[name] = np.frombuffer(data[8 + size + start:8 + size + end],
                              dtype=dtype).reshape(info['shape'])
  return out


def _layer_norm(x, w, b, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * w + b


def _gelu(x):
  return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def forward(t, config, ids, mask, type_ids):
  """(sequence_output, first-token output) of a BERT/RoBERTa/DistilBERT.

  Args:
    t: the checkpoint's tensors by name (`read_safetensors`).
    config: its config.json.
    ids, mask, type_ids: [batch, length] token ids, attention mask, segments.
  """
  ids, mask = np.asarray(ids), np.asarray(mask)
  kind = config['model_type']
  if kind == 'distilbert':
    layers, heads, eps = config['n_layers'], config['n_heads'], 1e-12
    lin = lambda p, x: x @ t[p + '.weight'].T + t[p + '.bias']
    names = dict(q='attention.q_lin', k='attention.k_lin',
                 v='attention.v_lin', o='attention.out_lin',
                 ln1='sa_layer_norm', i='ffn.lin1', o2='ffn.lin2',
                 ln2='output_layer_norm')
    prefix = 'transformer.layer.'
  else:
    layers, heads = config['num_hidden_layers'], config['num_attention_heads']
    eps = config['layer_norm_eps']
    lin = lambda p, x: x @ t[p + '.weight'].T + t[p + '.bias']
    names = dict(q='attention.self.query', k='attention.self.key',
                 v='attention.self.value', o='attention.output.dense',
                 ln1='attention.output.LayerNorm', i='intermediate.dense',
                 o2='output.dense', ln2='output.LayerNorm')
    prefix = 'encoder.layer.'
  if kind == 'xlm-roberta':
    pad = config['pad_token_id']
    positions = np.cumsum(mask, axis=1) * mask + pad
  else:
    positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
  x = (t['embeddings.word_embeddings.weight'][ids] +
       t['embeddings.position_embeddings.weight'][positions])
  if kind != 'distilbert':
    x = x + t['embeddings.token_type_embeddings.weight'][np.asarray(type_ids)]
  x = _layer_norm(x, t['embeddings.LayerNorm.weight'],
                  t['embeddings.LayerNorm.bias'], eps)
  batch, length, width = x.shape
  d = width // heads
  bias = (1.0 - mask[:, None, None, :]) * -1e9
  for i in range(layers):
    p = f'{prefix}{i}.'
    split = lambda y: y.reshape(batch, length, heads, d).transpose(0, 2, 1, 3)
    q, k, v = (split(lin(p + names[n], x)) for n in 'qkv')
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
    x = _layer_norm(x + lin(p + names['o'], context),
                    t[p + names['ln1'] + '.weight'],
                    t[p + names['ln1'] + '.bias'], eps)
    inner = _gelu(lin(p + names['i'], x))
    x = _layer_norm(x + lin(p + names['o2'], inner),
                    t[p + names['ln2'] + '.weight'],
                    t[p + names['ln2'] + '.bias'], eps)
  if 'pooler.dense.weight' in t:
    pooled = np.tanh(lin('pooler.dense', x[:, 0]))
  else:
    pooled = x[:, 0]
  return x, pooled


def run_encoder(encoder_dir, ids, mask, type_ids, training=False):
  """(sequence_output, pooled_output) of a converted SavedModel encoder."""
  encoder = tf.saved_model.load(encoder_dir)
  inputs = {'input_word_ids': tf.constant(ids, tf.int32),
            'input_mask': tf.constant(mask, tf.int32),
            'input_type_ids': tf.constant(type_ids, tf.int32)}
  out = encoder(inputs, training=training)
  return out['sequence_output'].numpy(), out['pooled_output'].numpy()


def token_ids(checkpoint_dir, texts, length=None):
  """(ids, mask) from the checkpoint's own tokenizer.json (Hugging Face's
  `tokenizers`), padded with 0 to `length` (default: the longest)."""
  import tokenizers  # pylint: disable=g-import-not-at-top
  tokenizer = tokenizers.Tokenizer.from_file(
      os.path.join(checkpoint_dir, 'tokenizer.json'))
  tokenizer.no_truncation()
  tokenizer.no_padding()
  encodings = tokenizer.encode_batch(texts)
  length = length or max(len(e.ids) for e in encodings)
  ids = np.zeros([len(texts), length], np.int64)
  mask = np.zeros_like(ids)
  for row, encoding in enumerate(encodings):
    ids[row, :len(encoding.ids)] = encoding.ids
    mask[row, :len(encoding.ids)] = 1
  return ids, mask
