"""A session cluster with TLS everywhere (issue 16): RPC between JobManager and TaskManager over
mutual TLS, REST and the web UI over https, the CLI verifying the cluster's CA.

Certificates come from a CA made in the test; the keys are encrypted (``key-password``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import ssl
import subprocess
from pathlib import Path

import grpc
import httpx
import pytest
from cluster_helpers import FLINTLOCK, REPO, SLOW_PROGRAM, start_cluster

from flintlock.runtime.rpc.grpc_service import RPC_METHOD
from flintlock.testing.tls import make_ca

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

CHROMIUM = Path(os.environ.get("FLINTLOCK_CHROMIUM", "/usr/bin/chromium"))


def _spki_pin(pem_file: Path) -> str:
    """Chromium's --ignore-certificate-errors-spki-list value for the certificate in pem_file:
    trusts exactly that public key (the browser has no way to load the test's CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(pem_file.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def _check_web_ui(url: str, certificate: Path) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing; CI must provide it")
        return
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=[
            "--no-sandbox", "--disable-gpu", f"--ignore-certificate-errors-spki-list="
            f"{_spki_pin(certificate)}"])
        try:
            page = browser.new_page()
            page.goto(url)
            expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("1")
            expect(page.locator("[data-testid=completed-jobs]")).to_contain_text("tls-job")
        finally:
            browser.close()


def test_tls_cluster_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = make_ca(tmp_path / "pki")
    node = ca.issue("node", hosts=("127.0.0.1", "localhost"), password="key-pw")
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "config.yaml").write_text(json.dumps({
        "security.ssl.internal.enabled": True,
        "security.ssl.internal.keystore": str(node),
        "security.ssl.internal.key-password": "key-pw",
        "security.ssl.internal.truststore": str(ca.truststore),
        "security.ssl.rest.enabled": True,
        "security.ssl.rest.keystore": str(node),
        "security.ssl.rest.key-password": "key-pw",
        "security.ssl.rest.truststore": str(ca.truststore),
    }))
    monkeypatch.setenv("FLINTLOCK_CONF_DIR", str(conf_dir))  # the cluster's and the CLI's config
    cluster = start_cluster(tmp_path / "state", task_managers=1, slots=1)
    info = next(cluster)
    try:
        port = info["address"].split(":")[1]
        https = f"https://127.0.0.1:{port}"
        with httpx.Client(base_url=https, verify=ssl.create_default_context(cafile=str(ca.truststore)),
                          timeout=30) as rest:
            # the TaskManager registered over mutual-TLS gRPC
            assert rest.get("/overview").json()["taskmanagers"] == 1

            program = tmp_path / "job.py"
            program.write_text(SLOW_PROGRAM)
            out = tmp_path / "out"
            run = subprocess.run([*FLINTLOCK, "run", "-m", f"127.0.0.1:{port}", *info["client_d"],
                                  str(program), str(out), "50", "tls-job"], capture_output=True, text=True,
                                 timeout=300, cwd=REPO)
            assert run.returncode == 0, run.stderr[-3000:]
            assert "FINISHED" in run.stderr and any(out.glob("*.parquet"))
            listed = subprocess.run([*FLINTLOCK, "list", "-a", "-m", f"127.0.0.1:{port}",
                                     *info["client_d"]],
                                    capture_output=True, text=True, timeout=120, cwd=REPO)
            assert listed.returncode == 0 and "tls-job (FINISHED)" in listed.stdout, listed.stderr
            jobs = rest.get("/jobs/overview").json()["jobs"]
            assert [j["state"] for j in jobs if j["name"] == "tls-job"] == ["FINISHED"]

        with pytest.raises(httpx.HTTPError):  # no plain http on the REST port
            httpx.get(f"http://127.0.0.1:{port}/overview", timeout=10)
        rpc_port = json.loads((info["state"] / "jobmanager.port").read_text())["rpc_port"]
        with grpc.insecure_channel(f"127.0.0.1:{rpc_port}") as channel:  # nor on the RPC port
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(RPC_METHOD)(b"x", timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE

        _check_web_ui(https + "/", node)
    finally:
        cluster.close()
