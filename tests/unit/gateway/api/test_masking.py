"""``gateway.api.masking``: which parts of a URL are secrets, and how they are masked."""

from __future__ import annotations

import pytest

from gateway.api.masking import MASK, is_secret_parameter, mask_secrets, mask_url, url_secrets

M = MASK


@pytest.mark.parametrize(
    "name",
    [
        "token", "TOKEN", "access_token", "api_key", "apikey", "ApiKey", "key", "secret",
        "client_secret", "signature", "sig", "password", "passwd", "auth", "X-Amz-Signature",
        "x-amz-credential", "X-Amz-Security-Token", "X-Goog-Signature", "sessionToken",
        "x-api-key", "t%6Fken",
    ],
)  # fmt: skip
def test_secret_parameter_names(name: str) -> None:
    assert is_secret_parameter(name) is True


@pytest.mark.parametrize("name", ["kind", "site", "keyword", "monkey", "topic", "author", ""])
def test_other_parameter_names(name: str) -> None:
    assert is_secret_parameter(name) is False


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h/x", "http://h/x"),
        ("http://h/x?", "http://h/x?"),
        ("http://h/x?kind=ops&a&b=", "http://h/x?kind=ops&a&b="),
        ("http://h/x?token=", "http://h/x?token="),
        ("http://u:p@h:8/x?kind=ops", f"http://{M}@h:8/x?kind=ops"),
        ("http://u:p@[::1]:8/x", f"http://{M}@[::1]:8/x"),
        (
            "https://h/x?kind=ops&Token=t&API_KEY=k&sig=s#top",
            f"https://h/x?kind=ops&Token={M}&API_KEY={M}&sig={M}#top",
        ),
        ("https://h/x?a=1;password=p=q&b=2", f"https://h/x?a=1;password={M}&b=2"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIA%2F20260101&X-Amz-Signature=abc&X-Amz-Security-Token=t",
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential={M}&X-Amz-Signature={M}&X-Amz-Security-Token={M}",
        ),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_url_secrets_in_every_encoding() -> None:
    secrets = url_secrets("http://user:p%40ss@h/x?kind=ops&token=a%2Bb+c")
    assert {"user", "p%40ss", "p@ss", "a%2Bb+c", "a+b c", "a+b+c", "a%2Bb%20c"} <= secrets
    assert "ops" not in secrets


def test_mask_secrets_masks_the_longest_first() -> None:
    text = "url='http://h/x?token=abc%2Bd&kind=ops' abc+d"
    masked = mask_secrets(text, url_secrets("http://h/x?token=abc%2Bd&kind=ops"))
    assert masked == f"url='http://h/x?token={M}&kind=ops' {M}"
