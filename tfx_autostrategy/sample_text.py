"""The text of one synthetic comment, from per-language word lists.

`comment(rng, lang, toxic)` builds a comment from the word lists of
`sample/vocabularies.json` (en, es, it, tr, ru, fr, pt, de: neutral words,
mild insults, hostile phrases, second-person frames and templates that quote
or negate an insult) and decorates it as real comments are: URLs, numbers,
emoji, mixed case, misspellings, obfuscated insults ("1d10t", "stuuupid"),
commas, quotes and newlines. A toxic comment holds a plain insult only most
of the time (otherwise an obfuscated one, or only hostile phrasing); a
neutral one sometimes quotes or negates an insult. It also says whether the
comment is ambiguous, which `sample_data` uses for label noise.

Rows, ids, labels, the CSV layouts and the command are `sample_data`.
"""

import dataclasses
import importlib.resources
import json
import random
from typing import Dict, List, Tuple

# How a toxic comment shows its toxicity (the rest only by hostile phrasing).
_TOXIC_PLAIN = 0.85
_TOXIC_OBFUSCATED_ONLY = 0.09
# Neutral comments that mention an insult in a quoted or negated context.
_NEUTRAL_MENTION = 0.08
# Neutral comments that use an insult word about a thing, not a person.
_NEUTRAL_BARE_INSULT = 0.02
_NEUTRAL_HOSTILE = 0.03


@dataclasses.dataclass(frozen=True)
class _Vocabulary:
  """Word lists of one language.

  Attributes:
    neutral: everyday and wiki-talk words, function words included.
    insults: mild insults ("idiot", "stupid" and their translations).
    hostile: hostile phrases without an insult word ("nobody cares").
    you: second-person frame that precedes an insult ("you are").
    mentions: templates that quote or negate an insult; `{}` is the insult.
  """
  neutral: Tuple[str, ...]
  insults: Tuple[str, ...]
  hostile: Tuple[str, ...]
  you: Tuple[str, ...]
  mentions: Tuple[str, ...]


def _load_vocabularies() -> Dict[str, _Vocabulary]:
  """The word lists of every language, from `sample/vocabularies.json`."""
  text = importlib.resources.files('tfx_autostrategy').joinpath(
      'sample', 'vocabularies.json').read_text(encoding='utf-8')
  return {lang: _Vocabulary(**{name: tuple(words)
                               for name, words in lists.items()})
          for lang, lists in json.loads(text).items()}


# Language -> word lists, in the file's order (the generator draws from it).
_VOCABULARIES: Dict[str, _Vocabulary] = _load_vocabularies()

# The languages of the word lists, in the file's order.
LANGUAGES = tuple(_VOCABULARIES)

_NEUTRAL_EMOJI = ('👍', '🙂', '😊', '🎉', '📚', '⚽', '🎵', '🌍')
_HOSTILE_EMOJI = ('🙄', '😡', '🤡', '🤬', '👎')
_URLS = ('https://example.org/wiki/{}', 'http://www.example.com/{}?id={}',
         'www.example.net/{}', 'https://example.com/a/{}#ref{}')
_END_NEUTRAL = ('.', '.', '.', '', '?', '!', '...', ' :)')
_END_TOXIC = ('.', '!', '!!', '!!!', '', '?!', '...')
_LEET = {'a': '4', 'e': '3', 'i': '1', 'o': '0', 's': '5',
         'A': '4', 'E': '3', 'I': '1', 'O': '0', 'S': '$',
         'а': '@', 'о': '0', 'е': '3', 'з': '3', 'ı': '1', 'İ': '1'}
_VOWELS = frozenset('aeiouyáéíóúàèìòùâêîôûäöüıаеёиоуыэюя')


def _obfuscate(rng: random.Random, word: str) -> str:
  """Disguises an insult the way people dodge word filters."""
  style = rng.random()
  if style < 0.4:
    # Full substitution, so the same disguise ("1d10t") recurs across comments.
    leet = ''.join(_LEET.get(c, c) for c in word)
    if leet != word:
      return leet
  if style < 0.7:
    vowels = [i for i, c in enumerate(word) if c.lower() in _VOWELS]
    if vowels:
      i = rng.choice(vowels)
      return word[:i] + word[i] * rng.randint(3, 5) + word[i + 1:]
  if style < 0.85 and len(word) > 3:
    i = rng.randint(1, len(word) - 2)
    return word[:i] + '*' + word[i + 1:]
  return rng.choice(('.', ' ', '-')).join(word)


def _typo(rng: random.Random, word: str) -> str:
  """A misspelling: a repeated or a swapped letter."""
  if len(word) < 4:
    return word
  i = rng.randint(1, len(word) - 2)
  if rng.random() < 0.5:
    return word[:i] + word[i] + word[i:]
  return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def _upper(text: str, lang: str) -> str:
  if lang == 'tr':
    # Turkish dotted/dotless i: str.upper() would turn 'i' into 'I'.
    text = text.replace('i', 'İ').replace('ı', 'I')
  return text.upper()


