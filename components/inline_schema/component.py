"""InlineSchemaGen: the Schema artifact from schema text carried in the pipeline.

ImportSchemaGen imports a file by path, which a remote run cannot have when
the schema depends on options given on the laptop (`autostrategy compile
--text-column body`): the path would have to exist in every container, or be
uploaded at compile time. This component carries the rendered schema
(`pipeline/schema_render.py`) as its one parameter and writes it where
ImportSchemaGen would, so downstream components read it the same way, local
and remote runs share one path, and the schema text keys the cache.

Its executor runs in the container from the installed package (the pipeline
uses no module-file wheels remotely). It is not in `code_fingerprint`: its
output is a function of its parameter alone.
"""

import os

from tfx.components.schema_gen import executor as schema_gen_executor
from tfx.dsl.component.experimental.annotations import OutputArtifact
from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

# Where ImportSchemaGen puts it, and what Transform, StatisticsGen, the
# validator and the Trainer read (the only file of the artifact's directory).
SCHEMA_FILE_NAME = schema_gen_executor.DEFAULT_FILE_NAME


@component
def InlineSchemaGen(  # pylint: disable=invalid-name
    schema: OutputArtifact[standard_artifacts.Schema],
    schema_text: Parameter[str]) -> None:
  """Writes `schema_text` as the Schema artifact's schema.pbtxt.

  Args:
    schema: the output Schema artifact.
    schema_text: a text-format tensorflow_metadata Schema.
  """
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  # A malformed text fails here, naming this step, not in a later reader.
  text_format.Parse(schema_text, schema_pb2.Schema())
  fileio.makedirs(schema.uri)
  with fileio.open(os.path.join(schema.uri, SCHEMA_FILE_NAME), 'w') as f:
    f.write(schema_text)
