"""The password file format, its hashes and SASLprep (broker_core.passwords)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from pathlib import Path

import pytest

from broker_core.errors import ConfigError
from broker_core.passwords import (
    DEFAULT_ITERATIONS,
    MIN_ITERATIONS,
    MosquittoHash,
    PasswordFile,
    PasswordHash,
    hash_password,
    normalize_password,
    parse_stored_password,
    read_password_file,
    saslprep,
    username_problem,
    verify_password,
    write_password_file,
)

FAST = MIN_ITERATIONS  # the cheapest cost the format accepts keeps the tests quick


def test_hash_is_pbkdf2_hmac_sha256_of_the_password() -> None:
    salt = bytes(range(16))
    stored = hash_password("s3cret", FAST, salt)
    assert stored.salted_password == hashlib.pbkdf2_hmac("sha256", b"s3cret", salt, FAST)
    assert stored.iterations == FAST
    assert stored.salt == salt


def test_encoded_form_round_trips() -> None:
    stored = hash_password("pw", FAST)
    text = stored.encode()
    scheme, iterations, salt, digest = text.split("$")[1:]
    assert scheme == "pbkdf2-sha256"
    assert int(iterations) == FAST
    assert len(base64.b64decode(salt)) == 16
    assert len(base64.b64decode(digest)) == 32
    assert PasswordHash.parse(text) == stored


def test_default_cost_and_random_salt() -> None:
    assert DEFAULT_ITERATIONS >= 100_000
    first = hash_password("same", FAST)
    second = hash_password("same", FAST)
    assert first.salt != second.salt
    assert first.salted_password != second.salted_password


def test_verify_accepts_the_password_and_nothing_else() -> None:
    stored = hash_password("correct horse", FAST)
    assert verify_password(b"correct horse", stored) is True
    assert verify_password("correct horse", stored) is True
    assert verify_password(b"correct hors", stored) is False
    assert verify_password(b"", stored) is False
    assert verify_password(b"\xff\xfe", stored) is False


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("$pbkdf2-sha256$4096$AAAA", "expected"),
        ("$argon2id$4096$AAAA$AAAA", "unknown hash scheme"),
        ("$pbkdf2-sha256$many$AAAA$AAAA", "iterations must be a number"),
        ("$pbkdf2-sha256$100$AAAA$AAAA", "iterations must be"),
        ("$pbkdf2-sha256$4096$!!!!$AAAA", "base64"),
        ("$pbkdf2-sha256$4096$AAAA$AAAA", "must be 32 bytes"),
        ("pbkdf2-sha256$4096$AAAA$AAAA$", "expected"),
    ],
)
def test_malformed_hashes_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        PasswordHash.parse(text)


# RFC 4013 section 3 examples, and the prohibited / bidi cases.
@pytest.mark.parametrize(
    ("text", "prepared"),
    [
        ("I\u00adX", "IX"),  # SOFT HYPHEN mapped to nothing
        ("user", "user"),
        ("USER", "USER"),  # case preserved
        ("\u00aa", "a"),  # NFKC
        ("\u2168", "IX"),  # NFKC
        ("a\u00a0b", "a b"),  # non-ASCII space mapped to SPACE
        ("pass word", "pass word"),
    ],
)
def test_saslprep_maps_and_normalizes(text: str, prepared: str) -> None:
    assert saslprep(text) == prepared


@pytest.mark.parametrize("text", ["\u0007", "a\u0000b", "\u0627\u0031", "\udb40\udc01"])
def test_saslprep_prohibits(text: str) -> None:
    with pytest.raises(ValueError, match="SASLprep"):
        saslprep(text)


def test_normalization_falls_back_to_the_raw_bytes() -> None:
    assert normalize_password("I\u00adX") == b"IX"
    assert normalize_password(b"I\xc2\xadX") == b"IX"
    assert normalize_password("a\u0007") == b"a\x07"  # prohibited: used as it is
    assert normalize_password(b"\xff") == b"\xff"  # not UTF-8: used as it is
    stored = hash_password("I\u00adX", FAST)
    assert verify_password(b"IX", stored) is True


@pytest.mark.parametrize(
    ("username", "problem"),
    [
        ("alice", None),
        ("dev.sensor-1@site", None),
        ("", "empty"),
        ("a:b", "':'"),
        ("a\nb", "control"),
        (" alice", "white space"),
    ],
)
def test_usernames(username: str, problem: str | None) -> None:
    found = username_problem(username)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_file_round_trip_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    users = {"alice": hash_password("a", FAST), "bob": hash_password("b", FAST)}
    write_password_file(path, users)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_password_file(path) == users
    lines = path.read_text().splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["alice", "bob"]
    assert lines[0].split(":", 1)[1].startswith("$pbkdf2-sha256$4096$") is True
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_file_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    stored = hash_password("a", FAST)
    path.write_text(f"# users\n\nalice:{stored.encode()}\n   \n")
    assert read_password_file(path) == {"alice": stored}


def test_bad_lines_are_all_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    good = hash_password("a", FAST).encode()
    path.write_text(f"alice:{good}\nno-colon\nbob:$md5$x\nalice:{good}\n:{good}\n")
    with pytest.raises(ConfigError) as caught:
        read_password_file(path)
    problems = caught.value.problems
    assert [p.split(": ", 1)[0] for p in problems] == [
        f"{path}:2",
        f"{path}:3",
        f"{path}:4",
        f"{path}:5",
    ]
    assert "appears twice" in problems[2]


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        PasswordFile(tmp_path / "nope")


def test_password_file_follows_changes(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    write_password_file(path, {"alice": hash_password("a", FAST)})
    passwords = PasswordFile(path)
    assert passwords.lookup("bob") is None
    bob = hash_password("b", FAST)
    write_password_file(path, {"alice": hash_password("a", FAST), "bob": bob})
    assert passwords.lookup("bob") == bob  # a new file (new inode): read again
    assert len(passwords) == 2


def test_broken_update_keeps_the_users_and_reload_raises(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    alice = hash_password("a", FAST)
    write_password_file(path, {"alice": alice})
    passwords = PasswordFile(path)
    path.write_text("alice:garbage-that-is-longer\n")
    assert passwords.lookup("alice") == alice
    with pytest.raises(ConfigError):
        passwords.reload()
    assert passwords.lookup("alice") == alice
    write_password_file(path, {})
    passwords.reload()
    assert passwords.lookup("alice") is None


# -- mosquitto's hashes -------------------------------------------------------------------

MOSQUITTO_FILE = Path(__file__).parents[3] / "golden" / "passwords" / "mosquitto_passwd"


def test_a_file_written_by_mosquitto_passwd_is_read() -> None:
    """$7$ (PBKDF2-HMAC-SHA512, mosquitto 2.x) and $6$ (salted SHA-512, mosquitto 1.x)."""
    users = read_password_file(MOSQUITTO_FILE)
    assert sorted(users) == ["alice", "bob", "carol"]
    alice, bob, carol = users["alice"], users["bob"], users["carol"]
    assert isinstance(alice, MosquittoHash)
    assert isinstance(carol, MosquittoHash)
    assert (alice.kind, alice.iterations, carol.kind, carol.iterations) == ("7", 101, "6", 1)
    assert verify_password(b"wonderland", alice) is True
    assert verify_password("wonderland", alice) is True
    assert verify_password(b"wonderlan", alice) is False
    assert verify_password("bü ilder", bob) is True
    assert verify_password(b"hunter2", carol) is True
    assert verify_password(b"hunter3", carol) is False


def test_mosquitto_hashes_are_written_back_unchanged(tmp_path: Path) -> None:
    """``edgebus passwd`` on a migrated file keeps the users it does not touch."""
    users = read_password_file(MOSQUITTO_FILE)
    users["dave"] = hash_password("new", FAST)
    path = tmp_path / "passwd"
    write_password_file(path, users)
    written = path.read_text().splitlines()
    assert written[:3] == MOSQUITTO_FILE.read_text().splitlines()
    assert read_password_file(path) == users


def test_the_mosquitto_hashes_are_what_mosquitto_computes() -> None:
    """Independently of the parser: SHA-512(password + salt) and PBKDF2-HMAC-SHA512."""
    salt = bytes(range(12))
    six = f"$6${base64.b64encode(salt).decode()}$" + base64.b64encode(
        hashlib.sha512(b"pw" + salt).digest()
    ).decode()
    seven = f"$7$101${base64.b64encode(salt).decode()}$" + base64.b64encode(
        hashlib.pbkdf2_hmac("sha512", b"pw", salt, 101)
    ).decode()
    for text in (six, seven):
        stored = parse_stored_password(text)
        assert stored.encode() == text
        assert verify_password(b"pw", stored) is True


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("$6$AAAA", "expected mosquitto's"),
        ("$7$AAAA$AAAA", "expected mosquitto's"),
        ("$7$0$AAAA$" + "A" * 88, "iterations must be a number from 1"),
        ("$7$many$AAAA$" + "A" * 88, "iterations must be a number"),
        ("$6$!!!!$" + "A" * 88, "salt must be base64"),
        ("$6$$" + "A" * 88, "empty salt"),
        ("$6$AAAA$AAAA", "must be 64 bytes"),
        ("plain-text-password", "mosquitto_passwd -U"),
        ("$md5$x", "unknown hash scheme 'md5'"),
    ],
)
def test_malformed_mosquitto_hashes_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_stored_password(text)


def test_a_bad_line_of_a_mosquitto_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    lines = MOSQUITTO_FILE.read_text().splitlines()
    path.write_text("\n".join([lines[0], "eve:plaintext", lines[2], "$7$101$x$y"]) + "\n")
    with pytest.raises(ConfigError) as caught:
        read_password_file(path)
    assert caught.value.problems == [
        f"{path}:2: not a password hash (a plain-text password? `mosquitto_passwd -U` or"
        " `edgebus passwd` hashes it)",
        f"{path}:4: expected user:hash",
    ]


def test_scram_does_not_know_users_with_a_mosquitto_hash(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    users = read_password_file(MOSQUITTO_FILE)
    users["dave"] = hash_password("new", FAST)
    write_password_file(path, users)
    passwords = PasswordFile(path)
    assert passwords.lookup("alice") == users["alice"]
    assert passwords.scram_lookup("alice") is None
    assert passwords.scram_lookup("dave") == users["dave"]
