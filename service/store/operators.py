"""Operators: named accounts with a role (``auditor`` reads everything, ``admin`` also
manages operators), an argon2 password hash for the console, API tokens stored as SHA-256
hashes (as players' are), and the audit trail of every read of hidden data."""

from __future__ import annotations

import datetime as dt
import functools
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from psycopg_pool import ConnectionPool

from .players import token_hash
from .pool import retried

AUDITOR, ADMIN = "auditor", "admin"
ROLES = (AUDITOR, ADMIN)
_HASHER = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """A hash to verify against when the name is unknown, so that a wrong name takes as
    long as a wrong password and the time tells nobody which names exist. Made on first
    use: hashing takes a third of a second, which no process should pay at start."""
    return _HASHER.hash(secrets.token_urlsafe(16))


class OperatorExists(Exception):
    pass


class OperatorRevoked(Exception):
    """The operator is revoked: no sign-in, no new token (remove and add them again)."""


#: What an operator's name may be: it shows in pages, logs and the audit trail, so nothing
#: that could pass for something else there (spaces, markup, control characters).
NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")


def check_name(name: str) -> None:
    """Refuses (ValueError) a name an operator may not have: see NAME, and the shared
    token's name, under which its reads are audited."""
    if not NAME.fullmatch(name):
        raise ValueError(
            "a name is 1 to 64 letters, digits and . _ - @ (no space), e.g. ada.lovelace"
        )
    if name.lower() == BOOTSTRAP.name:
        raise ValueError(f"{BOOTSTRAP.name!r} is the shared token's name: choose another")


@dataclass(frozen=True)
class Operator:
    operator_id: uuid.UUID | None
    name: str
    role: str
    #: Revoked: every token and session ended, and the password refused from then on.
    revoked: bool = False

    @property
    def admin(self) -> bool:
        return self.role == ADMIN


#: The holder of the shared token (DDZ_OPERATOR_TOKEN): the bootstrap admin, no row.
BOOTSTRAP = Operator(None, "bootstrap", ADMIN)


def _end_sessions(conn: Any, name: str) -> None:
    """Ends every console session of the operator ``name``."""
    conn.execute(
        "DELETE FROM console_sessions WHERE operator_id ="
        " (SELECT operator_id FROM operators WHERE name = %s)",
        (name,),
    )


