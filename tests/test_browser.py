"""A real browser: JupyterLab in headless Chromium, Run All on a notebook, the progress widgets on the page.

`tests/test_interactive.py` runs the notebooks as JupyterLab would, through a kernel client; this test runs one
through JupyterLab itself, as a student's browser does. It starts `jupyter lab` on a free port (its own settings,
workspaces and runtime folders, so nothing of the user's and no news pop-up leaks in), opens
`tests/browser/check.ipynb` in headless Chromium, runs every cell with JupyterLab's own "Run All" command, saves
the notebook, and checks:

- no cell shows an error or writes to stderr (on the page and in the saved file: `nbtools.output_problems` too);
- the kit's progress bar (`helpers.progress.bar`, tqdm's widget outside batch runs) renders as an ipywidgets
  progress bar that reached its end: without the widget extensions JupyterLab shows tqdm's text fallback instead;
- a screenshot of the page: in the test's temporary folder, or at `KIT_BROWSER_SCREENSHOT` (`make browser-test`
  writes `results/browser/notebook.png`, the committed one).

Chromium is driven over the DevTools protocol with `websocket-client` (already a dependency of jupyter_server),
so no WebDriver and no browser download is needed. Without Chromium the test is skipped, saying how to install it
(`scripts/browser_os.sh`, run by `make install` as root).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from helpers import nbtools
from helpers.config import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = REPO_ROOT / "tests" / "browser" / "check.ipynb"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MAC_CHROME = "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
STDERR = "application/vnd.jupyter.stderr"  # JupyterLab renders stderr streams and error tracebacks with it
WIDGET = "application/vnd.jupyter.widget-view+json"


def chromium_path() -> str | None:
    """The Chromium (or Chrome) executable: `KIT_CHROMIUM`, else the first of BROWSERS on PATH, else Chrome where macOS installs it."""
    if os.environ.get("KIT_CHROMIUM"):
        return os.environ["KIT_CHROMIUM"]
    found = next((p for p in map(shutil.which, BROWSERS) if p), None)
    return found or (MAC_CHROME if Path(MAC_CHROME).exists() else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float, every: float = 0.25):
    """Poll `check()` until it returns something true; fail saying `what` after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def http_json(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return None


class DevTools:
    """The few Chrome DevTools protocol calls the test needs, over one page's websocket."""

    def __init__(self, ws_url: str) -> None:
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)

    def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:  # events (no id) and late replies are skipped
            msg = json.loads(self.ws.recv())
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (a promise is awaited); a thrown error fails."""
        r = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(
                f"in the page: {r['exceptionDetails'].get('exception', r['exceptionDetails'])}"
            )
        return r["result"].get("value")

    def close(self) -> None:
        self.ws.close()


def _settings(folder: Path) -> None:
    """JupyterLab user settings for the test: no news pop-up, every cell in the DOM (no windowing)."""
    for plugin, values in {
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    }.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def chromium():
    path = chromium_path()
    if not path:
        pytest.skip(
            "Chromium is not installed: `sh scripts/browser_os.sh` installs it (Debian/Ubuntu, as root: "
            "apt-get install chromium), or set KIT_CHROMIUM to a Chromium or Chrome executable"
        )
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free port serving a folder with a copy of the check notebook: (url, token, folder)."""
    root = tmp_path_factory.mktemp("lab")
    work = root / "work"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    _settings(root / "settings")
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("KIT_BATCH", "KIT_WORKER", "TQDM_DISABLE")}
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(root / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(root / "runtime"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p),
    )
    log = (root / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={work}",
            "--ServerApp.allow_root=True",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.open_browser=False",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            "JupyterLab to answer",
            lambda: proc.poll() is None and http_json(f"{url}/api/status?token={token}"),
            timeout=90,
        )
        yield url, token, work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def page(chromium, tmp_path_factory):
    """Headless Chromium with one page, driven over the DevTools protocol."""
    profile = tmp_path_factory.mktemp("chromium")
    args = [
        chromium,
        "--headless=new",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--window-size=1200,860",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "about:blank",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium's own sandbox refuses to start as root
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        active = profile / "DevToolsActivePort"
        wait_for(
            "Chromium's DevTools port",
            lambda: proc.poll() is None and active.exists() and len(active.read_text().split()) >= 2,
            timeout=60,
        )
        port = active.read_text().split()[0]
        targets = wait_for(
            "a page in Chromium",
            lambda: [
                t for t in http_json(f"http://127.0.0.1:{port}/json/list") or [] if t.get("type") == "page"
            ],
            timeout=30,
        )
        tools = DevTools(targets[0]["webSocketDebuggerUrl"])
        tools.call("Page.enable")
        tools.call("Runtime.enable")
        tools.call(
            "Emulation.setFocusEmulationEnabled", enabled=True
        )  # the page behaves as if it had the focus
        yield tools
        tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# In the page: JupyterLab's application (exposed with --LabApp.expose_app_in_browser), the open notebook (found among
# the main area's widgets: a headless page may have no focus, and then no "current" widget), and what its cells show.
PANEL = (
    """const panel = [...window.jupyterapp.shell.widgets('main')].find(w => w.content && w.sessionContext);"""
)
NOTEBOOK_READY = f"""(() => {{
  if (!window.jupyterapp) return false;
  {PANEL}
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!(kernel && kernel.status === 'idle' && panel.context.isReady);
}})()"""
RUN_ALL = f"""(async () => {{
  const app = window.jupyterapp;
  {PANEL}
  app.shell.collapseLeft();
  app.shell.activateById(panel.id);
  await app.commands.execute('notebook:run-all-cells');
  return panel.content.widgets.filter(c => c.model.type === 'code').length;
}})()"""
DONE = f"""(() => {{
  {PANEL}
  const code = panel.content.widgets.filter(c => c.model.type === 'code');
  const failed = code.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));  // Run All stops there
  return panel.sessionContext.session.kernel.status === 'idle' && (failed || code.every(c => c.model.executionCount !== null));
}})()"""
SAVE = f"""(async () => {{ {PANEL} await panel.context.save(); return true; }})()"""
STATE = f"""(() => {{
  {PANEL}
  const node = panel.node;
  const bars = [...node.querySelectorAll('.widget-hprogress, .widget-progress')];
  return {{
    stderr: [...node.querySelectorAll('[data-mime-type="{STDERR}"]')].map(e => e.innerText.slice(0, 500)),
    bars: bars.length,
    bar_labels: bars.map(b => (b.parentElement ? b.parentElement.innerText : '').trim()),
    bar_fill: bars.map(b => {{ const f = b.querySelector('.progress-bar');
                                return f ? parseFloat(f.style.width || f.style.height || '0') : null; }}),
    widget_errors: [...node.querySelectorAll('.jp-RenderedText, .jp-OutputArea-output')]
      .map(e => e.innerText).filter(t => /Error displaying widget|Loading widget|model not found/.test(t)),
    text_bars: [...node.querySelectorAll('.jp-OutputArea-output')].map(e => e.innerText)
      .filter(t => /\\d+%\\|/.test(t)),
    prompts: [...node.querySelectorAll('.jp-InputPrompt')].map(e => e.innerText.trim()),
  }};
}})()"""


def test_run_all_in_jupyterlab_renders_the_progress_widgets_and_no_errors(lab, page, tmp_path):
    url, token, work = lab
    started = time.monotonic()
    page.call("Page.navigate", url=f"{url}/lab/tree/{NOTEBOOK.name}?token={token}")
    wait_for(
        "JupyterLab to open the notebook and its kernel to be idle",
        lambda: page.js(NOTEBOOK_READY),
        timeout=180,
        every=0.5,
    )
    n_code = page.js(RUN_ALL)
    assert n_code == sum(c.cell_type == "code" for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    wait_for(
        "every cell to run (an execution count on each, or an error; the kernel idle)",
        lambda: page.js(DONE),
        timeout=180,
        every=0.5,
    )
    page.js(SAVE)
    time.sleep(1.0)  # the widgets' last redraw, before the screenshot
    state = page.js(STATE)

    shot = Path(os.environ.get("KIT_BROWSER_SCREENSHOT") or tmp_path / "notebook.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.write_bytes(base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"]))
    print(f"browser check: Run All in {time.monotonic() - started:.1f} s; screenshot {shot}")

    assert not state["stderr"], f"a cell wrote an error or to stderr: {state['stderr']}"
    assert not state["widget_errors"], f"a widget did not render: {state['widget_errors']}"
    assert not state["text_bars"], f"a progress bar rendered as text, not as a widget: {state['text_bars']}"
    assert state["bars"] >= 1, (
        "no progress widget on the page (are ipywidgets and jupyterlab_widgets installed?)"
    )
    assert all(f is not None and f >= 99.9 for f in state["bar_fill"]), (
        f"a bar did not fill: {state['bar_fill']}"
    )
    assert any("40/40" in label for label in state["bar_labels"]), f"bar labels: {state['bar_labels']}"
    prompts = [p for p in state["prompts"] if p]  # a Markdown cell's prompt is empty
    assert len(prompts) == n_code and all(p[1:-2].isdigit() for p in prompts), f"prompts: {state['prompts']}"

    saved = wait_for("the saved notebook", lambda: _executed(work / NOTEBOOK.name), timeout=30)
    outputs = [o for c in saved.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"], "a cell raised (saved notebook)"
    assert any(WIDGET in o.get("data", {}) for o in outputs), "no widget output in the saved notebook"
    assert nbtools.output_problems(saved) == []


def _executed(path: Path):
    """The saved notebook once every code cell has an execution count, else None."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return nb if code and all(c.execution_count for c in code) else None
