"""AutoStrategyTrainer: executor Do() on real Transform output, resume, errors.

One file (over 300 lines) because its tests share two module-scoped runs of
the real Trainer (`upstream`, `trained`) that a split would repeat.
"""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

from tfx_autostrategy.components.trainer import executor as executor_lib
from tfx_autostrategy.components.trainer import input_pipeline
from tfx_autostrategy.components.trainer import spec as spec_lib
from tfx_autostrategy.components.trainer import trainer_module
from tfx_autostrategy import conventions
from tfx_autostrategy.pipeline import config as config_lib
from tfx_autostrategy import settings as settings_lib

SCRIPT = os.path.join(os.path.dirname(__file__), 'trainer_executor_script.py')


def _only_dir(pattern):
  found = sorted(glob.glob(pattern))
  assert found, pattern
  return found[-1]


@pytest.fixture(scope='module')
def upstream(pipeline_run):
  """Transform and StatisticsGen artifacts of the shared real pipeline run."""
  _, _, output = pipeline_run
  root = os.path.join(output, 'pipeline_root')
  return {
      'examples': _only_dir(os.path.join(root, 'Transform',
                                         'transformed_examples', '*')),
      'transform_graph': _only_dir(os.path.join(root, 'Transform',
                                                'transform_graph', '*')),
      'statistics': _only_dir(os.path.join(root, 'StatisticsGen', 'statistics',
                                           '*')),
  }


@pytest.fixture(scope='module')
def run_text(pipeline_run):
  """The TextSettings the shared run's Transform used (its lengths are `auto`)."""
  _, result, _ = pipeline_run
  return settings_lib.TextSettings(**result['text_lengths'])


def exec_properties(text, **trainer_overrides):
  trainer_settings = settings_lib.TrainerSettings(**{
      'epochs': 2, 'per_replica_batch_size': 16, **trainer_overrides})
  properties = {
      'train_args': '{}',
      'eval_args': '{}',
      'module_file': config_lib.TRAINER_MODULE_FILE,
      'custom_config': '{}',
      **spec_lib.settings_parameters(trainer_settings, text),
  }
  return properties


def run_executor(upstream, tmp_path, properties, pause_after_epoch=0,
                 statistics=True, wait=True, base_model='', pause_after_step=0,
                 env=None):
  spec = {
      **upstream,
      'base_model': base_model,
      'statistics': upstream['statistics'] if statistics else '',
      'model': str(tmp_path / 'AutoStrategyTrainer' / 'model' / '7'),
      'model_run': str(tmp_path / 'AutoStrategyTrainer' / 'model_run' / '7'),
      'exec_properties': properties,
  }
  spec_path = tmp_path / 'spec.json'
  spec_path.write_text(json.dumps(spec))
  command = [sys.executable, SCRIPT, str(spec_path)]
  if pause_after_epoch:
    command += ['--pause-after-epoch', str(pause_after_epoch)]
  if pause_after_step:
    command += ['--pause-after-step', str(pause_after_step)]
  env = {**os.environ, **(env or {})}
  if not wait:
    return subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env), spec
  proc = subprocess.run(command, capture_output=True, text=True, timeout=600,
                        check=False, env=env)
  return proc, spec


SERVE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    model = tf.saved_model.load(sys.argv[1])
    examples = [tf.train.Example(features=tf.train.Features(feature={
        'comment_text': tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[t.encode()]))})).SerializeToString()
        for t in ['idiot', 'hello friend', 'ciao']]
    out = model.signatures['serving_default'](examples=tf.constant(examples))
    p = out['probabilities']
    print(json.dumps({'shape': p.shape.as_list(), 'dtype': p.dtype.name,
                      'values': p.numpy().tolist()}))
