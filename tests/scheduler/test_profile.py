"""Profile files: the supported KubeSchedulerConfiguration subset and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubenode.model.errors import ValidationError
from scheduler.profile import MOST_ALLOCATED, load_configuration, parse_configuration

FIT_ARGS = "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: "
EXAMPLES = Path(__file__).parents[2] / "examples" / "profiles"


def config(text: str) -> object:
    return parse_configuration(yaml.safe_load(text), "p.yaml")


def test_example_profiles_load() -> None:
    binpack = load_configuration(EXAMPLES / "gpu-binpack.yaml")
    gpu = binpack.profiles["gpu-binpack"]
    assert gpu.scoring.type == MOST_ALLOCATED and gpu.scoring.resources[0].name == "kubenode.io/gpu"
    assert gpu.weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 5,
        "NodeResourceTopologyMatch": 1,
    }
    assert binpack.profiles["default-scheduler"].weights["NodeResourcesBalancedAllocation"] == 1
    rtcr = load_configuration(EXAMPLES / "rtcr.yaml").profiles["default-scheduler"]
    assert [p.score for p in rtcr.scoring.shape] == [0, 10]


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (
            FIT_ARGS + "{scoringStrategy: {resources: [{name: gpu}]}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].name",
            "unknown resource 'gpu'",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: ImageLocality}]}}}]",
            "profiles[0].plugins.score.enabled[0].name",
            "unsupported score plugin",
        ),
        (
            FIT_ARGS + "{scoringStrategy: {type: Spread}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            "must be one of",
        ),
        (
            FIT_ARGS + "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio:"
            " {shape: [{utilization: 50, score: 1}, {utilization: 40, score: 2}]}}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape",
            "strictly increasing",
        ),
        ("percentageOfNodesToScore: 50", "percentageOfNodesToScore", "unknown or unsupported field"),
        ("profiles: [{}, {}]", "profiles[1].schedulerName", "duplicate profile"),
    ],
)
def test_bad_profiles_name_file_and_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        config(text)
    assert caught.value.source == "p.yaml" and caught.value.field == field
    assert problem in caught.value.message
