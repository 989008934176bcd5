"""The gateway process inside its container: `python -m flower_batch.gateway.server serve ...`.

__main__     the entry: reads the container's environment once, builds the gateway, serves
responders   each mode's responder behind the same tap
tap          budgets, metering and recording around any responder
routing      a request to its job by the job's own token
proxy        anthropic mode: the upstream Messages API (+ upstream_pool: kept-alive connections)
replay       replay mode: a recorded job's responses again
"""
