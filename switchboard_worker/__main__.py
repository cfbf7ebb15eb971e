"""`python -m switchboard_worker -- COMMAND`: the same as `switchboard work`."""

import sys

from switchboard_worker.command import main

if __name__ == "__main__":
    sys.exit(main(prog="switchboard-work"))
