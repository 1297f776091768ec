"""`python -m agent.hollow --kubeconfig K --nodes N [--driver gevent|threads]`: run N hollow nodes.

The driver is chosen before anything else is imported: gevent's patching must come before the agent's
modules take their references to `threading` and `socket` (driver.py); then runner.py runs the fleet.
"""

from __future__ import annotations

import argparse
import sys


def run() -> int:
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--driver", default=None)
    known, _ = early.parse_known_args()
    from agent.hollow.driver import DEFAULT_DRIVER, DRIVERS, DriverUnavailable, patch

    driver = known.driver or DEFAULT_DRIVER
    if driver not in DRIVERS:
        print(f"--driver: {driver!r} is not one of {', '.join(DRIVERS)}", file=sys.stderr)
        return 2
    try:
        patch(driver)
    except DriverUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    from agent.hollow.runner import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
