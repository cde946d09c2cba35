"""Write docs/schemas/recipe.schema.json and docs/schemas/summary.schema.json from the code's declarations.

Run it after changing a recipe option (``audits/recipes.py``, a section's key) or the summary contract
(``audits/schema.py``):

    python scripts/write_schemas.py          # rewrite the published schemas
    python scripts/write_schemas.py --check  # exit 1 if the published files differ from the code

``tests/test_json_schemas.py`` runs the check; ``audit schema recipe|summary`` prints one.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "schemas"
log = logging.getLogger("write_schemas")


def stale(out: Path = OUT) -> list[str]:
    """Names of the published schemas that differ from what the code declares now."""
    from audits.json_schemas import SCHEMA_NAMES, schema_text

    return [n for n in SCHEMA_NAMES if not (out / f"{n}.schema.json").is_file() or (out / f"{n}.schema.json").read_text() != schema_text(n)]


def write(out: Path = OUT) -> list[Path]:
    from audits.json_schemas import SCHEMA_NAMES, schema_text

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n in SCHEMA_NAMES:
        path = out / f"{n}.schema.json"
        path.write_text(schema_text(n), encoding="utf-8")
        written.append(path)
    return written


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/schemas differs from the code")
    args = ap.parse_args()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if args.check:
        bad = stale()
        for n in bad:
            log.error("docs/schemas/%s.schema.json is out of date: run python scripts/write_schemas.py", n)
        return 1 if bad else 0
    for p in write():
        log.info("wrote %s", p.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