""")


def serve(model_dir):
  proc = subprocess.run([sys.executable, '-c', SERVE, model_dir],
                        capture_output=True, text=True, timeout=300,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def trained(upstream, run_text, tmp_path_factory):
  """One executor run: (process, spec)."""
  return run_executor(upstream, tmp_path_factory.mktemp('trained'),
                      exec_properties(run_text))


def test_executor_trains_from_statistics_and_exports(upstream, trained):
  proc, spec = trained
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  log = proc.stdout + proc.stderr
  plan = json.loads(re.search(r'autostrategy: (\{.*"global_batch_size".*\})',
                              log).group(1))
  assert plan['global_batch_size'] == 16 * plan['num_replicas']
  history = json.load(open(os.path.join(spec['model_run'],
                                        conventions.HISTORY_FILE)))
  assert [h['epoch'] for h in history] == [1, 2]
  served = serve(os.path.join(spec['model'], 'Format-Serving'))
  assert served['shape'] == [3] and served['dtype'] == 'float32'
  assert all(0.0 <= v <= 1.0 for v in served['values'])
  # Steps came from the statistics artifact: train examples // global batch.
  counts = executor_lib.example_counts(_stats_artifact(upstream['statistics']))
  steps = counts['train'] // plan['global_batch_size']
  assert f'{steps}/{steps}' in log
  # Both splits of the sample fit the default budget: decoded once, cached.
  assert re.search(r'autostrategy: input: \d+ bytes per decoded example; '
                   r'cached in memory: train, eval \(budget 1024 MiB\)', log)


def test_warm_start_from_a_base_model(upstream, run_text, trained, tmp_path):
  _, cold_spec = trained
  proc, spec = run_executor(upstream, tmp_path,
                            exec_properties(run_text, epochs=1),
                            base_model=cold_spec['model'])
  assert proc.returncode == 0, proc.stderr[-3000:]
  base = os.path.join(cold_spec['model'], 'Format-Serving')
  assert f'autostrategy: warm-started from {base}' in proc.stdout + proc.stderr

  def first_epoch_loss(model_run):
    with open(os.path.join(model_run, conventions.HISTORY_FILE)) as f:
      return json.load(f)[0]['loss']
  # Starting from trained weights, the first epoch's loss is already lower.
  assert (first_epoch_loss(spec['model_run']) <
          first_epoch_loss(cold_spec['model_run']))

  from tfx_autostrategy.modeling import models  # pylint: disable=g-import-not-at-top
  other = models.build(settings_lib.TextSettings(),
                       settings_lib.TrainerSettings(model='transformer'))
  with pytest.raises(ValueError, match="does not fit model 'transformer'"):
    trainer_module.warm_start(other, base)
  with pytest.raises(ValueError, match='no SavedModel variables'):
    trainer_module.warm_start(other, str(tmp_path))


def test_tuner_hyperparameters_override_tunable_settings(caplog):
  base = settings_lib.TrainerSettings(learning_rate=1e-3, epochs=3)
  assert trainer_module.apply_hyperparameters(base, None) == base
  tuned = trainer_module.apply_hyperparameters(
      base, {'space': [], 'values': {'learning_rate': 0.01, 'epochs': 5,
                                     'units': 32}})
  assert tuned.learning_rate == 0.01 and tuned.epochs == 5
  assert tuned.per_replica_batch_size == base.per_replica_batch_size
  assert "ignoring hyperparameters ['units']" in caplog.text
  with pytest.raises(ValueError, match="model must be one of"):
    trainer_module.apply_hyperparameters(base, {'model': 'xgboost'})


def _stats_artifact(uri):
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  artifact = standard_artifacts.ExampleStatistics()
  artifact.uri = uri
  artifact.split_names = artifact_utils.encode_split_names(['train', 'eval'])
  return artifact


def read_until_paused(proc, seconds=420):
  """The executor's output up to its PAUSED line; then kills it (SIGKILL)."""
  output = []
  deadline = time.monotonic() + seconds
  try:
    for line in proc.stdout:
      output.append(line)
      if line.startswith('PAUSED'):
        break
      assert time.monotonic() < deadline, ''.join(output[-50:])
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
  return ''.join(output)


