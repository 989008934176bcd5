"""The context economy: what a session keeps resident, what goes to disk, and when it hands over.

Nothing is imported here, so each module loads alone (see docs/architecture.md).
"""
