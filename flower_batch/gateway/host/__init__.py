"""The gateway's host side: what the orchestrator does to give a batch its gateway (of flower, only its foundation).

sidecar     the batch's private network and the gateway container on it: start, stop, name
setup       what each mode adds to the gateway container (arguments, environment, egress)
supervisor  restart a gateway that died, within a policy (+ health: how it fared, for the record)
usage       what the gateway left for a job once its container is gone
"""
