"""Client authentication against the proxy's own users, sans-IO.

SCRAM-SHA-256 (RFC 5802/7677, protocol-flow "SASL Authentication") is the default and is done
by ``scramp``, not hand-rolled. MD5 and cleartext password exist only when configured; trust
only for loopback peers. Without TLS only ``SCRAM-SHA-256`` is offered, never ``-PLUS``.
As in PostgreSQL, the SCRAM ``n=`` user name is ignored (libpq sends it empty) and the
StartupMessage user is used; an unknown user runs a mock exchange and fails at the end with the
same 28P01 as a wrong password, so user names cannot be probed.

The mock must look like a real exchange (PostgreSQL's ``scram_mock_salt``): every salt, of a
real user and of an unknown one, is derived from one server secret and the user name
(:func:`scram_salt`), so that a name gets the same 16-byte salt and the same 4096 iterations on
every attempt, in every worker process and across restarts; the mock's keys are derived the
same way, so that it costs no PBKDF2 and takes the time a real user's exchange takes.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

import scramp

from proxy.errors import AuthenticationFailed, InvalidAuthorization, ProtocolViolation
from proxy.wire.messages import (
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendMessage,
    PasswordMessage,
)

SCRAM_ITERATIONS = 4096  # PostgreSQL's scram_iterations default
SCRAM_SALT_LENGTH = 16  # PostgreSQL's SCRAM_DEFAULT_SALT_LEN
_MECH = "SCRAM-SHA-256"


def _derive(secret: bytes, label: bytes, user: str, length: int = 32) -> bytes:
    """HMAC-SHA-256 of the user name under the server secret, one label per purpose (so a
    salt never equals a key); the name is NUL-terminated after the label, as it cannot hold
    NUL, so no two (label, name) pairs give the same input."""
    return hmac.new(secret, label + b"\0" + user.encode(), hashlib.sha256).digest()[:length]


def scram_salt(secret: bytes, user: str) -> bytes:
    """The SCRAM salt of ``user``, real or unknown: the same for every attempt, worker and
    restart that has the same secret, so a salt that changes gives nothing away."""
    return _derive(secret, b"lapras scram salt", user, SCRAM_SALT_LENGTH)


class AuthMethod(enum.Enum):
    SCRAM_SHA_256 = "scram-sha-256"
    MD5 = "md5"
    PASSWORD = "password"
    TRUST = "trust"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramVerifier:
    """A stored SCRAM secret (what ``pg_authid.rolpassword`` holds): no password needed."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @staticmethod
    def from_password(
        password: str, iterations: int = SCRAM_ITERATIONS, *, salt: bytes | None = None
    ) -> ScramVerifier:
        """The verifier of ``password`` (PBKDF2, once); ``salt``: None draws a random one."""
        salt, stored, server, it = scramp.ScramMechanism(_MECH).make_auth_info(
            password, iteration_count=iterations, salt=salt
        )
        return ScramVerifier(salt=salt, stored_key=stored, server_key=server, iterations=it)

    @staticmethod
    def mock(secret: bytes, user: str) -> ScramVerifier:
        """The verifier of an unknown user: its salt is the one :func:`scram_salt` gives any
        name, its keys are HMACs of the name (no password opens them, and no PBKDF2 runs per
        attempt), so its exchange has a real one's shape and time and fails only at the proof.
        """
        return ScramVerifier(
            salt=scram_salt(secret, user),
            stored_key=_derive(secret, b"lapras scram mock stored key", user),
            server_key=_derive(secret, b"lapras scram mock server key", user),
            iterations=SCRAM_ITERATIONS,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UserCredential:
    scram: ScramVerifier | None = None
    password: str | None = None  # needed only for md5 / password


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthConfig:
    """Who may log in, and how. ``secret`` derives every SCRAM salt and the mock exchange's
    keys (:func:`scram_salt`): processes that must look alike (the workers of one port, the
    server before and after a restart) must share it; the default, a random one, suits a
    single process's lifetime (tests)."""

    method: AuthMethod = AuthMethod.SCRAM_SHA_256
    users: Mapping[str, UserCredential] = field(default_factory=dict)
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    @staticmethod
    def with_passwords(
        passwords: Mapping[str, str],
        method: AuthMethod = AuthMethod.SCRAM_SHA_256,
        *,
        secret: bytes | None = None,
    ) -> AuthConfig:
        """Users from their passwords, each salted with :func:`scram_salt` under ``secret``
        (None: a random secret, see the class)."""
        secret = secrets.token_bytes(32) if secret is None else secret
        users = {
            u: UserCredential(
                scram=ScramVerifier.from_password(p, salt=scram_salt(secret, u)),
                password=p if method in (AuthMethod.MD5, AuthMethod.PASSWORD) else None,
            )
            for u, p in passwords.items()
        }
        return AuthConfig(method=method, users=users, secret=secret)


def _failed(user: str) -> AuthenticationFailed:
    return AuthenticationFailed(f'password authentication failed for user "{user}"')


class Authenticator:
    """One client's authentication exchange.

    ``start()`` gives the first request (empty list = trust: send AuthenticationOk at once);
    each PasswordMessage goes to ``step()``, which returns the next messages and whether the
    client is now authenticated. Failures raise FATAL 28P01/28000.
    """

    def __init__(self, config: AuthConfig, user: str, *, peer_is_loopback: bool) -> None:
        self._config = config
        self._user = user
        self._loopback = peer_is_loopback
        self._cred = config.users.get(user)
        self._scram: scramp.ScramServer | None = None
        self._stage = 0
        self._salt = b""

    def start(self) -> list[BackendMessage]:
        method = self._config.method
        if method is AuthMethod.TRUST:
            if not self._loopback:
                raise InvalidAuthorization(
                    f'no authentication method allows user "{self._user}" from this host',
                    hint="trust authentication is accepted only on loopback connections",
                )
            if self._cred is None:
                raise InvalidAuthorization(f'role "{self._user}" does not exist')
            return []
        if method is AuthMethod.PASSWORD:
            return [AuthenticationCleartextPassword()]
        if method is AuthMethod.MD5:
            self._salt = secrets.token_bytes(4)
            return [AuthenticationMD5Password(salt=self._salt)]
        return [AuthenticationSASL(mechanisms=(_MECH,))]

    def step(self, msg: PasswordMessage) -> tuple[list[BackendMessage], bool]:
        method = self._config.method
        if method is AuthMethod.PASSWORD:
            return [], self._check_password(msg.password())
        if method is AuthMethod.MD5:
            return [], self._check_md5(msg.password())
        if method is AuthMethod.SCRAM_SHA_256:
            return self._scram_step(msg)
        raise ProtocolViolation("unexpected password message")

    def _check_password(self, given: str) -> bool:
        cred = self._cred
        if cred is None or cred.password is None:
            raise _failed(self._user)
        if not hmac.compare_digest(given.encode(), cred.password.encode()):
            raise _failed(self._user)
        return True

    def _check_md5(self, given: str) -> bool:
        cred = self._cred
        if cred is None or cred.password is None:
            raise _failed(self._user)
        inner = hashlib.md5((cred.password + self._user).encode()).hexdigest()
        want = "md5" + hashlib.md5(inner.encode() + self._salt).hexdigest()
        if not hmac.compare_digest(given.encode(), want.encode()):
            raise _failed(self._user)
        return True

    def _auth_info(self, _username: str) -> tuple[bytes, bytes, bytes, int]:
        cred = self._cred
        v = cred.scram if cred is not None else None
        if v is None:
            # Mock verifier: the exchange runs to the end and fails like a bad password.
            v = ScramVerifier.mock(self._config.secret, self._user)
        return v.salt, v.stored_key, v.server_key, v.iterations

    def _scram_step(self, msg: PasswordMessage) -> tuple[list[BackendMessage], bool]:
        try:
            if self._stage == 0:
                mech, data = msg.sasl_initial()
                if mech != _MECH:
                    raise ProtocolViolation(
                        "client selected an invalid SASL authentication mechanism"
                    )
                if data is None:
                    raise ProtocolViolation("malformed SASL message")
                self._scram = scramp.ScramMechanism(_MECH).make_server(self._auth_info)
                first = data.decode("utf-8")
                head, sep, bare = first.partition(",,")
                if sep and bare.startswith("n=,"):
                    # libpq sends an empty user name, which scramp rejects; PostgreSQL ignores
                    # it. Parse with a placeholder, then restore the exact bare message: the
                    # client's proof is computed over it (RFC 5802 AuthMessage).
                    self._scram.set_client_first(f"{head},,n=*,{bare[3:]}")
                    self._scram.client_first_bare = bare
                else:
                    self._scram.set_client_first(first)
                self._stage = 1
                server_first = self._scram.get_server_first().encode()
                return [AuthenticationSASLContinue(data=server_first)], False
            if self._stage == 1 and self._scram is not None:
                self._stage = 2
                self._scram.set_client_final(msg.data.decode("utf-8"))
                if self._cred is None or self._cred.scram is None:
                    raise _failed(self._user)
                final = self._scram.get_server_final().encode()
                return [AuthenticationSASLFinal(data=final)], True
        except scramp.ScramException:
            raise _failed(self._user) from None
        except UnicodeDecodeError:
            raise ProtocolViolation("malformed SASL message") from None
        raise ProtocolViolation("unexpected SASL message")
