#!/bin/bash
cd /app
{
    echo "severity,count"
    for level in ERROR WARNING INFO; do
        echo "$level,$(cat logs/*.log | awk -v l="[$level]" '$3 == l' | wc -l)"
    done
} > summary.csv
