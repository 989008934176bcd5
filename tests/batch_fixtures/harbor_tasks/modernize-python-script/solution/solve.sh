#!/bin/bash
cat > /app/stats.py <<'PY'
import sys

counts = {}
with open(sys.argv[1]) as handle:
    for line in handle:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1

for word, count in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])):
    print("%s %d" % (word, count))
PY
