"""A short kubelet dir for conformance runs (unix socket paths are limited to 107 bytes)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-conf-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
