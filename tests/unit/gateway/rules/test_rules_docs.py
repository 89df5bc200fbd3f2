"""docs/rules.md says what the engine does: the action worker's share of the loop."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

from gateway.rules.engine import CPU_SHARE

DOC = Path(__file__).resolve().parents[4] / "docs" / "rules.md"
SHARES = {"a half": Fraction(1, 2), "a fifth": Fraction(1, 5), "a tenth": Fraction(1, 10)}
WORDS = "|".join(SHARES)


def test_every_statement_of_the_worker_share_is_cpu_share() -> None:
    text = DOC.read_text()
    stated = [
        *re.findall(rf"worker takes at\s+most ({WORDS}) of the event loop's time", text),
        *re.findall(rf"\| the action worker's share of the loop \| ({WORDS})\b", text),
    ]
    assert len(stated) == 2, stated
    assert [SHARES[s] for s in stated] == [Fraction(CPU_SHARE).limit_denominator(100)] * 2
