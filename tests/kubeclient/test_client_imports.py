"""The client layer loads no HTTP library beyond the standard one: its watches stream over the
transport's own connections read by `http.client`, so a joined agent does not carry urllib3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_client_layer_does_not_import_urllib3() -> None:
    code = (
        "import sys\n"
        "import kubenode.kubeclient, kubenode.kubeclient.informer, kubenode.kubeclient.events\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'urllib3'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
