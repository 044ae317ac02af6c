"""Admission of client connections: pending logins, session slots, guesses at passwords.

Sans-IO and clock-free: the server hands in connections (any hashable value), addresses, user
names and the time, and does the closing itself. After PostgreSQL and PgBouncer, with defaults
that one client cannot turn into a lockout of the others (docs/configuration.md, [server]):

1. **Pending logins** -- from accept until authenticated. They hold no session slot (so no
   number of clients that never finish logging in can lock the others out), and are bounded
   apart: ``max_pending`` in all, and per client address ``max_pending_per_address`` that have
   given their user name (their start-up packet) and as many that have not yet. A login that
   would exceed a bound closes another, so that a client arriving now always gets its turn: a
   new connection the oldest of its address that has given no name yet, one that has sent
   nothing at all first (a silent one, not one whose packet waits to be read); a
   login giving its name, one of its address whose name has failed guesses in flight (see 3),
   else the oldest; a new connection over ``max_pending``, the same of any address. So a
   login refused for its name (3) closes nobody, and a flood mostly closes its own sockets.
   The server's login deadline (``login_timeout``, PostgreSQL's ``authentication_timeout``)
   ends the rest.

2. **Sessions** -- once authenticated, a login takes a slot (:func:`slot_refusal`): at most
   ``max_connections`` in all (counted by the server, across worker processes), at most
   ``max_user_connections`` per user (by default its share among the declared users, split
   at most four ways: one user, however many connections it opens, leaves half, two thirds or
   three quarters to the others), and the last ``reserved_connections`` slots (by default a
   tenth, with two users or more) only for users that hold no session yet, so that a few
   users at their share cannot keep a new one out either. ``max_address_connections`` bounds the
   sessions of one client address (0 = no limit).

3. **Guesses** (:class:`LoginBackoff`) -- a failed login is answered after a delay that grows
   with each consecutive failure of its *user name from its address* (like PostgreSQL's
   ``auth_delay``), but it leaves the pending logins as soon as its password is judged wrong:
   the delay holds no slot, so no flood of wrong passwords fills its address's slots. What
   bounds the guessing instead is the number of failures of one user name from one address
   still within their delay: at ``max_guesses`` of them (a quarter of
   ``max_pending_per_address``), a further login of that name from that address is refused at
   its start-up packet (53300) until one ends. A client learns of a failure by the absence of
   a quick success, so holding its socket would not slow it; refusing its next try does. An
   attacker on one address thus locks out at most the name it guesses at, from that address
   (whose rightful user's password it is attacking): other users behind the same address (a
   NAT, a BI server) log in as usual, and so does that user from anywhere else.

>>> a = Admission(max_pending=2, max_pending_per_address=1)
>>> a.arrive("c1", "10.0.0.1"), a.arrive("c2", "10.0.0.1")  # c2 closes c1, its own older one
([], ['c1'])
>>> slot_refusal("u", total=3, mine=2, max_connections=4, max_user=0, reserved=1)
'remaining connection slots are reserved for users without a session'
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)

#: Failures are consecutive while each follows the previous one within this many seconds.
FAILURE_WINDOW = 60.0
#: The delay of the first failure; each consecutive one doubles it, up to the cap.
FIRST_FAILURE_DELAY = 0.1
#: A bound on the backoff's memory: (address, user name) pairs that failed recently. The least
#: recent is forgotten first, but never while it has a failure in its delay (a guesser cannot
#: make the backoff forget its own guesses by failing under other names).
MAX_TRACKED_PAIRS = 100_000


def default_user_share(max_connections: int, users: int) -> int:
    """The sessions one user may hold when ``max_user_connections`` is not set: its share of
    ``max_connections`` among the ``users`` declared, split at most four ways (all of them
    with one user, half with two, a third with three, a quarter with four or more; at least
    1)."""
    return max(1, max_connections // min(4, max(1, users)))


def default_reserved(max_connections: int, users: int) -> int:
    """The slots kept for users without a session when ``reserved_connections`` is not set:
    a tenth of ``max_connections`` when two users or more are declared (none with one)."""
    return max_connections // 10 if users > 1 else 0


def default_guesses(max_pending_per_address: int) -> int:
    """Failed logins of one user name from one address that may be in their delay at once:
    a quarter of ``max_pending_per_address`` (at least 1)."""
    return max(1, max_pending_per_address // 4)


def slot_refusal(
    user: str, *, total: int, mine: int, max_connections: int, max_user: int, reserved: int
) -> str | None:
    """Why a new session of ``user`` is refused (53300), or None: ``total`` sessions are open,
    ``mine`` of them ``user``'s (module doc, 2; ``max_user`` 0 = no per-user limit)."""
    if total >= max_connections:
        return "sorry, too many clients already"  # PostgreSQL's own words
    if max_user and mine >= max_user:
        return f'too many connections for role "{user}"'  # PostgreSQL's own words
    if mine > 0 and max_connections - total <= reserved:
        return "remaining connection slots are reserved for users without a session"
    return None


