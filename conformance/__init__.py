"""`kubenode conformance`: plays the kubelet against a device plugin and reports what passes.

A product of its own, beside the engines: it drives the agent's device manager (agent.cm.devicemanager, the
kubelet side of the Device Plugin API) against a plugin and imports nothing else of the agent; no engine
imports it. Flow: cli -> suite (start or find the plugin, process.py) -> harness (a DeviceManager as the
kubelet double) -> checks (each a Target call, target.py) -> results (text, JSON, JUnit).
"""
