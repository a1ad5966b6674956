"""Cold starts of two trees, interleaved: ``python -m tools.bench.cold_pair OTHER_TREE``.

`make bench`'s section (e) takes three samples per handler, one pass: on this shared machine two
runs move a handler's time over the framework's floor by ten milliseconds and more. To compare two
commits, this takes the framework's floor (``floor_handler.py``) and each named API handler of this
tree and of ``OTHER_TREE`` (a clone at another commit, its own install not needed) in turn, sample
by sample, each import in a fresh interpreter with the bench's bytecode, and prints the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from tools.bench.coldstart import FRAMEWORK_FLOOR, ROOT, cold_import_env, import_in_fresh_interpreter

HANDLERS = {"RegistrationApi": "functions/registration_api/handler.py", "AdminApi": "functions/admin_api/handler.py"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("other", type=Path, help="the other tree (a clone at the commit to compare with)")
    p.add_argument("--samples", type=int, default=21)
    args = p.parse_args()
    trees = {"this tree": ROOT, str(args.other): args.other.resolve()}
    times: dict[tuple[str, str], list[float]] = {(t, fn): [] for t in trees for fn in HANDLERS}
    floor: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        envs = {}
        for i, (name, root) in enumerate(trees.items()):
            env = cold_import_env(Path(tmp) / str(i))
            env["PYTHONPATH"] = f"{root}:{root}/layers/racecap/python"
            envs[name] = env
            for rel in HANDLERS.values():  # each tree's bytecode, compiled once, unmeasured
                if "error" in (first := import_in_fresh_interpreter(root / rel, env)):
                    raise SystemExit(f"{root / rel}: {first['error']}")
        import_in_fresh_interpreter(FRAMEWORK_FLOOR, envs["this tree"])
        for _ in range(args.samples):
            floor.append(import_in_fresh_interpreter(FRAMEWORK_FLOOR, envs["this tree"])["ms"])
            for name, root in trees.items():
                for fn, rel in HANDLERS.items():
                    times[(name, fn)].append(import_in_fresh_interpreter(root / rel, envs[name])["ms"])
    base = statistics.median(floor)
    print(f"the framework's floor: median {base:.1f} ms over {args.samples} samples")
    for (name, fn), samples in times.items():
        median = statistics.median(samples)
        print(f"{name:>24}  {fn:<16} median {median:6.1f} ms, {median - base:5.1f} over the floor")


if __name__ == "__main__":
    main()