class Admission(Generic[C]):
    """The pending logins and the session counts of one server process (see the module)."""

    def __init__(
        self,
        *,
        max_pending: int = 100,
        max_pending_per_address: int = 20,
        max_address_connections: int = 0,
        failure_delay: float = 5.0,
        max_guesses: int | None = None,
    ) -> None:
        if max_pending < 1 or max_pending_per_address < 1:
            raise ValueError("the bounds on pending logins must be at least 1")
        self.max_pending = max_pending
        self.max_pending_per_address = max_pending_per_address
        self.max_address_connections = max_address_connections
        guesses = default_guesses(max_pending_per_address) if max_guesses is None else max_guesses
        self.backoff = LoginBackoff(cap=failure_delay, max_guesses=guesses)
        self._pending: dict[C, str] = {}  # connection -> address, oldest first
        # per address, oldest first: the pending logins that have not given their user name
        # yet, and those that have (with the name)
        self._unnamed: dict[str, dict[C, None]] = {}
        self._named: dict[str, dict[C, str]] = {}
        self._users: Counter[str] = Counter()  # sessions per user
        self._addresses: Counter[str] = Counter()  # sessions per address

    # -- pending logins ------------------------------------------------------------------

    def arrive(
        self,
        conn: C,
        address: str,
        *,
        now: float = 0.0,
        heard: Callable[[C], bool] = lambda c: False,
    ) -> list[C]:
        """Count a new connection as a pending login. Returns the pending logins to close to
        make room for it (see the module for which; ``heard(c)``: whether ``c`` has sent
        anything yet, read or not: a login whose start-up packet waits to be read is not
        silent)."""
        closed: list[C] = []
        unnamed = self._unnamed.get(address, {})
        if len(unnamed) >= self.max_pending_per_address:
            silent = next((c for c in unnamed if not heard(c)), None)
            closed.append(silent if silent is not None else next(iter(unnamed)))
            self.leave(closed[-1])
        if len(self._pending) >= self.max_pending:
            closed.append(self._victim(self._pending, now))
            self.leave(closed[-1])
        self._pending[conn] = address
        self._unnamed.setdefault(address, {})[conn] = None
        return closed

    def _victim(self, among: Iterable[C], now: float) -> C:
        """The pending login to close: one whose user name has guesses in flight from its
        address, else the oldest (a login that gave a name nobody is guessing at goes last)."""
        oldest: C | None = None
        for c in among:
            oldest = c if oldest is None else oldest
            address = self._pending[c]
            name = self._named.get(address, {}).get(c)
            if name is not None and self.backoff.guessing(address, name, now=now):
                return c
        assert oldest is not None
        return oldest

    def claim(self, conn: C, user: str, *, now: float) -> tuple[str | None, list[C]]:
        """A pending login gave its user name (its start-up packet). Returns why it is refused
        (53300: too many failed logins of that name from its address are in their delay), or
        None and the pending logins of its address to close to make room for it."""
        address = self._pending.get(conn)
        if address is None:
            return None, []
        if self.backoff.at_bound(address, user, now=now):
            return f'too many failed logins for user "{user}" from address "{address}"', []
        self._forget(conn, address)
        named = self._named.setdefault(address, {})
        closed: list[C] = []
        if len(named) >= self.max_pending_per_address:
            closed.append(self._victim(named, now))
            self.leave(closed[-1])
        self._named.setdefault(address, {})[conn] = user
        return None, closed

    def failed(self, conn: C, address: str, user: str, *, now: float) -> float:
        """``conn``'s password was judged wrong: it stops being a pending login (its delay
        holds no slot) and counts as a guess in flight. Returns the seconds to wait before
        answering it."""
        self.leave(conn)
        return self.backoff.failed(address, user, now=now)

    def leave(self, conn: C) -> None:
        """``conn`` is no longer a pending login (authenticated, failed, closed, evicted)."""
        address = self._pending.pop(conn, None)
        if address is not None:
            self._forget(conn, address)

    def _forget(self, conn: C, address: str) -> None:
        for table in (self._unnamed, self._named):
            mine = table.get(address)
            if mine is not None and conn in mine:
                del mine[conn]
                if not mine:
                    del table[address]

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def pending_from(self, address: str) -> int:
        return len(self._unnamed.get(address, ())) + len(self._named.get(address, ()))

    # -- sessions ------------------------------------------------------------------------

    def address_refusal(self, address: str) -> str | None:
        """Why a new session from ``address`` is refused (53300), or None."""
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
class _Guesses:
    """The recent failures of one user name from one address."""

    last: float  # when the latest failure happened
    consecutive: int = 0
    until: list[float] = field(default_factory=list)  # when each one's delay ends

    def in_flight(self, now: float) -> int:
        self.until = [t for t in self.until if t > now]
        return len(self.until)


