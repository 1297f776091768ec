"""PodResources' dynamic resources (the kubelet's List/Get `dynamic_resources`) from the DRA manager.

Per container: one DynamicResource per claim it uses, with one ClaimResource per prepared device (driver,
pool, device, its CDI IDs), as the kubelet lists them.
"""

from __future__ import annotations

from agent.cm.devicemanager.podresources import DynamicLookup
from agent.cm.dra.manager import DRAManager
from kubenode.api.podresources.v1 import api_pb2


def dynamic_lookup(dra: DRAManager) -> DynamicLookup:
    def lookup(pod_uid: str, container: str) -> list[api_pb2.DynamicResource]:
        by_claim: dict[tuple[str, str], api_pb2.DynamicResource] = {}
        for device in dra.dynamic_for(pod_uid, container):
            key = (device.namespace, device.claim)
            entry = by_claim.get(key)
            if entry is None:
                entry = by_claim[key] = api_pb2.DynamicResource(
                    claim_name=device.claim, claim_namespace=device.namespace
                )
            entry.claim_resources.append(
                api_pb2.ClaimResource(
                    cdi_devices=[api_pb2.CDIDevice(name=i) for i in device.cdi_ids],
                    driver_name=device.driver,
                    pool_name=device.pool,
                    device_name=device.device,
                )
            )
        return list(by_claim.values())

    return lookup
