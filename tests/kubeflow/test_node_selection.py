"""`--target kubeflow` on an accelerator: the Trainer's GKE node selection.

The KFP package (`.yaml`) carries it as its second YAML document, KFP's
Kubernetes platform spec. Each compiled package is read back the way the KFP
client reads it before uploading (`kfp.client.client._extract_pipeline_yaml`),
and the per-executor config is parsed strictly with kfp-kubernetes' proto.
"""

import subprocess
import sys

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format
from google.protobuf import message_factory
from google.protobuf import struct_pb2
from kfp.client import client as kfp_client
from kfp.kubernetes import kubernetes_executor_config_pb2
import pytest
import yaml

from tfx_autostrategy.kubeflow import compile_options
from tfx_autostrategy.kubeflow import compiler

IMAGE = 'us-docker.pkg.dev/proj/repo/autostrategy:test'
ROOT = 'gs://bucket/root'
TRAINER_EXECUTOR = 'AutoStrategyTrainer_executor'
GPU_TOLERATION = {'key': 'nvidia.com/gpu', 'operator': 'Exists',
                  'effect': 'NoSchedule'}
TPU_TOLERATION = {'key': 'google.com/tpu', 'operator': 'Exists',
                  'effect': 'NoSchedule'}
EXPECTED = {
    'nvidia-t4x2': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-accelerator': 'nvidia-tesla-t4'}},
        'tolerations': [GPU_TOLERATION]},
    'nvidia-l4x8': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-accelerator': 'nvidia-l4'}},
        'tolerations': [GPU_TOLERATION]},
    'nvidia-a100': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-accelerator': 'nvidia-tesla-a100'}},
        'tolerations': [GPU_TOLERATION]},
    # Issue 34's rows.
    'nvidia-h100x8': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-accelerator': 'nvidia-h100-80gb'}},
        'tolerations': [GPU_TOLERATION]},
    'nvidia-a100-80gb': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-accelerator': 'nvidia-a100-80gb'}},
        'tolerations': [GPU_TOLERATION]},
    'tpu-v5e-1': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-tpu-accelerator': 'tpu-v5-lite-podslice',
            'cloud.google.com/gke-tpu-topology': '1x1'}},
        'tolerations': [TPU_TOLERATION]},
    'tpu-v5p-8': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-tpu-accelerator': 'tpu-v5p-slice',
            'cloud.google.com/gke-tpu-topology': '2x2x1'}},
        'tolerations': [TPU_TOLERATION]},
    'tpu-v6e-8': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-tpu-accelerator': 'tpu-v6e-slice',
            'cloud.google.com/gke-tpu-topology': '2x4'}},
        'tolerations': [TPU_TOLERATION]},
    'tpu-v5e-8': {
        'nodeSelector': {'labels': {
            'cloud.google.com/gke-tpu-accelerator': 'tpu-v5-lite-podslice',
            'cloud.google.com/gke-tpu-topology': '2x4'}},
        'tolerations': [TPU_TOLERATION]},
}


def options(accelerator, target='kubeflow', **overrides):
  values = dict(target=target, image=IMAGE, pipeline_root=ROOT,
                data_root='gs://bucket/data', accelerator=accelerator,
                project='proj', region='us-central1')
  values.update(overrides)
  return compile_options.CompileOptions(**values)


def executor_config_class():
  """kfp-kubernetes' `KubernetesExecutorConfig`, with tolerations.

  kfp-kubernetes 1.0.0 is the newest release that fits tfx 1.16's pins (kfp
  2.5, protobuf 3.x); tolerations arrived in 1.1.0. This adds its `Toleration`
  message and `tolerations` field (names, numbers and types as kfp-kubernetes
  1.2.0 declares them) to 1.0.0's file descriptor, in a pool of its own, so
  that the whole config is parsed strictly.
  """
  fields = descriptor_pb2.FieldDescriptorProto
  file_proto = descriptor_pb2.FileDescriptorProto()
  kubernetes_executor_config_pb2.DESCRIPTOR.CopyToProto(file_proto)
  toleration = file_proto.message_type.add(name='Toleration')
  for number, name in enumerate(('key', 'operator', 'value', 'effect'), 1):
    toleration.field.add(name=name, number=number, type=fields.TYPE_STRING,
                         label=fields.LABEL_OPTIONAL)
  toleration.field.add(name='toleration_seconds', number=5,
                       type=fields.TYPE_INT64, label=fields.LABEL_OPTIONAL)
  config = next(m for m in file_proto.message_type
                if m.name == 'KubernetesExecutorConfig')
  config.field.add(name='tolerations', number=12, type=fields.TYPE_MESSAGE,
                   label=fields.LABEL_REPEATED,
                   type_name='.kfp_kubernetes.Toleration')
  pool = descriptor_pool.DescriptorPool()
  struct_proto = descriptor_pb2.FileDescriptorProto()
  struct_pb2.DESCRIPTOR.CopyToProto(struct_proto)
  pool.Add(struct_proto)
  pool.Add(file_proto)
  return message_factory.MessageFactory(pool).GetPrototype(
      pool.FindMessageTypeByName('kfp_kubernetes.KubernetesExecutorConfig'))