class LoginBackoff:
    """Failed logins per (client address, user name): each answered after a delay of
    ``FIRST_FAILURE_DELAY`` for the first, doubling with each consecutive one (each within
    ``FAILURE_WINDOW`` of the previous), up to ``cap`` seconds (0 disables the delay, and with
    it the bound); at most ``max_guesses`` of one pair within their delay at once (see the
    module, 3).

    A successful login is never delayed and forgets its own pair's failures: a user who
    mistyped starts afresh, but one who holds an account cannot reset the count of guesses at
    another's password by logging in between them.

    >>> b = LoginBackoff(cap=0.3, max_guesses=2)
    >>> [b.failed("10.0.0.1", "u", now=t) for t in (0.0, 0.05)]
    [0.1, 0.2]
    >>> b.at_bound("10.0.0.1", "u", now=0.09), b.at_bound("10.0.0.1", "v", now=0.09)
    (True, False)
    >>> b.at_bound("10.0.0.1", "u", now=0.11)  # the first one's delay is over
    False
    >>> b.succeeded("10.0.0.1", "u"); b.failed("10.0.0.1", "u", now=3.0)
    0.1
    """

    def __init__(self, cap: float, max_guesses: int = 5) -> None:
        self.cap = cap
        self.max_guesses = max_guesses
        self._pairs: OrderedDict[tuple[str, str], _Guesses] = OrderedDict()

    def failed(self, address: str, user: str, *, now: float) -> float:
        """Record a failed login; the seconds to wait before answering it."""
        if self.cap <= 0:
            return 0.0
        key = (address, user)
        rec = self._pairs.pop(key, None)
        if rec is None or now - rec.last > FAILURE_WINDOW:
            rec = _Guesses(last=now, until=rec.until if rec is not None else [])
        rec.consecutive += 1
        rec.last = now
        delay = min(self.cap, FIRST_FAILURE_DELAY * 2.0 ** min(rec.consecutive - 1, 32))
        rec.in_flight(now)
        rec.until.append(now + delay)
        self._pairs[key] = rec  # the most recent last
        while len(self._pairs) > MAX_TRACKED_PAIRS:
            old_key, old = next(iter(self._pairs.items()))
            if old.in_flight(now):
                break  # every pair kept is still guessing: at_bound refuses new pairs
            del self._pairs[old_key]
        return delay

    def at_bound(self, address: str, user: str, *, now: float) -> bool:
        """Whether a new login of ``user`` from ``address`` must wait: ``max_guesses`` of
        its failures are within their delay (or the backoff's memory is full of guessing
        pairs and this one is not among them)."""
        if self.cap <= 0:
            return False
        rec = self._pairs.get((address, user))
        if rec is None:
            return len(self._pairs) > MAX_TRACKED_PAIRS
        return rec.in_flight(now) >= self.max_guesses

    def guessing(self, address: str, user: str, *, now: float) -> bool:
        """Whether ``user`` has failures from ``address`` within their delay."""
        rec = self._pairs.get((address, user))
        return rec is not None and rec.in_flight(now) > 0

    def succeeded(self, address: str, user: str) -> None:
        """A login of ``user`` from ``address`` succeeded (see the class)."""
        self._pairs.pop((address, user), None)

    def failures(self, address: str, user: str, *, now: float) -> int:
        """Consecutive failures of ``user`` from ``address`` still counted at ``now``."""
        rec = self._pairs.get((address, user))
        if rec is None or now - rec.last > FAILURE_WINDOW:
            return 0
        return rec.consecutive
