"""The client layer loads no HTTP library beyond the standard one: its watches stream over the
transport's own connections read by `http.client`, so a joined agent does not carry urllib3."""

from __future__ import annotations

from tests.importprobe import modules_loaded


def test_the_client_layer_does_not_import_urllib3() -> None:
    code = "import kubenode.kubeclient, kubenode.kubeclient.informer, kubenode.kubeclient.events\n"
    assert modules_loaded(code, ["urllib3"]) == ([], [])
