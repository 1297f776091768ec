"""The scheduler's Dynamic Resource Allocation: pools, the structured allocator and the plugin."""
