"""The effective configuration as the API shows it: secrets masked."""

from __future__ import annotations

import json

from gateway.api.routes.admin import MASK, masked_config
from gateway.config import parse_config

TEXT = """
listeners:
  - type: tls
    bind: 127.0.0.1:8883
    tls: {certfile: c.pem, keyfile: k.pem, keyfile_password: tls-secret}
auth:
  http:
    url: https://svc:url-secret@auth.example.com:8443/check
    headers: {Authorization: "Bearer header-secret", X-Other: plain}
api:
  keys: [api-key-secret-0123]
  users: [{username: op, password: user-secret}]
"""


def test_secrets_are_masked() -> None:
    shown = masked_config(parse_config(TEXT, env={}))
    text = json.dumps(shown)
    for secret in ("tls-secret", "url-secret", "header-secret", "api-key-secret", "user-secret"):
        assert secret not in text
    assert shown["listeners"][0]["tls"]["keyfile_password"] == MASK
    assert shown["auth"]["http"]["url"] == f"https://{MASK}@auth.example.com:8443/check"
    assert shown["auth"]["http"]["headers"] == {"Authorization": MASK, "X-Other": MASK}
    assert shown["api"]["keys"] == [MASK]
    assert shown["api"]["users"] == [{"username": "op", "password": MASK}]


def test_what_is_not_secret_is_shown_as_in_a_file() -> None:
    shown = masked_config(parse_config(TEXT, env={}))
    assert shown["listeners"][0]["bind"] == "127.0.0.1:8883"
    assert shown["auth"]["http"]["timeout"] == "5s"
    assert shown["api"]["bind"] == "127.0.0.1:8081"
    url_without_user = masked_config(parse_config("auth: {http: {url: 'http://a/b'}}", env={}))
    assert url_without_user["auth"]["http"]["url"] == "http://a/b"
