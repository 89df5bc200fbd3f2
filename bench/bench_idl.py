"""IDL code generator benchmark: codegen time for 500 types, JSON conversion rate.

``run()`` returns the result lines (``python -m bench`` prints them);
``python -m bench.bench_idl`` runs it alone. Both measurements are self-contained:
the 500-type schema set is synthesised into a temporary directory, the nested sample's
IDL is below.

- codegen: 10 IDL files with 50 types each (structs of every member kind, enums,
  unions, typedefs; each file includes the previous one and uses its types): parse and
  resolve, render Python and JSON Schema, write the files, and ``idl_codegen.load``
  the whole set in process. Best of 3.
- JSON: a nested sample (struct of structs, unions, arrays of structs, sequences,
  octets, optional members) through ``to_json``, ``from_json`` and ``dumps`` + ``loads``,
  in samples per second. Median of 5 rounds of 0.3 s.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run"]

FILES = 10
TYPES_PER_FILE = 50

NESTED_IDL = """
module bench {
  enum Gear { PARK, REVERSE, NEUTRAL, DRIVE };
  union Value switch (short) {
    case 1: double number;
    case 2: string<64> text;
    case 3: sequence<octet, 32> raw;
    default: long code;
  };
  @nested struct Vector3 { double x; double y; double z; };
  @nested struct Wheel { unsigned short index; float pressure_kpa; @optional float temp_c; };
  @nested struct Stamp { long long sec; unsigned long nanosec; };
  struct Telemetry {
    @key string<32> vin;
    Stamp stamp;
    Gear gear;
    Vector3 position;
    Vector3 velocity;
    double covariance[9];
    Wheel wheels[4];
    sequence<Value, 8> values;
    sequence<string, 8> tags;
    sequence<octet> blob;
    @optional string note;
  };
};
"""


def _synthesise(directory: Path) -> list[Path]:
    """10 files of 50 types; file i includes file i-1 and refers to its types."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for index in range(FILES):
        lines = [f'#include "schema{index - 1}.idl"'] if index else []
        lines.append(f"module set{index} {{")
        previous = f"set{index - 1}::S{TYPES_PER_FILE - 2}" if index else None
        for number in range(TYPES_PER_FILE):
            kind = number % 5
            if kind == 0:
                lines.append(f"  enum E{number} {{ A{number}, B{number}, C{number}, D{number} }};")
            elif kind == 1:
                lines.append(f"  typedef sequence<string<16>, {number + 1}> T{number};")
            elif kind == 2:
                lines.append(f"  union U{number} switch (E{number - 2}) {{ case A{number - 2}: "
                             f"long a; case B{number - 2}: string b; default: double c; }};")
            else:
                nested = f"S{number - 5} inner;" if number >= 5 and kind == 3 else ""
                outer = f"{previous} outer;" if previous and kind == 4 else ""
                lines.append(
                    f"  struct S{number} {{ @key long id; unsigned long long big; double d; "
                    f"boolean flag; string name; string<32> label; sequence<float> xs; "
                    f"octet raw[8]; long grid[2][3]; E{number - number % 5} e; "
                    f"U{number - number % 5 + 2} u; T{number - number % 5 + 1} t; "
                    f"@optional short maybe; {nested} {outer} }};")
        lines.append("};")
        path = directory / f"schema{index}.idl"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _best(action: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def _codegen() -> str:
    from idl_codegen.emit_jsonschema import emit_jsonschema
    from idl_codegen.emit_python import emit_python
    from idl_codegen.frontend import compile_idl
    from idl_codegen.generate import write_files
    from idl_codegen.loader import load

    with tempfile.TemporaryDirectory(prefix="bench_idl_") as temporary:
        root = Path(temporary)
        paths = _synthesise(root / "idl")
        parse_s, compiled = _best(lambda: compile_idl(paths))
        types = len(compiled.schema.types)
        render_s, files = _best(lambda: {**emit_python(compiled.schema),
                                         **emit_jsonschema(compiled.schema)})
        write_s = min(_timed(_writer(write_files, root / f"out{n}", files)) for n in range(3))
        load_s, _ = _best(lambda: load(paths[-1]))
    total = parse_s + render_s + write_s
    return (f"idl codegen: {types} types in {FILES} files -> {len(files)} files in "
            f"{total:.2f} s (parse+resolve {parse_s:.2f} s, render Python+JSON Schema "
            f"{render_s:.2f} s, write {write_s:.2f} s); idl_codegen.load of the set "
            f"{load_s:.2f} s")


def _writer(write: Callable[[Path, dict[str, str]], Any], out: Path, files: dict[str, str]
            ) -> Callable[[], Any]:
    return lambda: write(out, files)


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _rate(action: Callable[[], Any], rounds: int = 5, seconds: float = 0.3) -> float:
    rates: list[float] = []
    for _ in range(rounds):
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(50):
                action()
            count += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        rates.append(count / (now - start))
    return statistics.median(rates)


def _json() -> str:
    from idl_codegen.loader import load

    with tempfile.TemporaryDirectory(prefix="bench_idl_") as temporary:
        path = Path(temporary) / "nested.idl"
        path.write_text(NESTED_IDL)
        schema = load(path)
    t: Any = schema.types
    telemetry = t["bench::Telemetry"]
    value = t["bench::Value"]
    sample = telemetry(
        vin="WVWZZZ1JZXW000001",
        stamp=t["bench::Stamp"](sec=1_700_000_000, nanosec=123_456_789),
        gear=t["bench::Gear"].DRIVE,
        position=t["bench::Vector3"](x=1.5, y=-2.25, z=100.0),
        velocity=t["bench::Vector3"](x=13.9, y=0.1, z=0.0),
        covariance=[0.01 * i for i in range(9)],
        wheels=[t["bench::Wheel"](index=i, pressure_kpa=230.5, temp_c=None if i % 2 else 21.5)
                for i in range(4)],
        values=[value(number=12.5), value(text="ok"), value(raw=list(range(16))),
                value(discriminator=9, value=-1)],
        tags=["engine", "front-left", "test"],
        blob=list(range(64)),
        note="nested benchmark sample",
    )
    codec = schema.codec("bench::Telemetry")
    json_value = codec.to_json(sample)
    data = codec.dumps(sample)
    assert codec.from_json(json_value) == sample
    to_json = _rate(lambda: codec.to_json(sample))
    from_json = _rate(lambda: codec.from_json(json_value))
    both = _rate(lambda: codec.loads(codec.dumps(sample)))
    return (f"idl json: nested sample ({len(data)} bytes of JSON): to_json {to_json:,.0f}/s, "
            f"from_json {from_json:,.0f}/s, dumps+loads {both:,.0f}/s")


def run() -> list[str]:
    """Run both measurements; one human-readable line each."""
    return [_codegen(), _json()]


if __name__ == "__main__":
    for line in run():
        print(line)
