"""The batch's model gateway: one HTTP server per batch, run as a sidecar container.

Every job reaches the model only through it, at `http://gateway:PORT/j/<job>` (or its own unix
socket) with a per-job token as its API key. Two sides, two folders:

    server/   what runs INSIDE the gateway container (`python -m flower_batch.gateway.server serve`):
              the mode's responder, the tap, routing by token, the proxy and the replay
    host/     what the orchestrator runs on the host: start and name the sidecar, each mode's
              host setup, the supervisor that restarts it, what it reported once gone

The modules here are the contract both sides share: tokens (the per-job token), job_sockets
(the socket layout and its control line), metering and recording (the files the gateway writes
and the host reads), budget, prices, upstream_auth (the names of the credential's secret in the gateway).
"""
