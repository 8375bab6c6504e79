"""A failed write is recognised from an OSError or from TF's / Beam's text."""

import errno
import json
import os
import subprocess
import sys

from tfx_autostrategy.pipeline import write_faults

# The error TensorFlow raised when the Trainer's checkpoint hit a 20 MB
# RLIMIT_FSIZE (copied from a real run's log): the path follows a device
# string that also holds '/job:...' fragments.
TF_EFBIG = (
    '{{function_node __wrapped__SaveV2_dtypes_25_device_/job:localhost/'
    'replica:0/task:0/device:CPU:0}} /out/pipeline_root/AutoStrategyTrainer/'
    'backup/9f54/chief/ckpt-1_temp/part-00000-of-00001.data-00000-of-00001.'
    'tempstate176; File too large [Op:SaveV2]')


def test_os_error_gives_reason_path_and_advice():
  error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), '/out/summary.json')
  fault = write_faults.describe(error)
  assert fault == write_faults.WriteFault(errno.ENOSPC, '/out/summary.json')
  assert fault.message('Transform') == (
      'no space left on device while Transform wrote /out/summary.json; free '
      'space or choose another --output; completed steps are kept and a rerun '
      'resumes')


def test_tf_text_in_a_wrapping_error_names_the_file_not_the_device():
  try:
    try:
      raise RuntimeError(TF_EFBIG)
    except RuntimeError as inner:
      raise ValueError('the Trainer failed') from inner
  except ValueError as outer:
    fault = write_faults.describe(outer, '/out')
  assert fault.errno == errno.EFBIG
  assert fault.path == ('/out/pipeline_root/AutoStrategyTrainer/backup/9f54/'
                        'chief/ckpt-1_temp/part-00000-of-00001.data-00000-of-'
                        '00001.tempstate176')
  assert fault.message('AutoStrategyTrainer').startswith(
      'file size limit exceeded while AutoStrategyTrainer wrote /out/pipeline_'
      'root/AutoStrategyTrainer/backup/')
  assert 'raise the file-size limit (ulimit -f)' in fault.message()


def test_beam_quoted_path_and_quota_and_preference_for_the_output_dir():
  text = ("IOError: [Errno 122] Disk quota exceeded: '/tmp/beam-temp/x' "
          "while writing '/data/out/Transform/transformed/0.gz'")
  fault = write_faults.describe(RuntimeError(text), '/data/out')
  assert (fault.errno, fault.path) == (errno.EDQUOT,
                                       '/data/out/Transform/transformed/0.gz')
  assert write_faults.describe(RuntimeError(text)).path == '/tmp/beam-temp/x'
  no_path = write_faults.describe(RuntimeError('No space left on device'))
  assert no_path.message() == (
      'no space left on device while the run wrote its outputs; free space or '
      'choose another --output; completed steps are kept and a rerun resumes')


def test_other_errors_are_not_write_faults():
  assert write_faults.describe(ValueError('bad value /x/y')) is None
  assert write_faults.describe(
      OSError(errno.EACCES, 'Permission denied', '/x')) is None


def test_summary_write_under_a_file_size_limit_keeps_the_old_summary(tmp_path):
  """A real process under RLIMIT_FSIZE: the CLI's summary writer says so."""
  path = tmp_path / 'summary.json'
  path.write_text('{"status": "pushed"}')
  script = f'''
import resource, signal, sys
from tfx_autostrategy.cli import failures
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
line = failures.write_summary(None, {str(path)!r}, status='failed',
                              error='x' * 10000)
print(line)
'''
  proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                        text=True, timeout=120, check=False)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == (
      f'error: could not write {path}: file size limit exceeded; it still '
      'describes the previous run, if there was one')
  assert json.loads(path.read_text()) == {'status': 'pushed'}
  assert os.listdir(tmp_path) == ['summary.json']  # No temporary file left.
