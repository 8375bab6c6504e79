"""A tiny XLM-R-style checkpoint directory: config.json and a SentencePiece
BPE model trained here (no XLM-R SentencePiece model is on a package
registry). SentencePiece's default ids are XLM-R's: <unk>=0, <s>=1, </s>=2.
"""

import sentencepiece as spm

CORPUS = ['Hello world, hello there.', 'The world is big and the sea is deep.',
          'Привет мир, привет всем.', 'Bonjour le monde.', 'hello HELLO Hello']


def write(path) -> str:
  """Writes the directory at `path` (a pathlib.Path); returns it as str."""
  path.mkdir(parents=True, exist_ok=True)
  corpus = path / 'corpus.txt'
  corpus.write_text('\n'.join(CORPUS * 20), encoding='utf-8')
  spm.SentencePieceTrainer.train(
      input=str(corpus), model_prefix=str(path / 'sentencepiece.bpe'),
      vocab_size=80, model_type='bpe', character_coverage=1.0,
      bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
  (path / 'config.json').write_text(
      '{"model_type": "xlm-roberta", "max_position_embeddings": 514}')
  return str(path)
