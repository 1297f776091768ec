"""The kubelet's Topology Manager (pkg/kubelet/cm/topologymanager) for the node agent.

Flow of one admission: the agent calls `TopologyManager.admit(pod)` -> the scope (container or
pod, scopes.py) asks every hint provider (the device manager, through devicehints.py) for hints ->
the policy (policies.py) merges them (merge.py, over bitmask.py masks and numainfo.py distances)
into one hint and says whether the pod is admitted -> an admitted container is allocated by the
providers with that hint as its NUMA affinity; a refused pod fails with TopologyAffinityError.
`new_manager` (manager.py) checks the policy, scope and options (options.py) as the kubelet does.
"""

from agent.cm.topologymanager.bitmask import BitMask
from agent.cm.topologymanager.devicehints import DeviceHintSource, DeviceView, generate_device_hints
from agent.cm.topologymanager.hints import (
    TOPOLOGY_AFFINITY_ERROR,
    TOPOLOGY_AFFINITY_MESSAGE,
    AdmitResult,
    HintProvider,
    ProviderHints,
    TopologyHint,
)
from agent.cm.topologymanager.manager import TopologyManager, TopologyManagerError, new_manager
from agent.cm.topologymanager.options import PolicyOptions, parse_options_text, parse_policy_options
from agent.cm.topologymanager.policies import POLICIES
from agent.cm.topologymanager.scopes import SCOPES, Decision

__all__ = [
    "POLICIES",
    "SCOPES",
    "TOPOLOGY_AFFINITY_ERROR",
    "TOPOLOGY_AFFINITY_MESSAGE",
    "AdmitResult",
    "BitMask",
    "Decision",
    "DeviceHintSource",
    "DeviceView",
    "HintProvider",
    "PolicyOptions",
    "ProviderHints",
    "TopologyHint",
    "TopologyManager",
    "TopologyManagerError",
    "generate_device_hints",
    "new_manager",
    "parse_options_text",
    "parse_policy_options",
]
