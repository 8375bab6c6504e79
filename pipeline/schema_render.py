"""The raw-data schema a run uses: the curated file with the user's columns.

One rendering for every orchestrator: the local run writes the text to
OUT/schema/schema.pbtxt (what the README calls the schema actually used) and
`autostrategy compile` renders it on the laptop; both hand the text to the
pipeline's schema component (`components/inline_schema`), which writes it as
the Schema artifact, so a remote run needs no schema file in the image or the
bucket and the text itself keys the component's cache.
"""

import importlib.resources

from tfx_autostrategy import settings as settings_lib

# Package data (setup.py maps schemas/ onto tfx_autostrategy.schemas); pip
# installs unzipped, so it is a file on disk that open() can read.
SCHEMA_FILE = str(importlib.resources.files('tfx_autostrategy.schemas') /
                  'jigsaw' / 'schema.pbtxt')
# Curated schema column names, renamed when the user's columns differ.
_SCHEMA_COLUMNS = ('text_column', 'label_column', 'id_column', 'slice_column')
# Values of `autostrategy compile --id-type` (the local run sniffs the data).
ID_TYPES = ('string', 'int')


def render_schema_text(text_settings: settings_lib.TextSettings,
                       id_is_int: bool) -> str:
  """The curated schema with the user's column names, as text format.

  The curated file names the default Jigsaw columns; a user who passes
  `--text-column body` gets the same constraints on `body`. Only the id's
  type follows the data (ids are not model features; Jigsaw ships both hex and
  integer ids, and CsvExampleGen types an all-integer column INT).

  Args:
    text_settings: the run's column names (an empty id or slice column drops
      that feature).
    id_is_int: type the id column INT instead of BYTES.

  Returns:
    The schema as a text-format `tensorflow_metadata` Schema.
  """
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  with open(SCHEMA_FILE) as f:
    text_format.Parse(f.read(), schema)
  defaults = settings_lib.TextSettings()
  renames = {getattr(defaults, key): getattr(text_settings, key)
             for key in _SCHEMA_COLUMNS}
  kept = []
  for feature in schema.feature:
    new_name = renames.get(feature.name, feature.name)
    if not new_name:
      continue  # e.g. --id-column '': the data has no id column.
    feature.name = new_name
    if new_name == text_settings.id_column and id_is_int:
      feature.type = schema_pb2.INT
    kept.append(feature)
  del schema.feature[:]
  schema.feature.extend(kept)
  return text_format.MessageToString(schema)


def check_schema_text(text: str, source: str) -> str:
  """Returns `text` if it parses as a Schema, else raises ValueError.

  Args:
    text: text-format Schema.
    source: where it came from, for the message (e.g. the file's path).
  """
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  try:
    schema = text_format.Parse(text, schema_pb2.Schema())
  except text_format.ParseError as error:
    raise ValueError(f'{source}: not a text-format tensorflow_metadata '
                     f'Schema: {error}') from None
  if not schema.feature:
    raise ValueError(f'{source}: the schema lists no feature')
  return text
