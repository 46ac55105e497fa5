"""`python -m helpers.sandbox [--brief]`: what this machine gives the sandbox."""

from __future__ import annotations

import json
import sys

from .bwrap import boundary
from .runner import report


def main(argv: list[str]) -> int:
    """`python -m helpers.sandbox [--brief]`: what this machine gives the sandbox (exit 1 if incomplete)."""
    if argv == ["--brief"]:
        b = boundary()
        if not b.complete:
            print(f"sandbox: WARNING: {b.message()}")
            return 1
        how = "through a user namespace" if b.userns else "as root"
        print(f"sandbox: operating-system boundary ready (bubblewrap {how}, cgroup v{b.cgroups.version})")
        return 0
    if argv:
        print("usage: python -m helpers.sandbox [--brief]", file=sys.stderr)
        return 2
    status = report()
    print(json.dumps(status, indent=1))
    if not status["complete"]:
        print(boundary().message(), file=sys.stderr)
    return 0 if status["complete"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
