"""Model repository agents (``model_repository_agents`` in a config), run when a model loads, before
any of its versions: Triton's ``checksum`` agent (triton-inference-server/checksum_repository_agent),
whose parameters map ``MD5:<file in the model directory>`` to the file's expected MD5 digest (lower-
case hex); a file that differs, is missing, or names another algorithm fails the load, in the
agent's words. Any other agent is a library tritonserver loads from its repoagent directory; this
server has none, so a model that names one fails to load, as it does on a Triton without that
library. Either failure is a poll failure, as in Triton: "failed to load 'M', failed to poll from
model repository: <reason>".

The files were checked to stay inside the model directory (``confine.check_config``) first.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHECKSUM = "checksum"


class RepoAgentError(Exception):
    """A repository agent refused the model, or is not available."""


def run_agents(config, model_dir: Path) -> None:
    """Run ``config``'s repository agents on ``model_dir`` (the load action); RepoAgentError."""
    for agent in config.model_repository_agents.agents:
        if agent.name != CHECKSUM:
            raise RepoAgentError(f"unable to find 'libtritonrepoagent_{agent.name}.so' for repo agent "
                                 f"'{agent.name}': tritonctl serve runs the '{CHECKSUM}' agent only (--engine triton "
                                 "runs tritonserver, with the agents of its repoagent directory)")
        for key, expected in agent.parameters.items():
            _check(key, expected, model_dir)


def _check(key: str, expected: str, model_dir: Path) -> None:
    algorithm, colon, relative = key.partition(":")
    if not colon:
        raise RepoAgentError(f"failed to parse key: {key}")
    if algorithm.lower() != "md5":
        raise RepoAgentError(f"Unsupported checksum algorithm: {algorithm}")
    try:
        digest = hashlib.md5((model_dir / relative).read_bytes(), usedforsecurity=False).hexdigest()
    except OSError as exc:
        raise RepoAgentError(f"failed to open text file for read {relative}: "
                             f"{exc.strerror or os.strerror(exc.errno or 0)}") from None
    if digest != expected:
        raise RepoAgentError(f"Mismatched MD5 hash for file {relative}, expect: {expected}, got: {digest}")