@pytest.fixture(scope='module')
def packages(tmp_path_factory):
  """accelerator -> the KFP package's path."""
  out = tmp_path_factory.mktemp('packages')
  paths = {}
  for accelerator in (*EXPECTED, 'cpu'):
    paths[accelerator] = out / f'{accelerator}.yaml'
    compiler.compile_pipeline(options(accelerator), str(paths[accelerator]))
  return paths


@pytest.mark.parametrize('accelerator', sorted(EXPECTED))
def test_trainer_selects_an_accelerator_node(packages, accelerator):
  doc = kfp_client._extract_pipeline_yaml(str(packages[accelerator]))
  assert doc.pipeline_spec.default_pipeline_root == ROOT
  trainer_task = doc.pipeline_spec.root.dag.tasks['AutoStrategyTrainer']
  assert doc.pipeline_spec.components[
      trainer_task.component_ref.name].executor_label == TRAINER_EXECUTOR
  # Only the Trainer is placed; every other step runs on any node.
  kubernetes = doc.platform_spec.platforms['kubernetes']
  executors = kubernetes.deployment_spec.executors
  assert list(executors) == [TRAINER_EXECUTOR]
  config = json_format.ParseDict(
      json_format.MessageToDict(executors[TRAINER_EXECUTOR]),
      executor_config_class()())
  assert json_format.MessageToDict(config) == EXPECTED[accelerator]


def test_cpu_package_has_no_platform_section(packages):
  text = packages['cpu'].read_text()
  assert len(list(yaml.safe_load_all(text))) == 1
  doc = kfp_client._extract_pipeline_yaml(str(packages['cpu']))
  assert not doc.platform_spec.platforms
  assert doc.pipeline_spec.default_pipeline_root == ROOT


def test_vertex_gets_no_kubernetes_section(tmp_path):
  path = tmp_path / 'p.yaml'
  compiler.compile_pipeline(options('tpu-v5e-8', target='vertex'), str(path))
  assert len(list(yaml.safe_load_all(path.read_text()))) == 1


@pytest.mark.parametrize('accelerator', ['tpu-v2-8', 'tpu-v3-8'])
def test_tpus_without_gke_node_pools_are_refused(accelerator):
  with pytest.raises(ValueError) as error:
    options(accelerator)
  assert str(error.value) == (
      f'{accelerator} has no GKE node pools (GKE offers TPU v4 and later), so '
      'a Kubeflow pipeline step cannot get one: use --target vertex, or '
      '--machine tpu-v5e-8')
  # The same machine on Vertex AI compiles.
  options(accelerator, target='vertex')


def test_accelerator_job_json_is_refused_before_tfx_loads(tmp_path):
  path = tmp_path / 'p.json'
  result = subprocess.run(
      [sys.executable, '-c',
       'import sys\n'
       'from tfx_autostrategy import cli\n'
       'code = cli.main(sys.argv[1:])\n'
       'assert "tfx" not in sys.modules, "tfx was imported"\n'
       'sys.exit(code)\n',
       'compile', '--target', 'kubeflow', '--machine', 'nvidia-l4',
       '--output', str(path), '--pipeline-root', ROOT, '--image', IMAGE,
       '--data', 'gs://bucket/data', '--sequence-length', '64',
       '--char-ngram-length', '512'],
      capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --target kubeflow --machine nvidia-l4: the Trainer's node "
      'selector and toleration are written as the Kubernetes platform section '
      'of the KFP package, which only the YAML package carries (and the KFP '
      f"client uploads): use --output NAME.yaml, not '{path}'")
  assert not path.exists()