def test_killed_trainer_resumes_from_the_last_finished_epoch(upstream, run_text,
                                                             tmp_path):
  properties = exec_properties(run_text, epochs=2)
  proc, spec = run_executor(upstream, tmp_path, properties,
                            pause_after_epoch=1, wait=False)
  first = read_until_paused(proc)
  assert 'autostrategy: epoch 1/2 finished' in first, first[-3000:]
  assert 'epoch 2/2 started' not in first

  rerun, _ = run_executor(upstream, tmp_path, properties)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  log = rerun.stdout + rerun.stderr
  started = re.findall(r'autostrategy: epoch (\d)/2 started', log)
  assert started == ['2'], log[-3000:]
  history = json.load(open(os.path.join(spec['model_run'],
                                        conventions.HISTORY_FILE)))
  assert [h['epoch'] for h in history] == [1, 2]
  assert serve(os.path.join(spec['model'], 'Format-Serving'))['shape'] == [3]


def test_killed_tpu_trainer_loses_at_most_the_steps_since_its_step_backup(
    upstream, run_text, tmp_path):
  # A TPU gets no preemption notice, so its plan backs up every N steps. The
  # TPU runtime and its device discovery are the rehearsal stand-ins (two
  # logical CPU devices for two cores); the TPU plan, BackupAndRestore, the
  # kill and the resume are real. Backups every 4 steps at 2 steps per
  # execution: saved after steps 4 and 8; killed right after step 8.
  shape = {'name': 'tpu-v3-8', 'kind': 'tpu', 'accelerators_per_worker': 2,
           'workers': 1, 'tpu_type': 'v3-8'}
  properties = exec_properties(run_text, epochs=1, per_replica_batch_size=8,
                               accelerator='tpu', steps_per_execution=2,
                               backup_every_steps=4)
  properties['train_args'] = json.dumps({'num_steps': 16})
  properties['eval_args'] = json.dumps({'num_steps': 2})
  properties['custom_config'] = json.dumps(
      {trainer_module.REHEARSAL_KEY: shape})
  env = {'AUTOSTRATEGY_CPU_REPLICAS': '2'}
  proc, spec = run_executor(upstream, tmp_path, properties,
                            pause_after_step=8, wait=False, env=env)
  first = read_until_paused(proc)
  assert 'PAUSED at step 8' in first, first[-3000:]
  plan = json.load(open(os.path.join(spec['model_run'],
                                     conventions.PLAN_FILE)))
  assert (plan['strategy'], plan['num_replicas'], plan['global_batch_size'],
          plan['steps_per_execution'], plan['backup_every_steps'],
          plan['precision']) == ('TPUStrategy', 2, 16, 2, 4, 'mixed_bfloat16')
  assert not os.path.exists(os.path.join(spec['model'], 'Format-Serving'))

  rerun, _ = run_executor(upstream, tmp_path, properties, env=env)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  log = rerun.stdout + rerun.stderr
  progress = [line for line in log.splitlines()
              if 'autostrategy: ' in line and 'autostrategy: {' not in line]
  # Nothing after the step-8 backup was kept, nothing before it was lost.
  assert ('INFO autostrategy: resumed from the backup at optimizer step 8 '
          '(batch index 7 of the epoch)' in progress), progress
  history = json.load(open(os.path.join(spec['model_run'],
                                        conventions.HISTORY_FILE)))
  assert [h['epoch'] for h in history] == [1]
  assert serve(os.path.join(spec['model'], 'Format-Serving'))['shape'] == [3]


def test_too_little_data_names_the_split_count_and_batch(upstream, run_text,
                                                         tmp_path):
  proc, _ = run_executor(upstream, tmp_path,
                         exec_properties(run_text,
                                         per_replica_batch_size=100000))
  assert proc.returncode != 0
  assert re.search(r"split 'train' has \d+ examples, fewer than one global "
                   r'batch of 100000', proc.stderr), proc.stderr[-3000:]


def test_steps_for_split():
  assert input_pipeline.steps_for_split('train', None, {'train': 100}, 32) == 3
  assert input_pipeline.steps_for_split('train', 10, {}, 32, divide_by=2) == 5
  with pytest.raises(input_pipeline.TrainingDataError,
                     match="split 'eval' has 31 examples, fewer than one "
                     'global batch of 32'):
    input_pipeline.steps_for_split('eval', None, {'eval': 31}, 32)
  with pytest.raises(input_pipeline.TrainingDataError,
                     match="no example count"):
    input_pipeline.steps_for_split('train', None, {}, 32)


