"""The scheduler's Dynamic Resource Allocation: pools, the structured allocator, the DynamicResources plugin."""
