"""Small shared machinery of the agent (the kubelet's pkg/kubelet/util): background loops and the work
queue.
"""
