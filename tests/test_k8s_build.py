"""The interop build's own logic, without Go: the staging replace list is read from kube's go.mod (never
written by hand), each component's cache key follows its go.sum, and the committed modules pin what
tools/k8s_build.py builds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import k8s_build, k8s_gomod

ROOT = Path(__file__).resolve().parents[1]


KUBE_GOMOD = """module k8s.io/kubernetes

go 1.26.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/example/other => github.com/example/other v1.2.3
)
"""


def test_the_staging_list_is_every_replace_onto_a_staging_path() -> None:
    gomod = k8s_gomod
    assert gomod.staging_modules(KUBE_GOMOD) == ["k8s.io/api", "k8s.io/client-go"]
    assert gomod.staging_version("v1.37.2") == "v0.37.2"
    with pytest.raises(ValueError, match=r"v1\.37"):
        gomod.staging_version("1.37")
    rendered = gomod.render("v1.37.2", "1.26.0", ["k8s.io/api"])
    assert (
        "\tk8s.io/api => k8s.io/api v0.37.2\n" in rendered and "require k8s.io/kubernetes v1.37.2" in rendered
    )


def test_the_committed_kube_module_replaces_its_33_staging_modules_at_the_release() -> None:
    text = (ROOT / "interop/kube/go.mod").read_text()
    replaces = re.findall(r"^\t(k8s\.io/[\w.-]+) => (k8s\.io/[\w.-]+) (v\S+)$", text, re.M)
    assert len(replaces) == 33 and all(a == b and v == "v0.37.2" for a, b, v in replaces)
    assert re.search(r"^\tk8s\.io/kubernetes v1\.37\.2( // indirect)?$", text, re.M), (
        "k8s.io/kubernetes is not pinned at v1.37.2"
    )


def test_each_component_is_a_committed_module_and_its_key_follows_its_go_sum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = k8s_build
    for component in build.COMPONENTS:
        for name in ("go.mod", "go.sum"):
            assert (ROOT / "interop" / component.name / name).is_file(), (component.name, name)
    kube = next(c for c in build.COMPONENTS if c.name == "kube")
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in kube.ldflags
    (tmp_path / "kube").mkdir()
    for name in ("go.mod", "go.sum"):
        (tmp_path / "kube" / name).write_bytes((ROOT / "interop/kube" / name).read_bytes())
    monkeypatch.setattr(build, "INTEROP", tmp_path)
    before = kube.key()
    (tmp_path / "kube/go.sum").write_text((tmp_path / "kube/go.sum").read_text() + "x v1 h1:y\n")
    assert kube.key() != before