def _neutral_words(rng: random.Random, vocab: _Vocabulary) -> List[str]:
  if rng.random() < 0.1:
    length = rng.randint(20, 45)
  else:
    length = rng.randint(3, 16)
  words = rng.choices(vocab.neutral, k=length)
  if rng.random() < 0.1:
    i = rng.randrange(length)
    words[i] = _typo(rng, words[i])
  return words


def _insert(rng: random.Random, words: List[str], phrase: str) -> None:
  words.insert(rng.randint(0, len(words)), phrase)


def _toxic_text(rng: random.Random,
                vocab: _Vocabulary) -> Tuple[List[str], bool]:
  """Words of a toxic comment, and whether its toxicity is ambiguous."""
  words = _neutral_words(rng, vocab)
  if len(words) > 20:
    del words[rng.randint(8, 20):]
  mode = rng.random()
  plain = mode < _TOXIC_PLAIN
  if plain:
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
      insult = rng.choice(vocab.insults)
      if rng.random() < 0.15:
        insult = _obfuscate(rng, insult)
      if rng.random() < 0.5:
        insult = rng.choice(vocab.you) + ' ' + insult
      _insert(rng, words, insult)
  elif mode < _TOXIC_PLAIN + _TOXIC_OBFUSCATED_ONLY:
    insult = _obfuscate(rng, rng.choice(vocab.insults))
    if rng.random() < 0.5:
      insult = rng.choice(vocab.you) + ' ' + insult
    _insert(rng, words, insult)
  if rng.random() < (0.15 if plain else 0.5):
    _insert(rng, words, rng.choice(vocab.hostile))
  return words, not plain


def _neutral_text(rng: random.Random,
                  vocab: _Vocabulary) -> Tuple[List[str], bool]:
  """Words of a neutral comment, and whether it is ambiguous."""
  words = _neutral_words(rng, vocab)
  ambiguous = False
  if rng.random() < _NEUTRAL_MENTION:
    _insert(rng, words, rng.choice(vocab.mentions).format(
        rng.choice(vocab.insults)))
    ambiguous = True
  if rng.random() < _NEUTRAL_BARE_INSULT:
    _insert(rng, words, rng.choice(vocab.insults))
    ambiguous = True
  if rng.random() < _NEUTRAL_HOSTILE:
    _insert(rng, words, rng.choice(vocab.hostile))
    ambiguous = True
  if rng.random() < 0.03:
    # A quoted word, so that quote characters are not a toxicity signal.
    i = rng.randrange(len(words))
    words[i] = '"' + words[i] + '"'
  return words, ambiguous


def comment(rng: random.Random, lang: str, toxic: bool) -> Tuple[str, bool]:
  """One comment (words plus the decorations real comments have).

  Args:
    rng: the generator's random state (the rows' one, so that output depends
      only on the seed).
    lang: a code of `LANGUAGES`.
    toxic: write a toxic comment (else a neutral one).

  Returns:
    The text, and whether its label is ambiguous.
  """
  vocab = _VOCABULARIES[lang]
  make_words = _toxic_text if toxic else _neutral_text
  words, ambiguous = make_words(rng, vocab)
  if rng.random() < 0.12:
    _insert(rng, words, str(rng.choice((
        rng.randint(1, 99), rng.randint(1900, 2024), rng.randint(1000, 99999),
        '%d,%03d' % (rng.randint(1, 99), rng.randint(0, 999)),
        '%.1f' % (rng.random() * 100)))))
  if rng.random() < 0.06:
    url = rng.choice(_URLS)
    _insert(rng, words, url.format(rng.choice(vocab.neutral).replace(' ', '_'),
                                   rng.randint(1, 9999)))
  if rng.random() < 0.12:
    emoji = _HOSTILE_EMOJI if toxic and rng.random() < 0.6 else _NEUTRAL_EMOJI
    words.append(rng.choice(emoji) * rng.randint(1, 3))
  if len(words) > 3 and rng.random() < 0.25:
    i = rng.randint(1, len(words) - 2)
    words[i] += ','
  if len(words) > 5 and rng.random() < 0.06:
    i = rng.randint(2, len(words) - 2)
    words[i] += rng.choice(('.\n', '\n\n', '\n- '))
  text = ' '.join(words)
  text += rng.choice(_END_TOXIC if toxic else _END_NEUTRAL)
  if rng.random() < (0.12 if toxic else 0.03):
    text = _upper(text, lang)
  elif rng.random() < 0.7:
    text = _upper(text[0], lang) + text[1:]
  if rng.random() < 0.02:
    text = ' ' + text + '  '
  return text, ambiguous
