"""docker/test.sh's helpers, run on the host: the build's pip settings, the S3 uploads, and the checks of a job's files.

python docker/testkit.py pip-settings OUT          host pip settings -> OUT/pip.conf (+ OUT/pip-cert.pem); prints
                                                   "PORT FOLDER" for each local folder to serve on loopback
python docker/testkit.py upload ENDPOINT BUCKET KEY SOURCE (gzip|zip)
python docker/testkit.py check JOB_FOLDER KIND [ARGS]   one line per check; exit 1 on the first that fails
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import urlparse

METRIC = re.compile(r"^Metrics - timestamp=[0-9.]+; Cost=(-?[0-9.e+-]+); iteration_number=(\d+);$", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pip_settings(out: Path) -> None:
    """The host's pip settings for a build with host networking: http(s) indexes as they are, local folders (file://
    indexes, find-links) as loopback URLs test.sh serves, the CA bundle as a secret file."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    settings: dict[str, str] = {}
    for line in listed.splitlines():  # ":env:.key='v'" (from PIP_*) wins over "global.key='v'"
        scope, _, rest = line.partition(".")
        key, _, value = rest.partition("=")
        if scope in ("global", "install", ":env:") and (scope == ":env:" or key not in settings):
            settings[key] = value.strip("'\"")
    served: list[tuple[int, str]] = []

    def reachable(url: str, index: bool) -> str:
        parsed = urlparse(url)
        if parsed.scheme in ("http", "https"):
            return url
        path = Path(parsed.path if parsed.scheme == "file" else url)
        if not path.exists():
            return ""
        folder, tail = (path.parent, f"{path.name}/") if index else (path, "")
        port = _free_port()
        served.append((port, str(folder)))
        return f"http://127.0.0.1:{port}/{tail}"

    lines = ["[global]"]
    for key, index in (("index-url", True), ("extra-index-url", True), ("find-links", False)):
        urls = [u for u in (reachable(v, index) for v in settings.get(key, "").split()) if u]
        if urls:
            lines.append(f"{key} = {' '.join(urls)}")
    cert = settings.get("cert") or os.environ.get("SSL_CERT_FILE", "")
    if cert and Path(cert).is_file():
        shutil.copy(cert, out / "pip-cert.pem")
        lines.append("cert = /etc/ssl/certs/pip-cert.pem")
    lines.append(f"timeout = {settings.get('timeout') or settings.get('default-timeout') or 120}")
    (out / "pip.conf").write_text("\n".join(lines) + "\n")
    for port, folder in served:
        print(port, folder)


def upload(endpoint: str, bucket: str, key: str, source: Path, kind: str) -> None:
    """``source`` (a folder) packed as AwsQuantumJob.create(source_module=...) packs it (a .tar.gz holding the folder
    by its name), or as a .zip, and put at s3://BUCKET/KEY."""
    import boto3

    data = io.BytesIO()
    if kind == "gzip":
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            tar.add(source, arcname=source.name, filter=lambda t: None if "__pycache__" in t.name else t)
    else:
        with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted(source.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zipped.write(path, Path(source.name) / path.relative_to(source))
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    if bucket not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=data.getvalue())
    print(f"s3://{bucket}/{key} ({len(data.getvalue())} bytes)")


class CheckFailed(Exception):
    pass


def ok(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)
    print(f"  ok: {what}")


def _results(job: Path) -> dict:
    path = job / "model" / "results.json"
    ok(path.is_file(), f"{path} written")
    data = json.loads(path.read_text())
    ok(data.get("dataFormat") == "plaintext", "results in Braket's shape (dataFormat plaintext, dataDictionary)")
    return data["dataDictionary"]


def check(job: Path, kind: str, args: list[str]) -> None:
    log = (job / "log.txt").read_text()
    code = int((job / "exit-code").read_text())
    failure = job / "output" / "failure"
    if kind == "qaoa":  # args: iterations, n_layers[, a cost to agree with]
        iterations, layers = int(args[0]), int(args[1])
        ok(code == 0, f"exit code 0 (got {code})")
        ok("Training Successful!!" in log and "Training Fails" not in log, "the example printed 'Training Successful!!'")
        ok(not failure.exists(), "no failure file")
        metrics = [(float(c), int(i)) for c, i in METRIC.findall(log)]
        ok(
            [i for _, i in metrics] == list(range(iterations + 1)),
            f"{iterations + 1} metric lines Cost, iteration 0..{iterations}",
        )
        result = _results(job)
        ok(len(result["params"]) == 2 and all(len(p) == layers for p in result["params"]), f"params 2 x {layers}")
        ok(math.isclose(result["cost"], metrics[-1][0], rel_tol=1e-9), f"final cost {result['cost']:.10f} = the last metric")
        if len(args) > 2:
            ok(
                abs(result["cost"] - float(args[2])) < 1e-6,
                f"the same final cost as the other device's run ({float(args[2]):.10f})",
            )
        print(f"  cost: {result['cost']!r}")
    elif kind == "ckpt":  # args: steps, resumed_from, checkpoint file, earlier run's folder (its costs lead this one's)
        steps, resumed = int(args[0]), int(args[1])
        ok(code == 0, f"exit code 0 (got {code})")
        ok("Requirement already satisfied: networkx" in log, "the code's requirements.txt was installed")
        checkpoint = json.loads(Path(args[2]).read_text())
        ok(checkpoint["dataDictionary"]["step"] == steps, f"checkpoint at step {steps}")
        result = _results(job)
        ok(result["resumed_from"] == resumed and len(result["costs"]) == steps, f"resumed from step {resumed}, {steps} costs")
        metrics = [int(i) for _, i in METRIC.findall(log)]
        ok(metrics == list(range(resumed, steps)), f"metric lines for steps {resumed}..{steps - 1} only")
        if len(args) > 3:
            earlier = json.loads((Path(args[3]) / "model" / "results.json").read_text())["dataDictionary"]["costs"]
            ok(result["costs"][: len(earlier)] == earlier, "the earlier run's costs, continued")
    elif kind == "failure":  # args: the failure file's first line, as a prefix
        ok(code != 0, f"a non-zero exit ({code})")
        text = failure.read_text() if failure.is_file() else ""
        ok(text.startswith(args[0]), f"/opt/ml/output/failure starts {args[0]!r}")
        print(f"  failure: {text.splitlines()[0] if text else ''}")
    else:
        raise SystemExit(f"testkit.py: unknown check {kind!r}")


def main() -> int:
    command, *args = sys.argv[1:]
    if command == "pip-settings":
        pip_settings(Path(args[0]))
    elif command == "upload":
        upload(args[0], args[1], args[2], Path(args[3]), args[4])
    elif command == "check":
        try:
            check(Path(args[0]), args[1], args[2:])
        except CheckFailed as exc:
            print(f"  FAILED: {exc}", file=sys.stderr)
            return 1
    else:
        raise SystemExit(f"testkit.py: unknown command {command!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
