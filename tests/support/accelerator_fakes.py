"""Stand-ins for what a CPU machine cannot have: TPU runtime, GPU devices.

Shared by the tests of devices, distribution_plan, cluster and strategies:
a TPU resolver and initialiser, GPU device lists, and a strategy factory
that records how each strategy would be built.
"""


def cpu_only():
  return ['/device:CPU:0']


def two_gpus():
  return ['/device:CPU:0', '/device:GPU:0', '/device:GPU:1']


class FakeResolver:

  def __init__(self, master):
    self._master = master

  def master(self):
    return self._master


class FakeStrategy:
  """Stands in for a strategy class; records how it was built."""

  def __init__(self, name, num_replicas_in_sync, kwargs):
    self.name = name
    self.num_replicas_in_sync = num_replicas_in_sync
    self.kwargs = kwargs


class Recorder:
  """Fake resolver factory, TPU initialiser and strategy factory."""

  def __init__(self, master='grpc://10.0.0.2:8470', replicas=8,
               resolver_error=None):
    self.master = master
    self.replicas = replicas
    self.resolver_error = resolver_error
    self.resolver_calls = []
    self.initialised = []
    self.strategies = []

  def resolver_factory(self, **kwargs):
    self.resolver_calls.append(kwargs)
    if self.resolver_error:
      raise ValueError(self.resolver_error)
    return FakeResolver(self.master)

  def initializer(self, resolver):
    self.initialised.append(resolver.master())
    return 'topology'

  def strategy_factory(self, name, **kwargs):
    strategy = FakeStrategy(name, self.replicas, kwargs)
    self.strategies.append(strategy)
    return strategy
