"""``edgebus check FILE`` on real files: what the black-box tests of the command found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.check_command import QUIET, check

BRIDGE = 'bridges:\n  - name: b\n    server: "127.0.0.1:1"\n    forwards: [{local: "a/#"}]\n'


@pytest.mark.parametrize("version", ["5", '"5"', "3.1.1", '"3.1.1"'])
def test_a_choice_of_text_may_be_written_as_a_number(tmp_path: Path, version: str) -> None:
    code, lines = check(tmp_path, f"{QUIET}{BRIDGE}    protocol_version: {version}\n")
    assert code == 0, lines
    assert lines[-1].startswith("edgebus.yaml: OK")


def test_a_number_that_is_not_a_choice_is_shown_as_written_unquoted(tmp_path: Path) -> None:
    code, lines = check(tmp_path, f"{QUIET}{BRIDGE}    protocol_version: 4\n")
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 bridges[0].protocol_version: expected one of 3.1.1, 5, got 4"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "adapters:\n",
        "rules:\nwebhooks:\nbridges:\n",
        "acl:\n  rules:\n",
        "stream:\n  topics:\n",
    ],
)
def test_an_empty_list_key_means_its_default(tmp_path: Path, text: str) -> None:
    code, lines = check(tmp_path, QUIET + text)
    assert (code, lines) == (0, ["edgebus.yaml: OK"])


def test_an_empty_list_key_without_a_default_is_still_required(tmp_path: Path) -> None:
    rule = 'rules:\n  - name: r\n    sql: SELECT 1 FROM "a"\n    actions:\n'
    code, lines = check(tmp_path, QUIET + rule)
    assert code == 2
    assert lines == ["edgebus.yaml:6 rules[0].actions: expected a list, got null"]


def test_an_empty_tls_key_says_what_it_lacks(tmp_path: Path) -> None:
    text = "listeners:\n  - type: tls\n    bind: 127.0.0.1:8883\n    tls:\napi: {enabled: false}\n"
    code, lines = check(tmp_path, text)
    assert code == 2
    assert lines == [
        "edgebus.yaml:4 listeners[0].tls: missing required key 'certfile'",
        "edgebus.yaml:4 listeners[0].tls: missing required key 'keyfile'",
    ]


def test_a_webhook_cafile_is_loaded_by_check(tmp_path: Path) -> None:
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    hooks = (
        "webhooks:\n"
        "  - {name: a, url: 'https://127.0.0.1:9/x', cafile: ./nope.pem}\n"
        "  - {name: b, url: 'https://127.0.0.1:9/x', cafile: ./garbage.pem}\n"
    )
    code, lines = check(tmp_path, QUIET + hooks)
    assert code == 2
    assert lines[0] == (
        "edgebus.yaml:4 webhooks[0].cafile: cannot read 'nope.pem': No such file or directory"
    )
    assert lines[1].startswith(
        "edgebus.yaml:5 webhooks[1].cafile: 'garbage.pem' is not a PEM bundle of CA certificates"
    )
    assert len(lines) == 2


@pytest.mark.parametrize(
    ("tls", "expected"),
    [
        (
            "{cafile: ./nope.pem}",
            [
                "edgebus.yaml:8 bridges[0].tls.cafile: cannot read 'nope.pem':"
                " No such file or directory"
            ],
        ),
        (
            "{certfile: ./nope.crt, keyfile: ./nope.key}",
            [
                "edgebus.yaml:8 bridges[0].tls.certfile: cannot read 'nope.crt':"
                " No such file or directory",
                "edgebus.yaml:8 bridges[0].tls.keyfile: cannot read 'nope.key':"
                " No such file or directory",
            ],
        ),
    ],
)
def test_a_bridge_tls_file_is_loaded_by_check(
    tmp_path: Path, tls: str, expected: list[str]
) -> None:
    code, lines = check(tmp_path, f"{QUIET}{BRIDGE}    enabled: false\n    tls: {tls}\n")
    assert (code, lines) == (2, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'listeners:\n  - {type: tcp, bind: "127.0.0.1:1885"}\napi:\n  bind: "127.0.0.1:1885"\n',
            "edgebus.yaml:4 api.bind: address 127.0.0.1:1885 is already used by listeners[0]",
        ),
        (
            'listeners:\n  - {type: tcp, bind: "0.0.0.0:1885"}\napi:\n  bind: "localhost:1885"\n',
            "edgebus.yaml:4 api.bind: address localhost:1885 is already used by listeners[0]"
            " (0.0.0.0:1885)",
        ),
        (
            "listeners:\n"
            '  - {type: tcp, bind: "127.0.0.1:1887"}\n'
            '  - {type: ws, bind: "0.0.0.0:1887"}\n'
            "api: {enabled: false}\n",
            "edgebus.yaml:3 listeners[1].bind: address 0.0.0.0:1887 is already used by"
            " listeners[0] (127.0.0.1:1887)",
        ),
    ],
)
def test_overlapping_addresses_are_reported(tmp_path: Path, text: str, expected: str) -> None:
    code, lines = check(tmp_path, text)
    assert (code, lines) == (2, [expected])


def test_the_api_on_a_listener_is_reported_with_two_listeners_on_one_address(
    tmp_path: Path,
) -> None:
    """Every problem in one run: the API's collision is checked on the listeners as
    written when they collide with each other (before: only on the next run)."""
    text = (
        "listeners:\n"
        '  - {type: tcp, bind: "127.0.0.1:1887"}\n'
        '  - {type: ws, bind: "0.0.0.0:1887"}\n'
        'api: {bind: "127.0.0.1:1887"}\n'
    )
    code, lines = check(tmp_path, text)
    assert (code, lines) == (
        2,
        [
            "edgebus.yaml:3 listeners[1].bind: address 0.0.0.0:1887 is already used by"
            " listeners[0] (127.0.0.1:1887)",
            "edgebus.yaml:4 api.bind: address 127.0.0.1:1887 is already used by listeners[0]",
            "edgebus.yaml:4 api.bind: address 127.0.0.1:1887 is already used by listeners[1]"
            " (0.0.0.0:1887)",
        ],
    )


@pytest.mark.parametrize(
    "binds",
    [
        ("127.0.0.1:1887", "127.0.0.2:1887"),  # two addresses
        ("0.0.0.0:1887", "[::]:1887"),  # IPv6 sockets are IPv6-only
        ("127.0.0.1:0", "0.0.0.0:0"),  # the system picks two ports
    ],
)
def test_addresses_that_can_be_bound_together_are_not(
    tmp_path: Path, binds: tuple[str, str]
) -> None:
    text = (
        f'listeners:\n  - {{type: tcp, bind: "{binds[0]}"}}\n'
        f'  - {{type: ws, bind: "{binds[1]}"}}\napi: {{bind: "127.0.0.1:0"}}\n'
    )
    code, lines = check(tmp_path, text)
    assert (code, lines) == (0, ["edgebus.yaml: OK"])


def test_a_check_between_keys_reports_with_the_problems_of_other_keys(tmp_path: Path) -> None:
    text = (
        "listeners:\n"
        "  - type: tls\n"
        "    bind: 127.0.0.1:8883\n"
        "    tls:\n"
        "      certfile: c.pem\n"
        "      keyfile: k.pem\n"
        "      verify_peer: true\n"
        '      min_version: "1.1"\n'
        "  - type: tls\n"
        "    bind: nowhere\n"
        "api: {enabled: false}\n"
    )
    code, lines = check(tmp_path, text)
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 listeners[0].tls.verify_peer: needs 'cafile' to verify client certificates",
        "edgebus.yaml:8 listeners[0].tls.min_version: expected one of 1.2, 1.3, got '1.1'",
        "edgebus.yaml:9 listeners[1]: missing required key 'tls' (a tls listener needs one)",
        "edgebus.yaml:10 listeners[1].bind: expected 'host:port' like 127.0.0.1:1883 or"
        " [::1]:1883, got 'nowhere'",
    ]


def test_tls_on_a_tcp_listener_is_reported_before_its_files(tmp_path: Path) -> None:
    text = (
        "listeners:\n"
        "  - type: tcp\n"
        "    bind: 127.0.0.1:8883\n"
        "    tls: {certfile: nope.pem, keyfile: k.pem}\n"
        "api: {enabled: false}\n"
    )
    code, lines = check(tmp_path, text)
    assert (code, lines) == (
        2,
        ["edgebus.yaml:4 listeners[0].tls: not allowed on a tcp listener (did you mean type tls?)"],
    )


@pytest.mark.parametrize(
    ("section", "name"),
    [
        ("webhooks:\n  - {name: NAME, url: 'http://x'}\n", "'my hook'"),
        ("rules:\n  - {name: NAME, sql: 'SELECT 1 FROM \"a\"', actions: [{type: log}]}\n", "''"),
        (BRIDGE.replace("name: b", "name: NAME"), "'-b'"),
        ("adapters:\n  - {type: loopback, name: NAME}\n", "'a/b'"),
    ],
)
def test_names_are_refused_in_words(tmp_path: Path, section: str, name: str) -> None:
    code, lines = check(tmp_path, QUIET + section.replace("NAME", name))
    assert code == 2
    assert lines[0].endswith(
        "].name: expected 1 to 64 letters, digits, '_', '.' or '-' (starting with a letter"
        f" or digit), got {name}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "stream:\n  enabled: true\n  segment_bytes: 0\n  max_bytes: 0\n",
            [
                "edgebus.yaml:5 stream.segment_bytes: expected a size of at least 4KiB, got 0",
                "edgebus.yaml:6 stream.max_bytes: expected a size of at least 4KiB, got 0",
            ],
        ),
        (
            "webhooks:\n  - {name: w, url: 'http://x', timeout: 0s, retry_backoff: 0}\n",
            [
                "edgebus.yaml:4 webhooks[0].timeout: expected a duration longer than 0s, got '0s'",
                "edgebus.yaml:4 webhooks[0].retry_backoff: expected a duration longer than 0s,"
                " got 0",
            ],
        ),
        (
            "stream:\n  enabled: true\n  max_bytes: 1MB\n  segment_bytes: 4MB\n",
            [
                "edgebus.yaml:5 stream.max_bytes: max_bytes (1MB) must be at least"
                " segment_bytes (4MB)"
            ],
        ),
        (
            'listeners: [{type: tcp, bind: "999.1.1.1:1883"}]\napi: {enabled: false}\n',
            [
                "edgebus.yaml:1 listeners[0].bind: expected a host name or IP address,"
                " got '999.1.1.1:1883'"
            ],
        ),
    ],
)
def test_values_that_make_no_sense_are_refused(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    code, lines = check(tmp_path, text if text.startswith("listeners") else QUIET + text)
    assert (code, lines) == (2, expected)


def test_no_bound_is_given_beside_a_value_type() -> None:
    """pydantic ignores `Field(ge=...)` on a field whose type is a value spec (its own
    validator): such a bound would be documented nowhere and checked never."""
    import annotated_types

    from gateway.config.introspect import field_annotation, nullable_members, strip_annotated
    from gateway.config.models import GatewayConfig
    from gateway.config.models.adapters import adapter_config_classes
    from gateway.config.models.base import ConfigModel

    classes: set[type] = set()
    stack = [ConfigModel]
    while stack:
        cls = stack.pop()
        classes.add(cls)
        stack.extend(cls.__subclasses__())
    assert GatewayConfig in classes and set(adapter_config_classes()) <= classes
    bounds = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)

    def metadata(field: object) -> list[object]:
        bare, found = strip_annotated(field_annotation(field))  # type: ignore[arg-type]
        for member in nullable_members(bare)[0]:
            found = [*found, *strip_annotated(member)[1]]
        return found

    wrong = [
        f"{cls.__name__}.{name}"
        for cls in classes
        for name, field in cls.model_fields.items()
        if any(hasattr(item, "doc_type") for item in metadata(field))
        and any(isinstance(item, bounds) for item in metadata(field))
    ]
    assert wrong == []
