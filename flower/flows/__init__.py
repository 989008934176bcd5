"""Flows: steps and workflows, the lineage that lets them wake up, and the ready-made starter flow.

Nothing is imported here, so each module loads alone (see docs/architecture.md).
"""
