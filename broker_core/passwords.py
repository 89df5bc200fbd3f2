"""The password file: ``user:$pbkdf2-sha256$<iterations>$<salt>$<hash>`` lines.

One user per line; blank lines and lines starting with ``#`` are ignored. A hash is
PBKDF2-HMAC-SHA256 of the SASLprep-normalized password (RFC 4013; the raw UTF-8 bytes
when SASLprep refuses the string, as PostgreSQL does), a random 16-byte salt and
``DEFAULT_ITERATIONS`` rounds; salt and hash are standard base64 with padding.

That hash is exactly SCRAM-SHA-256's ``SaltedPassword`` (RFC 5802 section 3, RFC 7677),
so the same file serves plain MQTT username/password and SCRAM enhanced authentication
(``broker_core.scram``) without storing anything else.

The hashes of a mosquitto password file are read too, so that users migrating from
mosquitto keep their file (``MosquittoHash``): ``$7$<iterations>$<salt>$<hash>``,
PBKDF2-HMAC-SHA512 (mosquitto 2.x's default), and ``$6$<salt>$<hash>``, SHA-512 of the
password followed by the salt (mosquitto 1.x). Both hash the password's bytes as sent,
without SASLprep. Their users log in with a username and password; SCRAM needs the
``pbkdf2-sha256`` form, which ``edgebus passwd`` writes when it sets a password.

Usernames are 1 to 65535 bytes of UTF-8 without ``:``, control characters or leading or
trailing spaces (``:`` separates the fields, as in mosquitto's password file).
``edgebus passwd`` writes the file (mode 0600, replaced atomically).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stringprep
import tempfile
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from broker_core.errors import ConfigError

__all__ = [
    "DEFAULT_ITERATIONS",
    "MIN_ITERATIONS",
    "SCHEME",
    "MosquittoHash",
    "PasswordFile",
    "PasswordHash",
    "StoredPassword",
    "hash_password",
    "normalize_password",
    "parse_stored_password",
    "read_password_file",
    "saslprep",
    "username_problem",
    "verify_password",
    "write_password_file",
]

log = logging.getLogger(__name__)

SCHEME = "pbkdf2-sha256"
# About 60 ms on one core of a 2020s x86 server, a few hundred on a small ARM board; the
# client pays it again for SCRAM. `edgebus passwd --iterations` picks another cost.
DEFAULT_ITERATIONS = 210_000
MIN_ITERATIONS = 4096  # RFC 7677 section 4: at least 4096 for SCRAM-SHA-256
MAX_ITERATIONS = 100_000_000
SALT_BYTES = 16
HASH_BYTES = 32  # one SHA-256 block: PBKDF2 equals SCRAM's Hi()


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"{what} must be base64: {exc}") from None


@dataclass(frozen=True, slots=True)
class PasswordHash:
    """One stored password: SaltedPassword = PBKDF2-HMAC-SHA256(password, salt, iterations)."""

    iterations: int
    salt: bytes
    salted_password: bytes

    def encode(self) -> str:
        salt = base64.b64encode(self.salt).decode("ascii")
        digest = base64.b64encode(self.salted_password).decode("ascii")
        return f"${SCHEME}${self.iterations}${salt}${digest}"

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        """Reads ``$pbkdf2-sha256$<iterations>$<salt>$<hash>``; ValueError says what is wrong."""
        parts = text.split("$")
        if len(parts) > 2 and parts[0] == "" and parts[1] != SCHEME:
            raise ValueError(
                f"unknown hash scheme {parts[1]!r} (expected {SCHEME!r}, or mosquitto's"
                " '6' or '7')"
            )
        if len(parts) != 5 or parts[0] != "":
            raise ValueError(f"expected ${SCHEME}$<iterations>$<salt>$<hash>")
        if not parts[2].isdigit():
            raise ValueError(f"iterations must be a number, got {parts[2]!r}")
        iterations = int(parts[2])
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}")
        salt, digest = _b64(parts[3], "salt"), _b64(parts[4], "hash")
        if not salt:
            raise ValueError("empty salt")
        if len(digest) != HASH_BYTES:
            raise ValueError(f"the hash must be {HASH_BYTES} bytes, got {len(digest)}")
        return cls(iterations, salt, digest)


@dataclass(frozen=True, slots=True)
class MosquittoHash:
    """A hash written by ``mosquitto_passwd``: ``$7$`` (PBKDF2-HMAC-SHA512, ``iterations``
    rounds) or ``$6$`` (one SHA-512 of password + salt; ``iterations`` is 1)."""

    kind: Literal["6", "7"]
    iterations: int
    salt: bytes
    digest: bytes

    def encode(self) -> str:
        salt = base64.b64encode(self.salt).decode("ascii")
        digest = base64.b64encode(self.digest).decode("ascii")
        if self.kind == "6":
            return f"$6${salt}${digest}"
        return f"$7${self.iterations}${salt}${digest}"

    @classmethod
    def parse(cls, text: str) -> MosquittoHash:
        """Reads ``$6$<salt>$<hash>`` or ``$7$<iterations>$<salt>$<hash>``."""
        parts = text.split("$")
        if parts[:2] == ["", "6"] and len(parts) == 4:
            iterations, salt_text, digest_text = 1, parts[2], parts[3]
        elif parts[:2] == ["", "7"] and len(parts) == 5:
            if not parts[2].isdigit() or not 1 <= int(parts[2]) <= MAX_ITERATIONS:
                raise ValueError(f"iterations must be a number from 1 to {MAX_ITERATIONS}")
            iterations, salt_text, digest_text = int(parts[2]), parts[3], parts[4]
        else:
            raise ValueError(
                "expected mosquitto's $6$<salt>$<hash> or $7$<iterations>$<salt>$<hash>"
            )
        salt, digest = _b64(salt_text, "salt"), _b64(digest_text, "hash")
        if not salt:
            raise ValueError("empty salt")
        if len(digest) != hashlib.sha512().digest_size:
            raise ValueError(f"the hash must be 64 bytes (SHA-512), got {len(digest)}")
        return cls("6" if parts[1] == "6" else "7", iterations, salt, digest)

    def matches(self, password: bytes) -> bool:
        if self.kind == "6":
            digest = hashlib.sha512(password + self.salt).digest()
        else:
            digest = hashlib.pbkdf2_hmac("sha512", password, self.salt, self.iterations)
        return hmac.compare_digest(digest, self.digest)


#: One user's entry of the password file.
StoredPassword = PasswordHash | MosquittoHash


def parse_stored_password(text: str) -> StoredPassword:
    """The hash after ``user:``, in any form the file accepts; ValueError says why not."""
    if text.startswith(("$6$", "$7$")):
        return MosquittoHash.parse(text)
    if not text.startswith("$"):
        raise ValueError(
            "not a password hash (a plain-text password? `mosquitto_passwd -U` or"
            " `edgebus passwd` hashes it)"
        )
    return PasswordHash.parse(text)


# -- SASLprep (RFC 4013, a stringprep profile) --------------------------------------------


def _prohibited(char: str) -> bool:
    return (
        stringprep.in_table_c12(char)
        or stringprep.in_table_c21_c22(char)
        or stringprep.in_table_c3(char)
        or stringprep.in_table_c4(char)
        or stringprep.in_table_c5(char)
        or stringprep.in_table_c6(char)
        or stringprep.in_table_c7(char)
        or stringprep.in_table_c8(char)
        or stringprep.in_table_c9(char)
        or stringprep.in_table_a1(char)  # unassigned: refused, as for stored strings
    )


def saslprep(text: str) -> str:
    """RFC 4013 SASLprep of ``text``; ValueError when the profile prohibits it."""
    if text.isascii() and all(" " <= char < "\x7f" for char in text):
        return text  # printable ASCII maps to itself
    mapped = "".join(
        " " if stringprep.in_table_c12(char) else char
        for char in text
        if not stringprep.in_table_b1(char)
    )
    normalized = unicodedata.normalize("NFKC", mapped)
    for char in normalized:
        if _prohibited(char):
            raise ValueError(f"SASLprep prohibits U+{ord(char):04X}")
    # Bidirectional text (RFC 3454 section 6)
    if any(stringprep.in_table_d1(char) for char in normalized):
        if any(stringprep.in_table_d2(char) for char in normalized):
            raise ValueError("SASLprep: mixed right-to-left and left-to-right text")
        if not (stringprep.in_table_d1(normalized[0]) and stringprep.in_table_d1(normalized[-1])):
            raise ValueError("SASLprep: right-to-left text must start and end right-to-left")
    return normalized


def normalize_password(password: str | bytes) -> bytes:
    """The bytes that are hashed: SASLprep(password) in UTF-8, else the raw bytes."""
    if isinstance(password, bytes):
        try:
            text = password.decode("utf-8")
        except UnicodeDecodeError:
            return password
    else:
        text = password
    try:
        return saslprep(text).encode("utf-8")
    except ValueError:
        return text.encode("utf-8")


def hash_password(
    password: str | bytes, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> PasswordHash:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", normalize_password(password), salt, iterations)
    return PasswordHash(iterations, salt, digest)


def verify_password(password: str | bytes, stored: StoredPassword) -> bool:
    """True when ``password`` hashes to ``stored`` (constant-time comparison); slow."""
    if isinstance(stored, MosquittoHash):
        return stored.matches(password.encode("utf-8") if isinstance(password, str) else password)
    digest = hashlib.pbkdf2_hmac(
        "sha256", normalize_password(password), stored.salt, stored.iterations
    )
    return hmac.compare_digest(digest, stored.salted_password)


def username_problem(username: str) -> str | None:
    """Why ``username`` cannot be in a password file, or None."""
    if not username:
        return "the username is empty"
    if ":" in username:
        return "a username must not contain ':'"
    if any(unicodedata.category(char) == "Cc" for char in username):
        return "a username must not contain control characters"
    if username != username.strip():
        return "a username must not start or end with white space"
    if len(username.encode("utf-8")) > 65535:
        return "a username must be at most 65535 bytes"
    return None


# -- the file -----------------------------------------------------------------------------


def read_password_file(path: Path) -> dict[str, StoredPassword]:
    """Every user of ``path``; ConfigError lists each bad line as ``file:line: problem``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read the password file: {reason}") from exc
    users: dict[str, StoredPassword] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        username, colon, encoded = line.partition(":")
        if not colon:
            problems.append(f"{path}:{number}: expected user:hash")
            continue
        problem = username_problem(username)
        if problem is None and username in users:
            problem = f"user {username!r} appears twice"
        if problem is None:
            try:
                users[username] = parse_stored_password(encoded.strip())
            except ValueError as exc:
                problem = str(exc)
        if problem is not None:
            problems.append(f"{path}:{number}: {problem}")
    if problems:
        raise ConfigError(f"{path}: {len(problems)} bad line(s) in the password file", problems)
    return users


