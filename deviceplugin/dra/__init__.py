"""`kubenode dra-driver`: kubenode's DRA kubelet plugin (drivers `cpu.kubenode.io` and `gpu.kubenode.io`).

Flow (deviceplugin/dra/driver.py composes it): the inventory (inventory.py) lists each driver's devices
with their attributes -> the publisher (slices.py) writes one ResourceSlice per driver for this node ->
the registration server (registration.py) puts `<driver>-reg.sock` into the registry directory, where
the kubelet's plugin watcher (or kubenode's agent) finds it -> on NodePrepareResources (service.py) the
driver reads the claim's allocation from the API server, writes one CDI spec per claim (claimspecs.py)
and answers its CDI device IDs; NodeUnprepareResources removes the spec.
"""
