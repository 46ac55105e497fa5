"""Regenerate the exercises' answers from the committed run, then docs/solutions.md.

.venv/bin/python -m helpers.exercises --write-answers   # every answer (about 90 s on 2 cores), then the file
.venv/bin/python -m helpers.exercises --solutions       # docs/solutions.md alone, from the stored answers
"""

from __future__ import annotations

import argparse

from helpers import exercises


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and write what they ask for."""
    parser = argparse.ArgumentParser(prog="python -m helpers.exercises", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write-answers", action="store_true", help="answers.json and docs/solutions.md")
    what.add_argument("--solutions", action="store_true", help="docs/solutions.md from the stored answers")
    parser.add_argument("--only", help="with --write-answers: these keys (comma-separated); the others stay")
    args = parser.parse_args(argv)
    if args.write_answers:
        from helpers.exercises import answers

        only = args.only.split(",") if args.only else None
        print(f"wrote {answers.write(only=only)}")
    print(f"wrote {exercises.write_solutions()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