def write_password_file(path: Path, users: Mapping[str, StoredPassword]) -> None:
    """Writes ``users`` to ``path`` with mode 0600, replacing the old file atomically."""
    lines = "".join(f"{user}:{stored.encode()}\n" for user, stored in users.items())
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(lines)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class PasswordFile:
    """The users of one password file, read again when the file changes.

    ``lookup`` checks the file's modification time, size and inode first (one ``stat``)
    and re-reads it when any changed; a file that became unreadable or malformed keeps
    the users read last, with an error in the log. ``reload`` re-reads it now and
    raises ``ConfigError`` instead.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: dict[str, StoredPassword] = {}
        self._signature: tuple[int, int, int] | None = None
        self.reload()

    def reload(self) -> None:
        signature = self._stat()
        self._users = read_password_file(self.path)
        self._signature = signature
        log.info("password file %s: %d user(s)", self.path, len(self._users))

    def lookup(self, username: str) -> StoredPassword | None:
        self._refresh()
        return self._users.get(username)

    def users(self) -> Mapping[str, StoredPassword]:
        """The users as read last (no check of the file): replaced, never changed, by a
        read, so a caller may keep it to compare with a later one."""
        return self._users

    def scram_lookup(self, username: str) -> PasswordHash | None:
        """The user's SCRAM SaltedPassword; None also for a user with a mosquitto hash."""
        stored = self.lookup(username)
        return stored if isinstance(stored, PasswordHash) else None

    def __len__(self) -> int:
        return len(self._users)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _refresh(self) -> None:
        signature = self._stat()
        if signature == self._signature:
            return
        self._signature = signature  # report a broken file once, not on every lookup
        try:
            self._users = read_password_file(self.path)
        except ConfigError as exc:
            log.error("password file not reloaded, keeping %d user(s): %s", len(self), exc)
            for problem in exc.problems[:10]:
                log.error("%s", problem)
            return
        log.info("password file %s changed: %d user(s)", self.path, len(self._users))
