"""Loads a local page in headless Chromium and reports what a user would see.

Talks the DevTools protocol over its websocket (websocket-client): console
messages, uncaught exceptions and failed requests arrive as events, which is
exact where scraping `--enable-logging` stderr depends on Chromium's log
format. Also returns the page's text and its images' `src` attributes.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM_NAMES = ('chromium', 'chromium-browser', 'google-chrome')
INSTALL_HINT = ('headless Chromium is not installed: install it with '
                '`sudo apt-get install -y chromium` (Debian/Ubuntu)')
_FLAGS = ('--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
          '--no-first-run', '--disable-background-networking',
          '--disable-component-update', '--disable-sync')


def find_chromium():
  return next((shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n)),
              None)


class _Session:
  """One DevTools page session: send commands, collect events."""

  def __init__(self, url: str):
    import websocket  # pylint: disable=g-import-not-at-top
    self._ws = websocket.create_connection(url, timeout=60)
    self._next_id = 0
    self.events = []

  def call(self, method: str, **params):
    self._next_id += 1
    self._ws.send(json.dumps({'id': self._next_id, 'method': method,
                              'params': params}))
    while True:
      message = json.loads(self._ws.recv())
      if message.get('id') == self._next_id:
        if 'error' in message:
          raise RuntimeError(f'{method}: {message["error"]}')
        return message.get('result', {})
      self.events.append(message)

  def wait_for(self, method: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      if any(e.get('method') == method for e in self.events):
        return
      self.events.append(json.loads(self._ws.recv()))
    raise TimeoutError(f'no {method} within {timeout} s')

  def close(self):
    self._ws.close()


def load(path: str, screenshot: str = '') -> dict:
  """Opens file `path`; returns console errors, failed requests, text, images.

  Args:
    path: an HTML file.
    screenshot: where to save a full-page PNG ('' for none).
  """
  chromium = find_chromium()
  profile = tempfile.mkdtemp(prefix='chromium-profile-')
  process = subprocess.Popen(
      [chromium, *_FLAGS, f'--user-data-dir={profile}',
       '--remote-debugging-port=0', 'about:blank'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    # Chromium writes the port it picked here.
    port_file = os.path.join(profile, 'DevToolsActivePort')
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file) or not open(port_file).read().strip():
      if time.monotonic() > deadline or process.poll() is not None:
        raise RuntimeError(f'{chromium} did not start (exit {process.poll()})')
      time.sleep(0.2)
    port = open(port_file).read().split()[0]
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list') as r:
      page = next(t for t in json.load(r) if t['type'] == 'page')
    session = _Session(page['webSocketDebuggerUrl'])
    for domain in ('Page', 'Runtime', 'Log', 'Network'):
      session.call(f'{domain}.enable')
    session.call('Page.navigate', url='file://' + os.path.abspath(path))
    session.wait_for('Page.loadEventFired')
    text = session.call('Runtime.evaluate',
                        expression='document.body.innerText',
                        returnByValue=True)['result']['value']
    images = session.call(
        'Runtime.evaluate', returnByValue=True,
        expression='Array.from(document.images).map(i => [i.src, '
        'i.naturalWidth, i.naturalHeight, i.complete])')['result']['value']
    if screenshot:
      import base64  # pylint: disable=g-import-not-at-top
      metrics = session.call('Page.getLayoutMetrics')['cssContentSize']
      session.call('Emulation.setDeviceMetricsOverride', width=1150,
                   height=int(metrics['height']), deviceScaleFactor=1,
                   mobile=False)
      data = session.call('Page.captureScreenshot', format='png',
                          captureBeyondViewport=True)['data']
      with open(screenshot, 'wb') as f:
        f.write(base64.b64decode(data))
    events = session.events
    session.close()
  finally:
    process.terminate()
    process.wait(timeout=30)
    shutil.rmtree(profile, ignore_errors=True)
  console_errors = (
      [e['params']['entry'] for e in events
       if e.get('method') == 'Log.entryAdded' and
       e['params']['entry'].get('level') == 'error'] +
      [e['params'] for e in events
       if e.get('method') == 'Runtime.consoleAPICalled' and
       e['params'].get('type') in ('error', 'assert')] +
      [e['params'] for e in events
       if e.get('method') == 'Runtime.exceptionThrown'])
  requests = [e['params']['request']['url'] for e in events
              if e.get('method') == 'Network.requestWillBeSent']
  failed = [e['params'] for e in events
            if e.get('method') == 'Network.loadingFailed']
  return {'console_errors': console_errors, 'failed_requests': failed,
          'requests': requests, 'text': text, 'images': images}
