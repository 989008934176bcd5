"""`python -m flower.scripted serve|check`: one URL line, serves until SIGTERM, one-line errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

from flower.scripted import read_request_log

HELLO_TOML = '[[rules]]\nname = "hi"\nreply = [{ text = "hi from the command" }]\n'


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "flower.scripted", *args]


def test_serve_prints_the_url_answers_logs_and_stops_on_sigterm(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(HELLO_TOML)
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        command("serve", str(scenario), "--log", str(log)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        payload = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hey"}]}
        req = urllib.request.Request(
            url + "/j/a/v1/messages?beta=true", data=json.dumps(payload).encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())
        assert answer["content"] == [{"type": "text", "text": "hi from the command"}]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = list(read_request_log(log))
    assert [(r["prefix"], r["rule"]) for r in records] == [("/j/a", "hi")]


def test_check_passes_a_good_file_and_a_bad_one_is_one_line_without_traceback(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text(HELLO_TOML)
    done = subprocess.run(command("check", str(good)), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "ok, 1 rules" in done.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\nname = "x"\nerror = 404\nreply = "no"\n')
    done = subprocess.run(command("serve", str(bad)), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{bad}: rule #1 'x': field 'error'" in done.stderr
