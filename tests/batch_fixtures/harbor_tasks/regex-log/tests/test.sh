#!/bin/bash
# Four checks; the reward is the share that pass (3 of 4 -> 0.75), written to reward.json.
mkdir -p /logs/verifier
python3 - <<'PY'
import json, re
checks = []
try:
    pattern = open("/app/regex.txt", encoding="utf-8").read().strip()
    compiled = re.compile(pattern)
    checks.append(True)
except (OSError, re.error):
    compiled = None
    checks.append(False)

def search(line):
    return compiled.search(line) if compiled else None

found = search("2024-03-15 client 192.168.1.10 GET /index.html 200")
checks.append(bool(found) and "2024-03-15" in found.group(0))
# A line that must not match counts only when there is a pattern to try.
checks.append(compiled is not None and search("2024-03-16 cron job finished, no address") is None)
checks.append(compiled is not None and search("2024-13-02 client 10.0.0.7 GET /bad-month 404") is None)
passed = sum(checks)
with open("/logs/verifier/reward.json", "w") as out:
    json.dump({"reward": passed / len(checks), "checks_passed": passed}, out)
print(f"{passed} of {len(checks)} checks passed")
PY
