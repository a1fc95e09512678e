"""The attacks of ``scripts/attack.py`` (issue #17 items 5-7), each as a test.

Each one builds its own memory root and runs the real thing (the command in
its own process, the server on a loopback port, raw sockets).  The attacks
made by a second local user fork a child that drops to uid 65534: the tests
run as root in CI; run as anyone else, those few are skipped (the OS lets no
other user become a second one).
"""

from __future__ import annotations

import os
import sys

import pytest

from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import attack  # noqa: E402


@pytest.mark.parametrize("case", attack.ATTACKS, ids=[a.run.__name__ for a in attack.ATTACKS])
def test_attack_holds(case: attack.Attack) -> None:
    if case.second_user and os.geteuid() != 0:
        pytest.skip("acting as a second local user needs root")
    outcome, detail = attack.run(case)
    assert outcome == "held", f"{case.name}: {detail}"


def test_every_attack_has_an_expected_outcome() -> None:
    assert len({a.run.__name__ for a in attack.ATTACKS}) == len(attack.ATTACKS) >= 17
    assert all(a.expected and a.name for a in attack.ATTACKS)
