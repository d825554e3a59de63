"""Encryption of connection secrets at rest (Fernet: AES-128-CBC + HMAC-SHA256).

Where the key comes from, first match wins:
1. an explicit `secret` string, or `TOOLWEAVE_SECRET_KEY`;
2. an explicit key file, or `TOOLWEAVE_SECRET_KEY_FILE`;
3. an in-memory SQLite database: a random key for this process (nothing outlives it anyway);
4. PostgreSQL: an error. Gateways sharing a database must share the key, and a key
   file generated on one host would silently differ from the next one's;
5. SQLite file: `~/.toolweave/secret.key`, created on first use with mode 0600. It
   lives outside the database's folder on purpose, so a copied or backed-up
   database does not carry its own key along.

Any string is accepted as a secret; HKDF-SHA256 stretches it to the 32 bytes
Fernet needs, so a passphrase and a generated key are handled alike.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from toolweave.store.database import Database
from toolweave.store.errors import SecretKeyError

SECRET_KEY_ENV = "TOOLWEAVE_SECRET_KEY"
SECRET_KEY_FILE_ENV = "TOOLWEAVE_SECRET_KEY_FILE"
DEFAULT_KEY_FILE = Path("~/.toolweave/secret.key")
_HKDF_SALT = b"toolweave"
_HKDF_INFO = b"toolweave connection secrets v1"

log = logging.getLogger(__name__)


class SecretDict(dict[str, str]):
    """A plain dict of secret values whose repr/str show only the names.

    Secrets end up in tracebacks, debug logs and f-strings by accident; this
    makes the accident harmless while `d["token"]` still works.
    """

    def __repr__(self) -> str:
        return f"SecretDict({{{', '.join(f'{name!r}: ***' for name in self)}}})"

    __str__ = __repr__


def derive_fernet_key(secret: str) -> bytes:
    if not secret:
        raise SecretKeyError("the secret key is empty")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT, info=_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret.encode()))


class SecretBox:
    """Encrypts and decrypts byte strings; `source` says where the key came from, never the key."""

    __slots__ = ("_fernet", "source")

    def __init__(self, secret: str, source: str) -> None:
        self._fernet = Fernet(derive_fernet_key(secret))
        self.source = source

    def __repr__(self) -> str:
        return f"SecretBox(source={self.source!r})"

    def encrypt(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def decrypt(self, token: bytes, what: str) -> bytes:
        """`what` names the thing for the error message, which must carry no secret."""
        try:
            return self._fernet.decrypt(token)
        except InvalidToken:
            raise SecretKeyError(
                f"cannot decrypt {what} with the secret key from {self.source}: the key differs from "
                f"the one it was stored with (check {SECRET_KEY_ENV} / the key file), or the data is damaged"
            ) from None

    @classmethod
    def resolve(
        cls,
        db: Database | None = None,
        *,
        secret: str | None = None,
        key_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> SecretBox:
        env = os.environ if environ is None else environ
        if secret is not None:
            return cls(secret, "the given secret")
        if env.get(SECRET_KEY_ENV):
            return cls(env[SECRET_KEY_ENV], SECRET_KEY_ENV)
        file = key_file if key_file is not None else env.get(SECRET_KEY_FILE_ENV) or None
        if file is not None:
            path = Path(file).expanduser()
            return cls(load_or_create_key_file(path), str(path))
        if db is not None and db.is_memory:
            return cls(secrets.token_urlsafe(32), "a random key for this in-memory database")
        if db is not None and db.dialect == "postgresql":
            raise SecretKeyError(
                f"set {SECRET_KEY_ENV} (or {SECRET_KEY_FILE_ENV}) to store connections in PostgreSQL: "
                "every gateway sharing the database needs the same key"
            )
        path = DEFAULT_KEY_FILE.expanduser()
        return cls(load_or_create_key_file(path), str(path))


def load_or_create_key_file(path: Path) -> str:
    """Read the key, or create it atomically so two gateways starting together agree on one key."""
    if not path.exists():
        _create_key_file(path)
    _warn_if_exposed(path)
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise SecretKeyError(f"cannot read the secret key file {path}: {error.strerror}") from None
    if not key:
        raise SecretKeyError(f"the secret key file {path} is empty")
    return key


def _create_key_file(path: Path) -> None:
    """Write a temporary file, then hard-link it into place: link() fails if another process won."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (secrets.token_urlsafe(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
    log.info(
        "created the secret key file %s (mode 0600); back it up: connections cannot be read without it", path
    )


def _warn_if_exposed(path: Path) -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the secret key file %s is readable by other users (mode %o); chmod 600 it", path, mode & 0o777
        )
