"""Kube's CEL device selector cases (cel_cases.yaml) against kubenode/dra/cel.py, and the parsers' errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubenode.dra.cel import DeviceData, SelectorError, compile_selector
from kubenode.dra.types import parse_resource_slice
from kubenode.model.errors import ValidationError

CASES = yaml.safe_load((Path(__file__).parent / "cel_cases.yaml").read_text())


def _device(case: dict[str, Any]) -> DeviceData:
    driver = case.get("driver", "dra.example.com")
    device: dict[str, Any] = {"name": "d", "attributes": case.get("attributes", {})}
    device["capacity"] = {name: {"value": value} for name, value in case.get("capacity", {}).items()}
    spec = {"driver": driver or "x", "nodeName": "n", "pool": {"name": "p"}, "devices": [device]}
    obj = {"metadata": {"name": "s"}, "spec": spec}
    parsed = parse_resource_slice(obj)
    return DeviceData(driver, parsed.devices[0])


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_kube_cel_case(case: dict[str, Any]) -> None:
    if "compile_error" in case:
        with pytest.raises(SelectorError, match=case["compile_error"]):
            compile_selector(case["expression"])
        return
    selector = compile_selector(case["expression"])
    device = _device(case)
    if "match_error" in case:
        with pytest.raises(SelectorError, match=case["match_error"]):
            selector.matches(device)
        return
    assert selector.matches(device) is case["match"]
    assert selector.matches(device) is case["match"]  # the device's cached activation gives the same


def test_a_domain_looked_up_by_one_selector_does_not_appear_to_others() -> None:
    device = _device({"attributes": {"name": {"bool": True}}})
    assert compile_selector('!has(device.attributes["other.example.com"].name)').matches(device)
    assert not compile_selector('"other.example.com" in device.attributes').matches(device)


def test_the_selector_length_limit_is_kubes() -> None:
    with pytest.raises(SelectorError, match="longer than 10240"):
        compile_selector("true && " * 1300 + "true")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"driver": "d", "pool": {"name": "p"}}, "spec: exactly one of nodeName, nodeSelector, allNodes"),
        (
            {
                "driver": "d",
                "nodeName": "n",
                "pool": {"name": "p"},
                "devices": [{"name": "x", "capacity": {"m": {"value": "1 GB"}}}],
            },
            r"spec.devices\[0\].capacity\[m\].value",
        ),
        (
            {
                "driver": "d",
                "nodeName": "n",
                "pool": {"name": "p"},
                "devices": [{"name": "x", "attributes": {"v": {"version": "1.0"}}}],
            },
            r"spec.devices\[0\].attributes\[v\].version: must be a semantic version",
        ),
        ({"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": -1}}, "spec.pool.generation"),
    ],
)
def test_a_bad_slice_is_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=f"ResourceSlice s: {field}"):
        parse_resource_slice({"metadata": {"name": "s"}, "spec": spec})


def test_validation_names_the_bad_selectors_field() -> None:
    from kubenode.dra.validate import validate

    claim = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "k",
                            "selectors": [
                                {"cel": {"expression": "true"}},
                                {"cel": {"expression": "device.nope("}},
                            ],
                        },
                    }
                ]
            }
        },
    }
    with pytest.raises(
        ValidationError, match=r"spec.devices.requests\[0\].exactly.selectors\[1\].cel.expression: "
    ):
        validate("ResourceClaim", claim, "ResourceClaim default/c")
    template = {"metadata": {"name": "t"}, "spec": {"spec": claim["spec"]}}
    with pytest.raises(ValidationError, match=r": spec.spec.devices.requests\[0\].exactly.selectors\[1\]"):
        validate("ResourceClaimTemplate", template, "ResourceClaimTemplate default/t")
    device_class = {"metadata": {"name": "k"}, "spec": {"selectors": [{"cel": {"expression": "1"}}]}}
    with pytest.raises(ValidationError, match=r"spec.selectors\[0\].cel.expression: must evaluate to bool"):
        validate("DeviceClass", device_class, "DeviceClass k")
    validate(
        "DeviceClass", {"metadata": {"name": "k"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    )


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        (
            "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0 "
            "&& device.attributes['d'].x == 1",
            (("attributes", "d", "x"), ("capacity", "gpu.example.com", "memory")),
        ),
        ("device.driver == 'a' || true", (("driver",),)),
        ('device.attributes["d"]["x"]', (("attributes", "d", "x"),)),
        ("has(device.attributes['d'].x)", (("attributes", "d", "x"),)),
        ("[1, 2].all(i, i < device.attributes['d'].n)", (("attributes", "d", "n"),)),
        ("true", ()),
        ("cel.bind(a, device.attributes['d'], a.x)", None),
        ('"d" in device.attributes', None),
        ("device.attributes.exists_one(x, x == 'd')", None),
        ("device.attributes['d'].exists(x, x == 'y')", None),
    ],
)
def test_the_device_values_a_selector_reads_are_told_or_it_says_it_cannot(
    expression: str, paths: tuple[tuple[str, ...], ...] | None
) -> None:
    assert compile_selector(expression).paths == paths


def test_devices_that_agree_on_what_a_selector_reads_share_one_evaluation() -> None:
    from kubenode.dra.types import Device
    from scheduler.dra.matcher import Matcher

    memory = "device.capacity['d'].memory.compareTo(quantity('40Gi')) >= 0"
    big = [Device(f"g{i}", {"d": {"index": ("int", i)}}, {"d": {"memory": "80Gi"}}) for i in range(3)]
    small = Device("s", {}, {"d": {"memory": "16Gi"}})
    lacking = Device("x")
    matcher = Matcher()
    assert [matcher.matches("d", device, memory) for device in big] == [True, True, True]
    assert "data" in big[0].memo and "data" not in big[1].memo  # evaluated once, shared by the others
    assert matcher.matches("d", small, memory) is False
    assert matcher.matches("d", lacking, memory) is False
    assert "memory" in matcher.errors(lacking)[memory]  # the runtime error, kept for the trace
