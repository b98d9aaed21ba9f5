"""Workloads written once against ``get_device``: QAOA MaxCut and the dressed QNN."""
