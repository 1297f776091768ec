"""The node labeller: NFD's local feature files (GPU Feature Discovery's among them) as the Node's labels.

Flow (one thread, `start`/`stop`): once the Node is registered, read the features directory
(`nodeFeaturesDir`, agent/nodestatus/featurefiles.py), GET the Node and PATCH (merge) the difference: the
labels the files ask for set, the labels this labeller set before and no longer finds removed. What it set
is remembered on the Node itself, in the annotation `kubenode.io/feature-labels` (NFD's master keeps
`nfd.node.kubernetes.io/feature-labels` the same way; ours has its own name so both can run), so a restarted
agent still removes its stale labels and never touches a label it did not set. Then wait on the directory
(kubenode.dirwatch: a file written, renamed in or removed) or on the earliest `+expiry-time`, and again.
A directory whose parent does not exist yet is looked for again every `poll_s`. A failed API call is
retried with a capped backoff; each problem in the files is logged once, naming the file and line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent.nodestatus.featurefiles import read_features
from kubenode.dirwatch import DirWatcher
from kubenode.kubeclient import NODES, KubeClient, KubeError
from kubenode.kubeclient.informer import Backoff

log = logging.getLogger(__name__)

OWNED_ANNOTATION = "kubenode.io/feature-labels"


def owned_labels(node: Mapping[str, Any]) -> set[str]:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return {name for name in str(annotations.get(OWNED_ANNOTATION) or "").split(",") if name}


def label_patch(node: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, Any] | None:
    """The merge patch that makes the Node carry `wanted` as the labeller's labels; None when it does."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    changes: dict[str, str | None] = {k: v for k, v in wanted.items() if labels.get(k) != v}
    for name in owned_labels(node) - set(wanted):
        if name in labels:
            changes[name] = None  # null deletes the key in a merge patch
    owned = ",".join(sorted(wanted))
    if not changes and owned_labels(node) == set(wanted):
        return None
    return {"metadata": {"labels": changes, "annotations": {OWNED_ANNOTATION: owned or None}}}


class NodeFeatureLabeller:
    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        directory: Path,
        *,
        registered: threading.Event,
        clock: Callable[[], float] = time.time,  # wall clock: expiry times are RFC 3339
        backoff_max: float = 10.0,
        poll_s: float = 10.0,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.directory = Path(directory)
        self.registered = registered
        self._clock = clock
        self._backoff = Backoff(0.2, backoff_max)
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._watcher: DirWatcher | None = None
        self._thread: threading.Thread | None = None
        self._logged: set[str] = set()
        self.patches = 0  # PATCHes sent (tests and the curious)

    def sync(self) -> float | None:
        """Read the files and bring the Node's labels in line; the seconds until the next expiry, if any.
        Raises KubeError when the API server refuses or is away."""
        features = read_features(self.directory, self._clock())
        for problem in features.problems:
            if problem not in self._logged:
                self._logged.add(problem)
                log.warning("node features: %s", problem)
        node = self.client.get(NODES, self.node_name)
        patch = label_patch(node, features.labels)
        if patch is not None:
            self.client.patch(NODES, self.node_name, patch, patch_type="merge")
            self.patches += 1
            changed = patch["metadata"]["labels"]
            log.info(
                "node features: labels set %s, removed %s",
                sorted(k for k, v in changed.items() if v is not None) or "none",
                sorted(k for k, v in changed.items() if v is None) or "none",
            )
        if features.next_expiry is None:
            return None
        return max(0.0, features.next_expiry - self._clock())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="node-features", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.registered.set()  # never block the thread on a registration that will not come
        if self._watcher is not None:
            self._watcher.wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    def _run(self) -> None:
        self.registered.wait()
        self._open_watcher()
        while not self._stop.is_set():
            try:
                wait = self.sync()
                self._backoff.reset()
            except KubeError as exc:
                log.warning("node features: %s", exc)
                wait = self._backoff.next()
            except Exception:  # a bug: logged in full, and the labeller goes on
                log.exception("node features")
                wait = self._backoff.next()
            self._wait(wait)

    def _open_watcher(self) -> None:
        try:
            self._watcher = DirWatcher(self.directory, modify=True)
        except FileNotFoundError:
            self._watcher = None  # its parent is not there yet: looked for every poll_s

    def _wait(self, timeout: float | None) -> None:
        """Until something in the directory changes, `timeout` passes, or stop()."""
        if self._watcher is None:
            self._stop.wait(self._poll_s if timeout is None else min(timeout, self._poll_s))
            if not self._stop.is_set():
                self._open_watcher()
            return
        self._watcher.read(timeout)
