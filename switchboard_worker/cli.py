"""The worker distribution's console script, `switchboard-work` (the same as `switchboard work`)."""

import sys

from switchboard_worker.command import main as _main


def main() -> None:
    sys.exit(_main(prog="switchboard-work"))
