"""Each host of a TPU slice (or worker) reads its own shard of a split.

The Trainer hands `strategy.distribute_datasets_from_function` a function of
the `tf.distribute.InputContext` (`input_pipeline.distributed_dataset`); on a
multi-host slice TensorFlow calls it once per host. Here it is called with
TensorFlow's own InputContext for every host of a 4-host slice, on a real
example stream, and the batches each host reads are collected epoch by
epoch: no example is read twice and none is lost, every epoch.
"""

import collections

import pytest
import tensorflow as tf

from tfx_autostrategy.components.trainer import input_pipeline

HOSTS = 4
REPLICAS_PER_HOST = 2
PER_REPLICA_BATCH = 3
GLOBAL_BATCH = HOSTS * REPLICAS_PER_HOST * PER_REPLICA_BATCH  # 24
EPOCHS = 3


class RecordingStrategy:
  """Only what `distributed_dataset` calls: records the dataset function."""

  def distribute_datasets_from_function(self, dataset_fn):
    self.dataset_fn = dataset_fn
    return 'distributed'


def host_datasets(examples, shuffle):
  """Each host's dataset, as TensorFlow would build it on that host."""
  seen_args = []

  def make_dataset(batch_size, shard):
    seen_args.append((batch_size, shard))
    return input_pipeline.shard_and_batch(
        tf.data.Dataset.range(examples), batch_size, shuffle=shuffle,
        shuffle_buffer_size=examples, shard=shard)

  strategy = RecordingStrategy()
  assert input_pipeline.distributed_dataset(
      strategy, make_dataset, GLOBAL_BATCH) == 'distributed'
  datasets = [strategy.dataset_fn(tf.distribute.InputContext(
      num_input_pipelines=HOSTS, input_pipeline_id=host,
      num_replicas_in_sync=HOSTS * REPLICAS_PER_HOST))
              for host in range(HOSTS)]
  # Batched per replica, host h reading shard h of 4.
  assert seen_args == [(PER_REPLICA_BATCH, (HOSTS, h)) for h in range(HOSTS)]
  return datasets


def read_epochs(dataset, batches_per_epoch):
  batches = [b.numpy().tolist() for b in dataset.take(
      batches_per_epoch * EPOCHS)]
  assert all(len(b) == PER_REPLICA_BATCH for b in batches)
  return [sum(batches[e * batches_per_epoch:(e + 1) * batches_per_epoch], [])
          for e in range(EPOCHS)]


@pytest.mark.parametrize('shuffle', [True, False])
def test_every_example_is_read_once_per_epoch_over_all_hosts(shuffle):
  examples = 96  # 4 steps of the global batch of 24
  per_host_batches = examples // HOSTS // PER_REPLICA_BATCH  # 8
  epochs_by_host = [read_epochs(d, per_host_batches)
                    for d in host_datasets(examples, shuffle)]
  for epoch in range(EPOCHS):
    read = collections.Counter(
        i for host in epochs_by_host for i in host[epoch])
    assert sorted(read) == list(range(examples)), f'epoch {epoch} lost some'
    assert max(read.values()) == 1, f'epoch {epoch} read some twice'
    # Each host keeps its own shard every epoch.
    for host, host_epochs in enumerate(epochs_by_host):
      assert sorted(host_epochs[epoch]) == list(range(host, examples, HOSTS))
  if shuffle:
    # Reshuffled within the shard every epoch.
    assert epochs_by_host[0][0] != epochs_by_host[0][1]
  else:
    assert epochs_by_host[0][0] == list(range(0, examples, HOSTS))


def test_a_remainder_is_dropped_per_host_never_duplicated():
  examples = 100  # 25 per host: 8 batches of 3, one example left over
  per_host_batches = 8
  epochs_by_host = [read_epochs(d, per_host_batches)
                    for d in host_datasets(examples, shuffle=False)]
  read = collections.Counter(i for host in epochs_by_host for i in host[0])
  assert max(read.values()) == 1
  # The first epoch loses each host's last example, nothing else.
  assert set(range(examples)) - set(read) == {96, 97, 98, 99}


def test_a_pipeline_outside_the_slice_is_refused():
  with pytest.raises(ValueError) as error:
    input_pipeline.shard_and_batch(tf.data.Dataset.range(8), 2, False,
                                   shard=(4, 4))
  assert str(error.value) == 'input pipeline 4 of 4 does not exist'
