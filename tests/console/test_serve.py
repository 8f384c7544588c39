"""``kwire serve`` with ``console.listener``: the console runs in the broker's process."""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request

from kwire.console.auth import hash_password
from kwire.testing.process import BrokerProcess, free_port, wait_port


def _get(url: str) -> tuple[int, str, str]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=15) as r:
            return r.status, r.headers.get("location", ""), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("location", ""), exc.read().decode()


def test_a_broker_serves_its_console_in_process_behind_its_users_file(tmp_path):
    users = tmp_path / "console-users"
    users.write_text(f"alice:{hash_password('secret')}\n")
    port = free_port()
    with BrokerProcess(tmp_path / "broker", num_partitions=2, properties={
            "console.listener": f"http://127.0.0.1:{port}", "console.users.file": str(users)}) as broker:
        wait_port("127.0.0.1", port, 20)
        status, location, _ = _get(f"http://127.0.0.1:{port}/topics")
        assert status == 303 and location.startswith("/login")
        status, _, body = _get(f"http://127.0.0.1:{port}/login")
        assert status == 200 and 'name="password"' in body
        deadline = time.monotonic() + 20                                # the console reaches its broker
        while (answer := _get(f"http://127.0.0.1:{port}/healthz"))[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert answer[0] == 200, answer[2]
        assert broker.alive()


def test_a_console_key_that_cannot_work_refuses_the_start(tmp_path):
    for key, value, reason in [("console.listener", "https://127.0.0.1:1", "http only"),
                               ("console.users.file", str(tmp_path / "missing"), "cannot read the users file")]:
        props = {"console.listener": "http://127.0.0.1:1", key: value}
        args = [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
        done = subprocess.run([sys.executable, "-m", "kwire", "serve", "--override", f"log.dirs={tmp_path}/logs", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert reason in done.stderr


def test_the_overview_rates_come_from_the_brokers_metrics_when_given(tmp_path):
    import re
    import threading
    from confluent_kafka import Producer
    from tests.support.console import ConsoleProcess
    metrics_port = free_port()
    with BrokerProcess(tmp_path / "broker", num_partitions=1,
                       properties={"prometheus.listener": f"127.0.0.1:{metrics_port}"}) as broker:
        console = ConsoleProcess(broker.bootstrap, str(tmp_path / "console.log"),
                                 "--metrics-url", f"http://127.0.0.1:{metrics_port}/metrics").start()
        stop = threading.Event()

        def produce():
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            while not stop.is_set():
                for _ in range(200):
                    producer.produce("rates", b"x" * 100)
                producer.poll(0.05)
            producer.flush(10)
        writer = threading.Thread(target=produce)
        writer.start()
        try:
            deadline, rate = time.monotonic() + 20, 0.0
            while time.monotonic() < deadline and rate <= 0:
                page = _get(console.url + "/")[2]
                assert "records in/s (broker metrics)" in page
                found = re.search(r'id="card-produce"><div class="value">([\d,.]+)<', page)
                rate = float(found.group(1).replace(",", "")) if found else 0.0
                time.sleep(0.5)
            assert rate > 0
        finally:
            stop.set()
            writer.join(20)
            console.close()


def test_hash_password_prints_a_users_file_line_and_bad_options_exit_2():
    from kwire.console.auth import verify_password
    done = subprocess.run([sys.executable, "-m", "kwire", "console", "hash-password"], input="s3cret\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    stored = done.stdout.strip()
    assert verify_password("s3cret", stored) and not verify_password("other", stored)
    bad = subprocess.run([sys.executable, "-m", "kwire", "console", "--listen", "nonsense"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected HOST:PORT" in bad.stderr
