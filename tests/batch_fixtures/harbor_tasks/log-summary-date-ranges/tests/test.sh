#!/bin/bash
mkdir -p /logs/verifier
expected=$'severity,count\nERROR,3\nWARNING,1\nINFO,4'
actual=$(tr -d '\r' < /app/summary.csv 2>/dev/null)
if [ "$actual" = "$expected" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
