#!/bin/bash
mkdir -p /logs/verifier
if [ "$(/app/run.sh 2>/dev/null)" = "ok" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
