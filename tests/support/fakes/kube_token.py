"""A kubeconfig exec plugin, as a cloud's `get-token` command behaves: run with `--runs FILE` and
`--ttl SECONDS` (and $TOKEN_PREFIX from the kubeconfig's `env`), it prints an ExecCredential of
the apiVersion KUBERNETES_EXEC_INFO names, whose token is `<prefix>-<n>` for its n-th run (counted
in FILE) and which expires `--ttl` seconds on; with `--fail MESSAGE` it says MESSAGE on stderr and
exits 1, as a plugin whose login lapsed; with `--seen FILE` it writes there what it was given
(KUBERNETES_EXEC_INFO and its environment's names). Without KUBERNETES_EXEC_INFO it refuses, as
plugins that read it do. `install(directory)` writes it there as an executable."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

NAME = "kube-token"


def install(directory: Path) -> Path:
    """This plugin as `directory/kube-token`, run by this test's Python."""
    path = directory / NAME
    path.write_text(f"#!{sys.executable}\n" + Path(__file__).read_text())
    path.chmod(0o755)
    return path


def runs(file: Path) -> int:
    return int(file.read_text()) if file.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--ttl", type=float, default=3600)
    parser.add_argument("--fail", default="")
    parser.add_argument("--seen", type=Path)
    args = parser.parse_args()
    if args.fail:
        print(args.fail, file=sys.stderr)
        return 1
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "null")
    if not isinstance(info, dict) or info.get("spec", {}).get("interactive") is not False:
        print("KUBERNETES_EXEC_INFO asks for no non-interactive ExecCredential", file=sys.stderr)
        return 1
    if args.seen is not None:
        args.seen.write_text(json.dumps({"info": info, "environment": sorted(os.environ)}))
    run = runs(args.runs) + 1
    args.runs.write_text(str(run))
    expires = datetime.now(UTC) + timedelta(seconds=args.ttl)
    credential = {
        "apiVersion": info["apiVersion"],
        "kind": "ExecCredential",
        "status": {
            "token": f"{os.environ['TOKEN_PREFIX']}-{run}",
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    print(json.dumps(credential))
    return 0


if __name__ == "__main__":
    sys.exit(main())
