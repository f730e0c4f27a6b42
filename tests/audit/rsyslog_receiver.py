"""Debian's rsyslogd as a child process on a loopback port, configured as the syslog sink's
documentation asks; and the certificates its TLS tests need."""

import datetime as dt
import glob
import json
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.live import free_port

RSYSLOGD = shutil.which("rsyslogd") or shutil.which("rsyslogd", path="/usr/sbin:/sbin")
# rsyslog-gnutls: the TLS driver imtcp loads by name.
GTLS_DRIVER = glob.glob("/usr/lib/*/rsyslog/lmnsd_gtls.so") + glob.glob("/usr/lib/rsyslog/*gtls*")
START_SECONDS = 30  # to listen, or to stop, on a busy two-core machine

# One JSON object a line for each message: what rsyslog's RFC 5424 parser read from it, and the
# message as received. A kill can cut a line short; the message comes again whole, from the queue.
CONFIG = """\
global(workDirectory="{work}" maxMessageSize="64k"{tls_files})
module(load="imtcp"{tls_driver})
template(name="received" type="list" option.jsonf="on") {{
  property(outname="facility" name="syslogfacility" format="jsonf" datatype="number")
  property(outname="severity" name="syslogseverity" format="jsonf" datatype="number")
  property(outname="hostname" name="hostname" format="jsonf")
  property(outname="app_name" name="app-name" format="jsonf")
  property(outname="procid" name="procid" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="structured_data" name="structured-data" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
  property(outname="raw" name="rawmsg" format="jsonf")
}}
ruleset(name="hyperbook" queue.type="Disk" queue.fileName="hyperbook"
        queue.checkpointInterval="1" queue.syncQueueFiles="on") {{
  action(type="omfile" file="{received}" template="received")
}}
action(type="omfile" file="{log}")
input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="hyperbook")
"""
TLS_FILES = (
    ' defaultNetstreamDriverCAFile="{ca}" defaultNetstreamDriverCertFile="{cert}"'
    ' defaultNetstreamDriverKeyFile="{key}"'
)
TLS_DRIVER = ' streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon"'


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


class Rsyslog:
    """rsyslogd -n with its own configuration, work directory and port; start, stop (with any
    signal) and start again on the same port."""

    def __init__(self, directory: Path, *, tls: Certificates | None = None):
        self.directory = directory
        self.port = free_port()
        self.received_path = directory / "received.jsonl"
        self.log_path = directory / "rsyslogd.log"
        self.config_path = directory / "rsyslog.conf"
        self.process: subprocess.Popen | None = None
        (directory / "work").mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            CONFIG.format(
                work=directory / "work",
                received=self.received_path,
                log=self.log_path,
                port=self.port,
                tls_files=TLS_FILES.format(ca=tls.ca, cert=tls.cert, key=tls.key) if tls else "",
                tls_driver=TLS_DRIVER if tls else "",
            )
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.directory / "rsyslogd.out", "ab") as out:
            self.process = subprocess.Popen(
                [RSYSLOGD, "-n", "-f", str(self.config_path), "-i", str(self.directory / "pid")],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def wait_listening(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise AssertionError(f"rsyslogd exited: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"rsyslogd is not listening after {START_SECONDS}s: {self.log()}")

    def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(how)
            self.process.wait(timeout=START_SECONDS)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=START_SECONDS)

    def received(self) -> list[dict]:
        """The messages written so far, each as rsyslog parsed it."""
        if not self.received_path.exists():
            return []
        messages = []
        for line in self.received_path.read_text(encoding="utf-8").splitlines():
            start = line.rfind('{"facility":')  # a line cut short runs into the next message
            try:
                messages.append(json.loads(line[start:]))
            except ValueError:
                continue
        return messages

    def wait_received(self, ids: set[str], seconds: float = START_SECONDS) -> list[dict]:
        """The messages written, once every event of `ids` is among them."""
        deadline = time.monotonic() + seconds
        while True:
            messages = self.received()
            missing = ids - {ocsf(message)["metadata"]["uid"] for message in messages}
            if not missing or time.monotonic() > deadline:
                assert not missing, f"{len(missing)} events never arrived: {self.log()}"
                return messages
            time.sleep(0.1)

    def log(self) -> str:
        """What rsyslogd said about itself (its own messages and its output)."""
        files = sorted(self.directory.glob("rsyslogd.*"))
        return "\n".join(p.read_text(errors="replace") for p in files)[-4000:]


def ocsf(message: dict) -> dict:
    """The OCSF event a received message carries (its MSG: a BOM, then the JSON)."""
    assert message["msg"].startswith("\ufeff"), message["msg"][:40]
    return json.loads(message["msg"][1:])


def certificates(directory: Path, name: str = "localhost") -> Certificates:
    """A CA of its own, and a server certificate it issued for `name` (a DNS name only)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test CA {directory.name}")])

    def issued(subject: x509.Name, public_key) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
        )

    ca = (
        issued(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        issued(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), key.public_key())
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    files = Certificates(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )
