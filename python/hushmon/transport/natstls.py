"""TLS for hushmon's NATS servers and clients (docs/security.md, "NATS:
TLS, identities, roles"): a private CA, a certificate per server (hub,
rack leaf) and per client (each node, each service role), and the
SSLContext the Python clients connect with.

One CA per site, made by ``python -m hushmon.transport.deploy secrets``
(and by the test bed for itself). Keys are EC P-256 (fast to make and to
handshake, accepted by nats-server, OpenSSL and Python's ssl); private keys
are written 0600 with O_EXCL. A server certificate is for serverAuth and
clientAuth (servers dial each other: routes, leaf uplinks); a client
certificate is for clientAuth only, so a node's key cannot pose as a server.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hushmon.errors import HushmonError

if TYPE_CHECKING:
    from cryptography import x509

CA_FILE_ENV = "HUSHMON_NATS_CA_FILE"
CERT_FILE_ENV = "HUSHMON_NATS_CERT_FILE"
KEY_FILE_ENV = "HUSHMON_NATS_KEY_FILE"
CA_NAME = "ca"
# Long enough not to expire under a running cluster by surprise; rotation
# (docs/security.md) replaces them well before.
CA_DAYS = 3650
LEAF_CERT_DAYS = 825
# nats-server's TLS handshake deadline (default 0.5 s): a loaded 2-core node
# or a busy leaf takes longer, and a refused handshake is a reconnect loop.
HANDSHAKE_TIMEOUT_S = 5


@dataclass(frozen=True)
class TlsFiles:
    """Where a server's or a client's TLS files are: the CA bundle it trusts,
    its own certificate and key ('' for a client that presents none)."""

    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None

    @classmethod
    def under(cls, folder: Path, name: str) -> TlsFiles:
        """The files ``write_identity`` made for ``name`` in ``folder``."""
        return cls(folder / f"{CA_NAME}.pem", folder / f"{name}.pem", folder / f"{name}.key")

    def env(self) -> dict[str, str]:
        """The environment a hushmon client (C or Python) reads them from."""
        out = {CA_FILE_ENV: str(self.ca_file)}
        if self.cert_file is not None and self.key_file is not None:
            out[CERT_FILE_ENV] = str(self.cert_file)
            out[KEY_FILE_ENV] = str(self.key_file)
        return out


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hushmon"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _private(path: Path, data: bytes) -> Path:
    """A new file only its owner reads (never an existing one: a key
    overwritten under a running server is a silent outage)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise HushmonError(f"{path} exists: remove it to make a new one") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _public(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o644)
    return path


def make_ca(folder: Path, common_name: str = "hushmon NATS CA") -> None:
    """``ca.pem`` (public) and ``ca.key`` (0600) in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _private(
        folder / f"{CA_NAME}.key",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    _public(folder / f"{CA_NAME}.pem", cert.public_bytes(serialization.Encoding.PEM))


def write_identity(
    folder: Path, stem: str, name: str, addresses: Sequence[str] = (), server: bool = False
) -> TlsFiles:
    """``<stem>.pem`` and ``<stem>.key`` (0600) for ``name``, signed by the
    CA in ``folder``. ``addresses``: further DNS names and IP addresses
    clients reach a server at (with ``name``, its subjectAltNames; a client
    certificate carries its name, which is what it is known by)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    try:
        ca_key = serialization.load_pem_private_key(
            (folder / f"{CA_NAME}.key").read_bytes(), password=None
        )
        ca_cert = x509.load_pem_x509_certificate((folder / f"{CA_NAME}.pem").read_bytes())
    except (OSError, ValueError) as exc:
        raise HushmonError(f"the CA in {folder}: {exc}") from None
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise HushmonError(f"{folder / (CA_NAME + '.key')}: not an EC key")
    sans: list[x509.GeneralName] = []
    for a in [name, *addresses]:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(a)))
        except ValueError:
            sans.append(x509.DNSName(a))
        else:
            if server:
                # nats-server's verify_cert_and_check_known_urls compares a
                # route peer's DNS names only with the route URLs' hosts
                # (measured: a route by address was refused otherwise)
                sans.append(x509.DNSName(a))
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=LEAF_CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(sans))), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles.under(folder, stem)
    assert files.key_file is not None and files.cert_file is not None
    _private(
        files.key_file,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    _public(files.cert_file, cert.public_bytes(serialization.Encoding.PEM))
    return files


def client_files_from_env() -> TlsFiles | None:
    """The TLS files this process's environment names (None: plain)."""
    ca = os.environ.get(CA_FILE_ENV, "")
    cert = os.environ.get(CERT_FILE_ENV, "")
    key = os.environ.get(KEY_FILE_ENV, "")
    if not ca:
        if cert or key:
            raise HushmonError(f"{CERT_FILE_ENV} and {KEY_FILE_ENV} need {CA_FILE_ENV}")
        return None
    if bool(cert) != bool(key):
        raise HushmonError(f"set both {CERT_FILE_ENV} and {KEY_FILE_ENV} (or neither)")
    return TlsFiles(Path(ca), Path(cert) if cert else None, Path(key) if key else None)


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """Verifies the server's chain against ``files.ca_file`` and its name
    against the URL's host; presents the client's certificate if any."""
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca_file))
        if files.cert_file is not None and files.key_file is not None:
            ctx.load_cert_chain(str(files.cert_file), str(files.key_file))
    except (OSError, ssl.SSLError) as exc:
        shown = getattr(exc, "filename", None) or files.ca_file
        raise HushmonError(f"NATS TLS files ({shown}): {exc.strerror or exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