def test_tpu_refuses_fixed_lengths_off_the_tiling_rule():
  input_pipeline.check_tpu_lengths(settings_lib.TextSettings(
      sequence_length=64, char_ngram_length=512))
  with pytest.raises(input_pipeline.TrainingDataError) as raised:
    input_pipeline.check_tpu_lengths(settings_lib.TextSettings(
        sequence_length=64, char_ngram_length=500))
  assert str(raised.value) == (
      'char_ngram_length 500 is not a multiple of 8: the TPU tiles fixed '
      'feature lengths in multiples of 8, and Transform already wrote ids of '
      'length 500; rerun with --char-ngram-length 504')
  # Without character n-grams only the word ids count.
  with pytest.raises(input_pipeline.TrainingDataError, match=(
      'sequence_length 60 is not a multiple of 8.*--sequence-length 64')):
    input_pipeline.check_tpu_lengths(settings_lib.TextSettings(
        sequence_length=60, char_ngram_min=0, char_ngram_length=500))


def test_check_static_shapes_names_the_dynamic_feature():
  dataset = tf.data.Dataset.from_tensors(
      ({'text_ids': tf.zeros([4, 8], tf.int64)}, tf.zeros([4], tf.int64)))
  input_pipeline.check_static_shapes(dataset)
  ragged = tf.data.Dataset.from_tensor_slices(
      ({'text_ids': tf.zeros([4, 8], tf.int64)}, tf.zeros([4], tf.int64))
  ).batch(3)  # Without drop_remainder the batch dimension is unknown.
  with pytest.raises(input_pipeline.TrainingDataError,
                     match="feature 'text_ids' has no static shape"):
    input_pipeline.check_static_shapes(ragged)


def test_cache_plan_fills_train_first_then_eval():
  mib = 1 << 20
  # 10,000 bytes per example, 1 MiB: 100 train examples fit, 50 eval do not.
  assert input_pipeline.cache_plan({'train': 100, 'eval': 50}, 10_000,
                                   1) == {'train': True, 'eval': False}
  assert input_pipeline.cache_plan({'train': 200, 'eval': 50}, 10_000,
                                   1) == {'train': False, 'eval': True}
  assert input_pipeline.cache_plan({'train': 100, 'eval': 4}, 10_000,
                                   1) == {'train': True, 'eval': True}
  assert input_pipeline.cache_plan({'train': 1, 'eval': 1}, mib,
                                   0) == {'train': False, 'eval': False}
  # Unknown counts (explicit steps, no statistics): stream.
  assert input_pipeline.cache_plan({}, 10, 1024) == {'train': False,
                                                     'eval': False}


def _transformed(upstream):
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  from bench import training_worker  # pylint: disable=g-import-not-at-top
  fn_args = training_worker.fn_args_for(upstream['examples'],
                                        upstream['transform_graph'])
  return fn_args, tft.TFTransformOutput(fn_args.transform_output)


def _rows(batches):
  """Each example of the batches as one hashable row (label last)."""
  rows = []
  for features, labels in batches:
    columns = [features[k].numpy() for k in sorted(features)]
    for i, label in enumerate(labels.numpy()):
      rows.append(tuple(v for c in columns for v in c[i]) + (int(label),))
  return rows


def test_decoded_example_bytes_counts_every_transformed_feature(upstream,
                                                                run_text):
  _, tf_transform_output = _transformed(upstream)
  text = run_text
  # text_ids + char_ngrams + the label, int64 each, and the n-grams'
  # float32 weights.
  assert input_pipeline.decoded_example_bytes(tf_transform_output) == (
      (text.sequence_length + text.char_ngram_length + 1) * 8 +
      text.char_ngram_length * 4)


