"""Attacks on the sandbox from inside a job, run by the agent's own Bash tool.

Each line printed is JSON: {"attack": name, "blocked": bool, "detail": text}. `targets.json`
(written by the test) names what to try: the host's addresses and a port listening on all of
them, a neighbour container's address, the victim job's id, and a file outside the home.
Then it leaves hostile output behind for the orchestrator's readers.
"""

import json
import os
import socket
import stat
import sys
import urllib.error
import urllib.request

T = json.load(open("/workspace/targets.json"))
print(f"Python {sys.version.split()[0]}", flush=True)
MARK = T["victim_marker"]


def say(attack, blocked, detail=""):
    print(json.dumps({"attack": attack, "blocked": bool(blocked), "detail": str(detail)[:300]}), flush=True)


def connects(host, port, timeout=3.0):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, "connected"
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc}"


# -- the network: only the job's own gateway ----------------------------------------------------
for addr in T["host_addresses"]:
    ok, why = connects(addr, T["host_port"])
    say(f"net-host-{addr}", not ok, why)
for addr, port in T["other_addresses"]:
    ok, why = connects(addr, port)
    say(f"net-other-{addr}:{port}", not ok, why)
for name in ("gateway", "host.docker.internal"):
    ok, why = connects(name, 8080)
    say(f"net-name-{name}", not ok, why)
ok, why = connects("1.1.1.1", 443)
say("net-internet", not ok, why)
ifaces = [n for n in os.listdir("/sys/class/net") if n != "lo"]
say("net-interfaces", not ifaces, ifaces)

# Every unix socket the job can find, but its own gateway's.
own = os.environ.get("FLOWER_MODEL_SOCKET", "")
found = []
for root, dirs, files in os.walk("/", followlinks=False):
    if root.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(root, f)
        try:
            # /tmp is the job's own tmpfs (the CLI keeps sockets there)
            if (
                stat.S_ISSOCK(os.lstat(p).st_mode)
                and os.path.realpath(p) != os.path.realpath(own)
                and not p.startswith("/tmp/")
            ):
                found.append(p)
        except OSError:
            pass
say("unix-sockets-other-than-own", not found, found)
say("engine-socket", not os.path.exists("/var/run/docker.sock"), "")

# -- least privilege ---------------------------------------------------------------------------
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
say("uid-not-0", os.getuid() != 0 and os.geteuid() != 0, f"uid={os.getuid()}")
say("capeff-0", int(status["CapEff"].strip(), 16) == 0, status["CapEff"].strip())
say("capbnd-0", int(status["CapBnd"].strip(), 16) == 0, status["CapBnd"].strip())
say("no-new-privs", status.get("NoNewPrivs", "").strip() == "1", status.get("NoNewPrivs"))
pids = next(
    (
        open(p).read().strip()
        for p in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max")
        if os.path.exists(p)
    ),
    "absent",
)
say("pids-limited", pids.isdigit(), pids)
try:
    os.mknod("/workspace/null-dev", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    say("mknod", False, "made a device node")
except OSError as exc:
    say("mknod", True, exc)
try:
    open("/etc/hacked", "w").write("x")
    say("rootfs-write", False, "wrote /etc/hacked")
except OSError as exc:
    say("rootfs-write", True, exc)
# flower itself, brought into the image (a shared read-only volume in a task's own image)
try:
    open("/opt/flower/bin/flower", "a").write("# hacked")
    say("flower-write", False, "appended to /opt/flower/bin/flower")
except OSError as exc:
    say("flower-write", True, exc)

# -- another job's files -----------------------------------------------------------------------
hits = []
for root, dirs, files in os.walk("/", followlinks=False):
    if root.startswith(("/proc", "/sys", "/dev", "/usr", "/opt")) or root == "/workspace/many":
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(root, f)
        if p == "/workspace/targets.json":  # names the marker to look for
            continue
        try:
            if os.path.isfile(p) and os.path.getsize(p) < 1 << 20 and MARK.encode() in open(p, "rb").read():
                hits.append(p)
        except OSError:
            pass
say("read-victim-files", not hits, hits)

# -- the gateway: the victim's path with this job's token, and with none ------------------------
base = os.environ["ANTHROPIC_BASE_URL"].rsplit("/j/", 1)[0]
body = json.dumps({"model": "x", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}).encode()
for label, headers, method, data in [
    (
        "own-token",
        {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""), "content-type": "application/json"},
        "POST",
        body,
    ),
    ("no-token-get", {}, "GET", None),
    ("no-token-bad-json", {"content-type": "application/json"}, "POST", b"{not json"),
]:
    url = f"{base}/j/{T['victim_job']}/v1/messages"
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, headers=headers, method=method), timeout=10
        ) as r:
            say(f"gateway-victim-path-{label}", False, r.status)
    except urllib.error.HTTPError as exc:
        say(f"gateway-victim-path-{label}", 400 <= exc.code < 500, exc.code)
    except OSError as exc:
        say(f"gateway-victim-path-{label}", True, exc)
try:
    urllib.request.urlopen(
        urllib.request.Request(f"{base}/j/made-up-folder/v1/messages", data=body, method="POST"), timeout=10
    )
    say("gateway-made-up-job", False, "answered")
except urllib.error.HTTPError as exc:
    say("gateway-made-up-job", 400 <= exc.code < 500, exc.code)

# -- hostile output for the orchestrator's readers ---------------------------------------------
os.mkfifo("/workspace/fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("/workspace/a.sock")
os.symlink("/etc/passwd", "/workspace/passwd-link")
os.symlink(T["outside_file"], "/workspace/outside-link")
os.makedirs("/workspace/many", exist_ok=True)
for i in range(T.get("many_files", 100_000)):
    with open(f"/workspace/many/{i}", "w") as f:
        f.write("x")
open(b"/workspace/not-utf8-\xff\xfe.txt", "w").write("bytes\n")
open("/workspace/new\nline.txt", "w").write("newline in the name\n")
deep = "/workspace/deep"
os.makedirs(deep)
fd = os.open(deep, os.O_RDONLY)
for _ in range(T.get("depth", 2000)):  # relative steps: a 2,000-deep path is too long to name whole
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
os.close(fd)
# The handoff documents of a manifest row, pointed at files outside the job's folder.
os.symlink("/etc/passwd", "/runs/passwd-handoff.md")
os.symlink(T["outside_file"], "/runs/outside-handoff.md")
# One 24 MB line on the container's own output (its init's stdout): container.log must stay capped.
with open("/proc/1/fd/1", "w") as out:
    out.write("L" * (24 * 1024 * 1024))
say("hostile-output-left", True, "fifo, socket, symlinks, many files, odd names, deep tree, 24 MB line")
