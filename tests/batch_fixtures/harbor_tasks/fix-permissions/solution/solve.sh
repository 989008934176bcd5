#!/bin/bash
# Deliberately wrong (the oracle's test needs one task that fails): it fixes the other script.
chmod +x /app/start.sh