def test_cached_input_yields_the_streamed_examples(upstream):
  import collections  # pylint: disable=g-import-not-at-top
  fn_args, tf_transform_output = _transformed(upstream)
  counts = executor_lib.example_counts(_stats_artifact(upstream['statistics']))
  batch = 32
  steps = counts['train'] // batch

  def dataset(shuffle, cache):
    return input_pipeline.input_dataset(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output,
        batch, shuffle=shuffle, cache=cache,
        shuffle_buffer_size=input_pipeline.shuffle_buffer_for(
            counts['train']))

  cached = dataset(shuffle=False, cache=True)
  input_pipeline.check_static_shapes(cached)
  assert cached.element_spec[1].shape.as_list() == [batch]
  # Unshuffled, the cached path yields the streamed batches in order.
  streamed_rows = _rows(dataset(shuffle=False, cache=False).take(steps))
  cached_rows = _rows(cached.take(steps))
  assert cached_rows == streamed_rows
  assert len(cached_rows) == steps * batch
  everything = collections.Counter(
      _rows(input_pipeline.input_dataset(
          fn_args.train_files, fn_args.data_accessor, tf_transform_output,
          1, shuffle=False, cache=True).take(counts['train'])))
  assert sum(everything.values()) == counts['train']
  # Shuffled: the stream is one permutation of the whole split after another
  # (batches run across the boundary; the remainder is not lost).
  total = counts['train']
  shuffled = _rows(dataset(shuffle=True, cache=True).take(
      -(-2 * total // batch)))
  first, second = shuffled[:total], shuffled[total:2 * total]
  assert collections.Counter(first) == everything
  assert collections.Counter(second) == everything
  assert first != second and first[:batch] != cached_rows[:batch]


@pytest.mark.parametrize('cache', [False, True])
def test_each_input_pipeline_reads_its_own_shard_every_epoch(upstream, cache):
  """One input pipeline per host of a TPU slice (or per worker) reads a
  disjoint share of the real Transform output: over all pipelines every
  example once per epoch, and each pipeline the same share every epoch,
  reshuffled."""
  import collections  # pylint: disable=g-import-not-at-top
  fn_args, tf_transform_output = _transformed(upstream)
  counts = executor_lib.example_counts(_stats_artifact(upstream['statistics']))
  total = counts['train']
  pipelines = 3
  everything = collections.Counter(_rows(input_pipeline.input_dataset(
      fn_args.train_files, fn_args.data_accessor, tf_transform_output, 1,
      shuffle=False, cache=True).take(total)))

  def epochs(index):
    """Two epochs of pipeline `index`, batch 1 (so no remainder is lost)."""
    size = len(range(index, total, pipelines))
    rows = _rows(input_pipeline.input_dataset(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output, 1,
        shuffle=True, cache=cache, shard=(pipelines, index),
        shuffle_buffer_size=total).take(2 * size))
    return rows[:size], rows[size:]

  shares = [epochs(index) for index in range(pipelines)]
  for epoch in range(2):
    read = collections.Counter()
    for share in shares:
      read.update(share[epoch])
    assert read == everything, f'epoch {epoch}'
  for first, second in shares:
    assert collections.Counter(first) == collections.Counter(second)
    assert first != second  # reshuffled


def _write_stats(tmp_path, labels):
  import pandas as pd  # pylint: disable=g-import-not-at-top
  import tensorflow_data_validation as tfdv  # pylint: disable=g-import-not-at-top
  uri = tmp_path / 'stats'
  for split in ('train', 'eval'):
    stats = tfdv.generate_statistics_from_dataframe(
        pd.DataFrame({'toxic': labels, 'comment_text': ['x'] * len(labels)}))
    (uri / f'Split-{split}').mkdir(parents=True)
    (uri / f'Split-{split}' / 'FeatureStats.pb').write_bytes(
        stats.SerializeToString())
  return _stats_artifact(str(uri))


def test_labels_outside_zero_one_are_rejected_before_training(tmp_path):
  executor_lib.check_labels(_write_stats(tmp_path / 'ok', [0, 1, 1, 0]),
                            'toxic')
  with pytest.raises(executor_lib.LabelError,
                     match=r"label column 'toxic' in split '(train|eval)' has "
                     r'values outside \(0, 1\): min=-1, max=2'):
    executor_lib.check_labels(_write_stats(tmp_path / 'bad', [0, 2, -1, 1]),
                              'toxic')
  with pytest.raises(executor_lib.LabelError, match='holds strings'):
    executor_lib.check_labels(
        _write_stats(tmp_path / 'str', ['yes', 'no', 'no', 'yes']), 'toxic')
