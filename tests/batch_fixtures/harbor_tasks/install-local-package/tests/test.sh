#!/bin/bash
mkdir -p /logs/verifier
status=$(dpkg-query -W -f='${Status}' flower-greeter 2>/dev/null)
if [ "$status" = "install ok installed" ] && command -v flower-greeter >/dev/null \
   && [ "$(cat /app/greeting.txt 2>/dev/null)" = "$(flower-greeter)" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
