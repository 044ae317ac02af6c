"""Admission of client connections: pending logins, session limits, failed-login backoff.

Sans-IO and clock-free: the server hands in connections (any hashable value), addresses, user
names and the time, and does the closing itself. Three stages, after PostgreSQL and PgBouncer:

1. **Pending logins** -- from accept until authenticated. They hold no session slot (so no
   number of clients that never finish logging in can lock the others out), and are bounded
   apart: ``max_pending`` in all and ``max_pending_per_address`` per client address. A new
   connection that would exceed a bound closes the *oldest* pending login (of its own address
   for the per-address bound, of any address for the overall one), so that a client arriving
   now always gets its turn; a flood only closes the flood's own older sockets. The server's
   login deadline (``login_timeout``, PostgreSQL's ``authentication_timeout``) ends the rest.

2. **Sessions** -- once authenticated, a login takes a slot (``max_connections``, counted by
   the server, across worker processes) and is checked against ``max_user_connections`` and
   ``max_address_connections`` (0 = no limit), which are counted here, in this process.

3. **Backoff** (:class:`LoginBackoff`) -- consecutive failed logins from one address delay
   the failure's answer exponentially, like PostgreSQL's ``auth_delay``, while the failing
   login stays pending and cannot be closed to make room for its own address's next one
   (:meth:`Admission.penalize`). That is what bounds the guessing rate: success is answered at
   once, so a client learns of a failure by the absence of a quick success and could otherwise
   drop the delayed login and try again; instead at most ``max_pending_per_address`` guesses
   from one address are in flight, each held for its delay (at the cap: that many per cap
   seconds), and a connection arriving while all of them are is refused.

>>> a = Admission(max_pending=2, max_pending_per_address=1)
>>> a.arrive("c1", "10.0.0.1"), a.arrive("c2", "10.0.0.1")  # c2 closes c1, its own older one
([], ['c1'])
>>> a.penalize("c2"); a.arrive("c3", "10.0.0.1") is None  # c2 is held for its failure delay
True
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)

#: Failures are consecutive while each follows the previous one within this many seconds.
FAILURE_WINDOW = 60.0
#: The delay of the first failure; each consecutive one doubles it, up to the cap.
FIRST_FAILURE_DELAY = 0.1
#: Bounds on the backoff's memory: addresses that failed recently (the least recent is
#: forgotten first), and user names counted apart per address (the rest share one count).
MAX_TRACKED_ADDRESSES = 10_000
MAX_TRACKED_USERS = 32
_OTHER_USERS = ""  # no login has an empty user name, so this count is never reset


class Admission(Generic[C]):
    """The pending logins and the session counts of one server process (see the module)."""

    def __init__(
        self,
        *,
        max_pending: int = 100,
        max_pending_per_address: int = 20,
        max_user_connections: int = 0,
        max_address_connections: int = 0,
    ) -> None:
        if max_pending < 1 or max_pending_per_address < 1:
            raise ValueError("the bounds on pending logins must be at least 1")
        self.max_pending = max_pending
        self.max_pending_per_address = max_pending_per_address
        self.max_user_connections = max_user_connections
        self.max_address_connections = max_address_connections
        self._pending: dict[C, str] = {}  # connection -> address, oldest first
        self._by_address: dict[str, dict[C, None]] = {}  # the same, per address
        self._penalized: set[C] = set()  # pending logins in their failure delay
        self._users: Counter[str] = Counter()  # sessions per user
        self._addresses: Counter[str] = Counter()  # sessions per address

    # -- pending logins ------------------------------------------------------------------

    def arrive(self, conn: C, address: str) -> list[C] | None:
        """Count a new connection as a pending login. Returns the pending logins to close to
        make room for it, or None when it must be refused instead: every pending login of its
        address is held for a failure delay."""
        closed: list[C] = []
        mine = self._by_address.get(address, {})
        if len(mine) >= self.max_pending_per_address:
            victim = next((c for c in mine if c not in self._penalized), None)
            if victim is None:
                return None
            self.leave(victim)
            closed.append(victim)
        if len(self._pending) >= self.max_pending:
            # The oldest of all, even one held for its failure delay: only one address's
            # guesses are bounded by holding them; no set of addresses may lock out the rest.
            victim = next(iter(self._pending))
            self.leave(victim)
            closed.append(victim)
        self._pending[conn] = address
        self._by_address.setdefault(address, {})[conn] = None
        return closed

    def penalize(self, conn: C) -> None:
        """``conn``'s login failed and waits out its delay: its own address's next logins no
        longer close it to make room (see the module)."""
        if conn in self._pending:
            self._penalized.add(conn)

    def leave(self, conn: C) -> None:
        """``conn`` is no longer a pending login (authenticated, closed, or evicted)."""
        address = self._pending.pop(conn, None)
        if address is None:
            return
        self._penalized.discard(conn)
        mine = self._by_address[address]
        del mine[conn]
        if not mine:
            del self._by_address[address]

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def pending_from(self, address: str) -> int:
        return len(self._by_address.get(address, ()))

    # -- sessions ------------------------------------------------------------------------

    def refusal(self, user: str, address: str) -> str | None:
        """Why a new session of ``user`` from ``address`` is refused (53300), or None."""
        if self.max_user_connections and self._users[user] >= self.max_user_connections:
            return f'too many connections for role "{user}"'  # PostgreSQL's own words
        if self.max_address_connections and (
            self._addresses[address] >= self.max_address_connections
        ):
            return f'too many connections from address "{address}"'
        return None

    def open_session(self, user: str, address: str) -> None:
        self._users[user] += 1
        self._addresses[address] += 1

    def close_session(self, user: str, address: str) -> None:
        for counts, key in ((self._users, user), (self._addresses, address)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    def sessions_of(self, user: str) -> int:
        return self._users[user]


@dataclass(slots=True)
class _Failures:
    last: float  # when the latest failure happened
    by_user: dict[str, int] = field(default_factory=dict)


class LoginBackoff:
    """Delays of failed logins per client address: ``FIRST_FAILURE_DELAY`` for the first,
    doubling with each consecutive one (each within ``FAILURE_WINDOW`` of the previous), up to
    ``cap`` seconds; ``cap`` 0 disables it.

    A successful login is never delayed and forgets the failures *of its own user name* from
    its address: a user who mistyped starts afresh, but a client that holds one account cannot
    reset the count of its guesses at another's password by logging in between them.

    >>> b = LoginBackoff(cap=0.3)
    >>> [b.failed("10.0.0.1", "u", now=t) for t in (0.0, 1.0, 2.0)]
    [0.1, 0.2, 0.3]
    >>> b.succeeded("10.0.0.1", "u"); b.failed("10.0.0.1", "u", now=3.0)
    0.1
    """

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self._addresses: OrderedDict[str, _Failures] = OrderedDict()

    def failed(self, address: str, user: str, *, now: float) -> float:
        """Record a failed login; the seconds to wait before answering it."""
        if self.cap <= 0:
            return 0.0
        rec = self._addresses.pop(address, None)
        if rec is None or now - rec.last > FAILURE_WINDOW:
            rec = _Failures(last=now)
        self._addresses[address] = rec  # the most recent last
        while len(self._addresses) > MAX_TRACKED_ADDRESSES:
            self._addresses.popitem(last=False)
        if user not in rec.by_user and len(rec.by_user) >= MAX_TRACKED_USERS:
            user = _OTHER_USERS
        rec.by_user[user] = rec.by_user.get(user, 0) + 1
        rec.last = now
        n = sum(rec.by_user.values())
        return min(self.cap, FIRST_FAILURE_DELAY * 2.0 ** min(n - 1, 32))

    def succeeded(self, address: str, user: str) -> None:
        """A login of ``user`` from ``address`` succeeded (see the class)."""
        rec = self._addresses.get(address)
        if rec is not None:
            rec.by_user.pop(user, None)
            if not rec.by_user:
                del self._addresses[address]

    def failures(self, address: str, *, now: float) -> int:
        """Consecutive failures from ``address`` still counted at ``now``."""
        rec = self._addresses.get(address)
        if rec is None or now - rec.last > FAILURE_WINDOW:
            return 0
        return sum(rec.by_user.values())