class Operators:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    def add(self, name: str, role: str, password: str) -> Operator:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        check_name(name)
        operator_id, hashed = uuid.uuid4(), _HASHER.hash(password)
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "INSERT INTO operators (operator_id, name, role, password_hash)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING operator_id",
                (operator_id, name, role, hashed),
            ).fetchone(),
        )
        if row is None:
            raise OperatorExists(f"an operator named {name!r} exists already")
        return Operator(operator_id, name, role)

    def all(self) -> list[tuple[Operator, dt.datetime]]:
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT operator_id, name, role, revoked_at IS NOT NULL, created_at"
                " FROM operators ORDER BY name"
            ).fetchall(),
        )
        return [(Operator(r[0], r[1], r[2], r[3]), r[4]) for r in rows]

    def sign_in(self, name: str, password: str) -> Operator | None:
        """The operator when the password is theirs and they are not revoked; None
        otherwise (unknown name included)."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT operator_id, name, role, password_hash, revoked_at IS NOT NULL"
                " FROM operators WHERE name = %s",
                (name,),
            ).fetchone(),
        )
        try:
            # Verified even for a revoked operator: the time tells nothing either way.
            _HASHER.verify(_dummy_hash() if row is None else row[3], password)
        except (VerificationError, InvalidHashError):
            return None
        return None if row is None or row[4] else Operator(row[0], row[1], row[2])

    def issue(self, operator_id: uuid.UUID, label: str | None = None) -> str:
        """A new API token of the operator (shown once; only its hash is kept); refused
        (:class:`OperatorRevoked`) for a revoked operator."""
        token = secrets.token_urlsafe(32)
        issued = retried(
            self.pool,
            lambda conn: (
                conn.execute(
                    "INSERT INTO operator_tokens (token_id, operator_id, token_hash, label)"
                    " SELECT %s, operator_id, %s, %s FROM operators"
                    " WHERE operator_id = %s AND revoked_at IS NULL",
                    (uuid.uuid4(), token_hash(token), label, operator_id),
                ).rowcount
            ),
        )
        if not issued:
            raise OperatorRevoked("the operator is revoked: remove and add them again")
        return token

    def revoke(self, name: str) -> int:
        """Closes the operator's account: deletes every API token, ends every console
        session and refuses the password from now on; how many tokens there were."""

        def run(conn: Any) -> int:
            conn.execute(
                "UPDATE operators SET revoked_at = coalesce(revoked_at, now()) WHERE name = %s",
                (name,),
            )
            _end_sessions(conn, name)
            return int(
                conn.execute(
                    "DELETE FROM operator_tokens WHERE operator_id ="
                    " (SELECT operator_id FROM operators WHERE name = %s)",
                    (name,),
                ).rowcount
            )

        return retried(self.pool, run)

    def set_role(self, name: str, role: str) -> bool:
        """Gives the operator ``role`` (their sessions and tokens carry it from their next
        request on); False when there is no such operator."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        return bool(
            retried(
                self.pool,
                lambda conn: (
                    conn.execute(
                        "UPDATE operators SET role = %s WHERE name = %s", (role, name)
                    ).rowcount
                ),
            )
        )

    def reset_password(self, name: str, password: str) -> bool:
        """Sets the operator's password and ends their console sessions (a revoked
        operator stays revoked); False when there is no such operator."""
        hashed = _HASHER.hash(password)

        def run(conn: Any) -> int:
            _end_sessions(conn, name)
            return int(
                conn.execute(
                    "UPDATE operators SET password_hash = %s WHERE name = %s", (hashed, name)
                ).rowcount
            )

        return bool(retried(self.pool, run))

    def remove(self, name: str) -> bool:
        """Removes the operator, their tokens and their console sessions; the audit trail
        keeps their name."""
        return bool(
            retried(
                self.pool,
                lambda conn: (
                    conn.execute("DELETE FROM operators WHERE name = %s", (name,)).rowcount
                ),
            )
        )

    def by_token(self, token: str) -> Operator | None:
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT o.operator_id, o.name, o.role FROM operator_tokens t"
                " JOIN operators o USING (operator_id) WHERE t.token_hash = %s",
                (token_hash(token),),
            ).fetchone(),
        )
        return None if row is None else Operator(*row)

    def open_session(self, operator_id: uuid.UUID, seconds: int) -> str:
        """A new console session of the operator, ending ``seconds`` from now: the id the
        cookie carries (only its hash is kept). Sessions ended by time are swept here."""
        session_id = secrets.token_urlsafe(32)

        def run(conn: Any) -> None:
            conn.execute("DELETE FROM console_sessions WHERE expires_at <= now()")
            conn.execute(
                "INSERT INTO console_sessions (session_hash, operator_id, expires_at)"
                " VALUES (%s, %s, now() + make_interval(secs => %s))",
                (token_hash(session_id), operator_id, seconds),
            )

        retried(self.pool, run)
        return session_id

    def by_session(self, session_id: str) -> Operator | None:
        """The operator of a console session still open; None once it ended (signed out,
        revoked, removed or past its end)."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT o.operator_id, o.name, o.role FROM console_sessions s"
                " JOIN operators o USING (operator_id)"
                " WHERE s.session_hash = %s AND s.expires_at > now()",
                (token_hash(session_id),),
            ).fetchone(),
        )
        return None if row is None else Operator(*row)

    def end_session(self, session_id: str) -> None:
        retried(
            self.pool,
            lambda conn: conn.execute(
                "DELETE FROM console_sessions WHERE session_hash = %s",
                (token_hash(session_id),),
            ),
        )

    def audit(
        self,
        who: str,
        action: str,
        via: str,
        *,
        match_id: uuid.UUID | None = None,
        subject: str | None = None,
        address: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Writes one operator action to the audit trail: ``who`` (an operator's name, the
        name a failed sign-in tried, or ``cli:<user>``) did ``action`` (see
        :data:`ACTIONS`) ``via`` the API, the console or the CLI, from ``address`` (the
        client's, or the CLI's host), to ``match_id`` or ``subject`` (an operator, a range
        of days exported, a player), for ``reason`` (what an act on a player or the ledger
        gives)."""
        retried(
            self.pool,
            lambda conn: conn.execute(
                "INSERT INTO audit_trail (operator, action, match_id, via, subject, address,"
                " reason) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (who, action, match_id, via, subject, address, reason),
            ),
        )

    def trail(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest entries of the audit trail first."""
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                f"SELECT {', '.join(TRAIL_FIELDS)} FROM audit_trail ORDER BY audit_id DESC LIMIT %s",
                (limit,),
            ).fetchall(),
        )
        return [dict(zip(TRAIL_FIELDS, r)) for r in rows]


#: What the audit trail records: reads of hidden data (``events``, ``record``, ``stream``,
#: ``replay``), what is done to operators (``add``, ``token``, ``revoke``, ``remove``),
#: signing in and out of the console, exports, full checks of the ledger, and what is
#: done to players (``suspend``, ``ban``, ``reinstate``), to the ledger (``correct`` a
#: balance, ``void`` a hand) and to ratings (``void_rating``: a hand's), each with its
#: reason.
ACTIONS = (
    "events",
    "record",
    "stream",
    "replay",
    "add",
    "token",
    "revoke",
    "remove",
    "sign_in",
    "sign_in_failed",
    "sign_out",
    "export",
    "ledger_check",
    "set_role",
    "reset_password",
    "suspend",
    "ban",
    "reinstate",
    "correct",
    "void",
    "void_rating",
)
#: The ways in.
VIAS = ("api", "console", "cli")
TRAIL_FIELDS = ("at", "operator", "action", "match_id", "via", "subject", "address", "reason")
