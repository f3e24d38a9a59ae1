"""The host's bearer tokens: one for controllers, one for observers, made on first start
(0600, in the config directory). A request's token is compared in constant time with each,
and the role is what it matched. Tokens are never logged."""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from acpctl import paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.files import atomic_write, read_regular

ROLES = (acp.CONTROLLER, acp.OBSERVER)
TOKEN_BYTES = 32


@dataclass(frozen=True)
class Tokens:
    by_role: dict[str, str]

    def role_of(self, presented: str) -> str | None:
        """The role `presented` is the token of; None when it is none of them."""
        found = None
        for role, token in self.by_role.items():
            # Every token is compared, so the time taken says nothing of which matched.
            # surrogateescape: a header that is not UTF-8 is a wrong token, not an error
            if hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), token.encode()):
                found = role
        return found


def rotate(role: str, path: Path | None = None) -> Tokens:
    """A new token for `role` in the file, the other role's kept: the tokens as they now
    are."""
    path = path or paths.host_tokens()
    tokens = dict(load_or_create(path).by_role)
    tokens[role] = secrets.token_urlsafe(TOKEN_BYTES)
    return _write(path, tokens)


def _write(path: Path, tokens: dict[str, str]) -> Tokens:
    atomic_write(path, (json.dumps(tokens, indent=2) + "\n").encode())
    return Tokens(tokens)


def load_or_create(path: Path | None = None) -> Tokens:
    """The tokens in the file, made first when it does not exist."""
    path = path or paths.host_tokens()
    data = read_regular(path)
    if data is None:
        if path.exists() or path.is_symlink():
            raise AcpctlError(f"{path} is not a regular file; remove it to make new tokens")
        tokens = {role: secrets.token_urlsafe(TOKEN_BYTES) for role in ROLES}
        paths.ensure_private_dir(path.parent)
        return _write(path, tokens)
    if path.stat().st_mode & 0o077:
        raise AcpctlError(
            f"{path} can be read by other users; `chmod 600 {path}`, or remove it for new tokens"
        )
    try:
        stored = json.loads(data)
    except ValueError as exc:
        raise AcpctlError(f"{path} is not JSON ({exc}); remove it to make new tokens") from exc
    if not isinstance(stored, dict) or not all(
        isinstance(stored.get(role), str) and len(stored[role]) >= 16 for role in ROLES
    ):
        raise AcpctlError(f"{path} lacks a token for each of {', '.join(ROLES)}; remove it")
    return Tokens({role: stored[role] for role in ROLES})
