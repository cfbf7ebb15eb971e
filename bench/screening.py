"""What secret screening costs a close with a large result (or an add with a large payload).

A result is checked by `board.store.inputs.json_value`: storable (no NUL, no lone surrogate),
serialised once for the 64 KiB bound, then screened (`screen_json`: every key and string, and
each named member as "key: value", joined and searched once per shape). This prints, per
payload shape and size, the microseconds of the checks before screening, of the screening,
and the screening's cost per KiB: a flat line down each shape's sizes is linear time.
The adversarial shapes repeat what makes a careless pattern rescan its input (a JWT-looking
prefix with no dots, `password=` with nothing after it, URLs with no @, key headers with no
end), each cut to the size.

    python bench/screening.py                    # 16, 32 and 64 KiB, best of 30 runs each
    python bench/screening.py --sizes 64 --runs 100
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from board.store.inputs import screen_json, storable  # noqa: E402
from board.store.vocabulary import RESULT_MAX_BYTES  # noqa: E402


def fill(unit, size: int):
    """A list of copies of unit whose JSON is just under size bytes."""
    one = len(json.dumps(unit, ensure_ascii=False)) + 2
    return [unit] * max(1, size // one - 1)


def repeated(text: str, size: int) -> dict:
    """text repeated in one string whose JSON is about size bytes."""
    return {"log": text * ((size - 16) // len(json.dumps(text, ensure_ascii=False)[1:-1].encode()))}


SHAPES = {
    # what a worker's result usually is
    "flat members": lambda n: {f"key{i}": f"value number {i}" for i in range(n // 32)},
    "records": lambda n: fill({"id": "550e8400-e29b-41d4-a716-446655440000", "ok": True, "took": 1.5,
                               "sha": "3f2a9c0d1e2b4a5f6789abcdef0123456789abcd", "url": "https://ci.example/run/7"}, n),
    "one log string": lambda n: repeated("build step 7: compiled 412 files, the token cache warmed up. ", n),
    "base64 blob": lambda n: {"image": "data:image/png;base64," + ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB" * n)[:n - 64]},
    # adversarial
    "eyJ- runs": lambda n: repeated("eyJ-", n),
    "eyJ.x. runs": lambda n: repeated("eyJhbGciOiJIUzI1NiJ9.eyJ.x.", n),
    "password= empty": lambda n: repeated("password=\n", n),
    "password: words": lambda n: repeated("password: see the vault ", n),
    "scheme:// no @": lambda n: repeated("a://b:c", n),
    "BEGIN no end": lambda n: repeated("-----BEGIN A ", n),
    "sk- short runs": lambda n: repeated("sk-abc.", n),
}


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64], help="payload sizes in KiB")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    print(f"{'shape':18} {'KiB':>5} {'checks µs':>10} {'screen µs':>10} {'µs/KiB':>7}")
    for name, make in SHAPES.items():
        for kib in args.sizes:
            value = make(min(kib * 1024, RESULT_MAX_BYTES) - 64)
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
            assert len(text.encode()) <= RESULT_MAX_BYTES, (name, len(text))

            def checks():
                storable(value, "result")
                json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")

            before = best(checks, args.runs)
            screening = best(lambda: screen_json(value, "result"), args.runs)
            size = len(text.encode()) / 1024
            print(f"{name:18} {size:5.1f} {before:10.0f} {screening:10.0f} {screening / size:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
