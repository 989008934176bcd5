#!/bin/bash
mkdir -p /logs/verifier
expected=$'the 3\nand 2\nbird 1\ncat 1\ndog 1'
if [ "$(cd /tmp && python3 /app/stats.py /tests/words.txt 2>/dev/null)" = "$expected" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
