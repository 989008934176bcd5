# The victim: a secret in its workspace and its runs, and a listener on every address it has,
# held while the attacker runs (the test says how long in hold-seconds).
echo "victim-secret-4f1c" > /workspace/victim-marker.txt
echo "victim-secret-4f1c" > /runs/victim-marker.txt
python3 - <<'PY' &
import socket, threading
s = socket.create_server(("0.0.0.0", 7777)); s.settimeout(None)
while True:
    c, _ = s.accept(); c.sendall(b"victim-secret-4f1c\n"); c.close()
PY
sleep "$(cat /workspace/hold-seconds 2>/dev/null || echo 20)"
