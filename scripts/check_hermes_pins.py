"""Check that installing Endless into Hermes's environment moved none of Hermes's pins; print a table.

Run with the Hermes venv's python after ``pip install -e .``:
``.venv-hermes/bin/python scripts/check_hermes_pins.py [extra ...]`` (extras
installed with Hermes, default ``anthropic mcp web``).  Exit status 1 when a
package Hermes pins with ``==`` has another version installed.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys



def main(extras: list[str]) -> int:
    from packaging.requirements import Requirement  # Hermes pins packaging itself

    rows, bad = [], 0
    for text in metadata.requires("hermes-agent") or []:
        requirement = Requirement(text)
        pins = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        if not pins:
            continue
        if requirement.marker is not None and not any(
                requirement.marker.evaluate({"extra": extra}) for extra in [*extras, ""]):
            continue  # another platform, or an extra not installed
        try:
            have = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        ok = have == pins[0]
        bad += not ok
        rows.append((requirement.name, pins[0], have, "ok" if ok else "MOVED"))
    width = max((len(r[0]) for r in rows), default=4)
    print(f"{'package':<{width}}  {'hermes pins':<12}  {'installed':<12}  state")
    for name, wanted, have, state in sorted(rows):
        print(f"{name:<{width}}  {wanted:<12}  {have:<12}  {state}")
    print(f"{len(rows)} pins checked, {bad} moved (hermes-agent {metadata.version('hermes-agent')})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["anthropic", "mcp", "web"]))
