"""The rewriter's work for DP statements, in worker processes no statement can monopolise.

Classifying a new statement's text, binding a prepared statement's parameters and making the
rows of a big answer are pure Python over public values (the statement, the declared domains,
released noisy values): CPU-bound work that, run in the serving process, holds its one
interpreter. It runs here instead, in two *lanes* of worker processes of this serving process
(forked from one fork server that imported the rewriter once), each lane ``workers`` processes:

- the **quick lane** takes every piece of work first, under a small budget of predicted work
  (:data:`QUICK_UNITS`, about 50 ms; :mod:`rewriter.cost`) and a short wall-clock limit
  (:data:`QUICK_SECONDS`). Work predicted above the budget stops before it starts
  (``WorkLimitError`` with ``escalate``), work that overruns the wall-clock limit is stopped
  (its process killed and replaced), and either is run again in the heavy lane. So a job of
  the quick lane takes tens of milliseconds at most, and a new everyday statement of any
  session waits at most for such jobs (one per process of the lane, per user ahead of it);
- the **heavy lane** takes what the quick lane handed over, and what is predicted big before
  it is sent (a long text, an answer of many rows), at a lower CPU priority (nice
  :data:`HEAVY_NICE`: the serving process, the quick lane and PostgreSQL come first on a busy
  machine), under the full limits of ``[server]``:

  * ``dp_statement_timeout``: a piece of work predicted above it is refused at once (54000,
    :mod:`rewriter.cost`); one still running when it passes is stopped (its process killed
    and replaced) and refused with 57014 and a hint;
  * ``dp_statement_memory``: the address space a process may add while working on one
    piece (``RLIMIT_AS`` above what it holds when it starts); beyond it the work fails with
    53200 (out of memory) and the process is replaced.

In each lane the queued work is taken user by user in turn (round robin over the users
waiting, first come first served within a user), so one user sending many big statements
delays another user's by at most one piece of work per process.

What crosses to a worker is small frozen values, pickled: the SQL text, a statement and its
parameters, a plan and its noisy answers. Objects of the declaration (tables, attributes) are
sent by name and found again in the other process's copy (:class:`_Codec`), so a statement
coming back refers to the serving process's own schema. The engine's state, the charges and
the ledger stay in the serving process (ARCHITECTURE.md §5: the state machine owns its
state): nothing a worker does spends budget or draws noise, and a worker never sees the data.

Privacy. The work and its duration depend only on public values: the statement, the
declaration, and (for the rows of an answer) the released noisy values; whether it times out
depends on them and on the machine's load, never on the data. The order of the steps of an
answer keeps charge-before-release: binding runs (and may be stopped) before the engine is
asked, so a statement stopped there spends nothing; the rows are made after the charge, and a
statement stopped there has spent its charge and its answer is stored (a repeat returns it at
no cost): the router's 57014 says so (:mod:`proxy.dp_router`, docs/admin.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import io
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import signal
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar

import rewriter
from dp.errors import InternalError, LaprasError
from proxy.exceptions import QueryCanceled
from proxy.wire.heap import trim_heap
from rewriter import DPStatement, Plan, Refused, Statement, cost
from rewriter.schema import Schema

log = logging.getLogger("lapras.workers")

_T = TypeVar("_T")

#: The quick lane's budget of predicted work (rewriter.cost units: about 50 ms).
QUICK_UNITS = 100_000
#: The quick lane's wall-clock limit (seconds): work still running then goes to the heavy lane.
QUICK_SECONDS = 0.5
#: The heavy lane's processes run at this niceness (lower CPU priority).
HEAVY_NICE = 10
#: A piece of work is stopped when its process has used the lane's time limit in CPU time,
#: or after this many times the limit in wall-clock time, whichever comes first.
WALL_FACTOR = 5
_TICKS = os.sysconf("SC_CLK_TCK")
#: Statements a worker keeps for their next binding (by text), and their characters in all.
_STATEMENTS, _STATEMENT_CHARS = 256, 16 << 20
#: A DP statement of more characters than this goes back to the serving process slim
#: (:func:`classify_text`): it is bound in the worker processes only.
SLIM_CHARS = 4096
#: Modules the fork server imports once, so that a new worker starts in milliseconds.
_PRELOAD = ["proxy.dp_router"]
SETTING = "[server] dp_statement_timeout"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerLimits:
    """``[server] dp_workers``, ``dp_statement_timeout``, ``dp_statement_memory``."""

    KEYS: ClassVar[tuple[str, ...]] = ("dp_workers", "dp_statement_timeout", "dp_statement_memory")

    workers: int = 2  # processes per lane
    timeout: float = 10.0  # seconds of one piece of work; 0 = no limit
    memory_mb: int = 1024  # MB of address space one piece of work may add; 0 = no limit

    def summary(self) -> str:
        """One line for ``lapras config check``."""
        time_ = f"{self.timeout:g} s of CPU" if self.timeout else "no time limit (not advised)"
        memory = f"{self.memory_mb} MB" if self.memory_mb else "no memory limit (not advised)"
        return (
            f"{self.workers} quick + {self.workers} heavy worker processes per serving process; "
            f"each piece of work at most {time_}, {memory}"
        )

    @property
    def units(self) -> float | None:
        """The budget of predicted work of one piece of work (None: no limit)."""
        return self.timeout * cost.UNITS_PER_SECOND if self.timeout else None


def parse_limits(
    get: Callable[[str, Any, Any], Any], error: Callable[[str, str], Exception]
) -> WorkerLimits:
    """The ``[server]`` keys of :class:`WorkerLimits`, read with ``get(key, type, default)``
    and checked (``error(key, problem)``: the configuration's error naming the key)."""
    d = WorkerLimits()
    workers = get("dp_workers", int, d.workers)
    if not 1 <= workers <= 64:
        raise error("dp_workers", "must be between 1 and 64 (worker processes in each lane)")
    timeout = float(get("dp_statement_timeout", (int, float), d.timeout))
    if timeout != 0 and not 0.1 <= timeout <= 86400:
        raise error(
            "dp_statement_timeout",
            "must be between 0.1 and 86400 seconds, or 0 for no limit (not advised)",
        )
    memory = get("dp_statement_memory", int, d.memory_mb)
    if memory != 0 and not 256 <= memory <= 1 << 20:
        raise error(
            "dp_statement_memory",
            "must be between 256 and 1048576 MB, or 0 for no limit (not advised)",
        )
    return WorkerLimits(workers=workers, timeout=timeout, memory_mb=memory)


class StatementTimeout(QueryCanceled):
    """57014: a DP statement's rewriter work ran past ``[server] dp_statement_timeout``."""

    def __init__(self, limit: float) -> None:
        super().__init__(
            "canceling statement due to statement timeout",
            detail=f"the statement's work (reading it, binding it or making its rows) took "
            f"more CPU time than {SETTING} ({limit:g} s) allows",
            hint="simplify the statement (fewer columns in one expression, fewer groups, a "
            "shorter text), or retry when the proxy is less busy; an administrator may raise "
            f"{SETTING}",
        )
        self.limit = limit


class WorkerOutOfMemory(LaprasError):
    """53200 out_of_memory: a DP statement's rewriter work needed more memory than
    ``[server] dp_statement_memory`` allows."""

    sqlstate = "53200"

    def __init__(self, limit_mb: int) -> None:
        super().__init__(
            "out of memory",
            detail=f"the statement's work needed more memory than [server] "
            f"dp_statement_memory ({limit_mb} MB) allows",
            hint="simplify the statement (fewer columns in one expression, fewer groups, a "
            "shorter text); an administrator may raise [server] dp_statement_memory",
        )


class Lane(Enum):
    QUICK = "quick"
    HEAVY = "heavy"


# --- what crosses between the processes ---------------------------------------------------


class _Codec:
    """Pickling with the declaration's objects by name: a table or an attribute of the
    schema is written as its name and read back as the receiving process's own object."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.names: dict[int, tuple[str, ...]] = {id(schema): ("schema",)}
        self.objects: dict[tuple[str, ...], object] = {("schema",): schema}
        for t in schema.tables.values():
            self._name(t, ("table", t.name))
            for a in t.attributes.values():
                self._name(a, ("attribute", t.name, a.name))

    def _name(self, obj: object, key: tuple[str, ...]) -> None:
        self.names[id(obj)] = key
        self.objects[key] = obj

    def dumps(self, obj: object) -> bytes:
        buf = io.BytesIO()
        _Pickler(buf, self.names).dump(obj)
        return buf.getvalue()

    def loads(self, data: bytes) -> Any:
        return _Unpickler(io.BytesIO(data), self.objects).load()


class _Pickler(pickle.Pickler):
    def __init__(self, buf: io.BytesIO, names: dict[int, tuple[str, ...]]) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = names

    def persistent_id(self, obj: object) -> tuple[str, ...] | None:
        return self.names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, buf: io.BytesIO, objects: dict[tuple[str, ...], object]) -> None:
        super().__init__(buf)
        self.objects = objects

    def persistent_load(self, pid: Any) -> object:
        return self.objects[tuple(pid)]


@dataclass(frozen=True, slots=True)
class _Failed:
    """A worker's reply when the work raised: the error (a LaprasError), or None for a bug
    (logged in the worker), and whether the worker ran out of memory."""

    error: LaprasError | None
    out_of_memory: bool = False


# --- the worker process -------------------------------------------------------------------


def _serve(
    conn: multiprocessing.connection.Connection,
    schema_data: bytes,
    units: float | None,
    full: float | None,
    memory_mb: int,
    nice: int,
) -> None:
    """A worker process: run each piece of work it is sent, under the lane's limits, until
    the serving process closes its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the server
    if nice:
        with contextlib.suppress(OSError):
            os.nice(nice)
    codec = _Codec(pickle.loads(schema_data))
    ceiling = _limit_memory(memory_mb) if memory_mb else None
    # What the fork server imported stays for the process's life: out of the collector's
    # reach. During a piece of work the collector is paused (while a big statement is parsed
    # its tokens and nodes are most of the live objects, and each full collection would walk
    # them all: a 1 MiB IN list took 19 s instead of 5); the rewriter frees its trees by
    # reference counting, and a collection after a big piece of work takes what is left.
    gc.collect()
    gc.freeze()
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        started, cpu = time.monotonic(), time.process_time()
        out_of_memory = False
        try:
            fn, args = codec.loads(data)
            gc.disable()
            try:
                if units is None:
                    reply: object = fn(*args)
                else:
                    with cost.limited(units, setting=SETTING, full=full):
                        reply = fn(*args)
            finally:
                gc.enable()
        except MemoryError:
            out_of_memory = True
            reply = _Failed(None, out_of_memory=True)
        except LaprasError as e:
            e.__traceback__ = e.__context__ = e.__cause__ = None
            reply = _Failed(e)
        except Exception:
            log.exception("a worker's work failed")
            reply = _Failed(None)
        if ceiling is not None and not out_of_memory and _peak() > ceiling - (16 << 20):
            # the address space reached its limit: an allocation failed somewhere, even if
            # what failed caught it and went on (the work's result is not to be trusted)
            out_of_memory, reply = True, _Failed(None, out_of_memory=True)
        cpu = time.process_time() - cpu
        try:
            out = codec.dumps((cpu, reply))
        except MemoryError:
            out_of_memory, out = True, codec.dumps((cpu, _Failed(None, out_of_memory=True)))
        except Exception:
            log.exception("a worker's reply could not be pickled")
            out = codec.dumps((cpu, _Failed(None)))
        del reply
        try:
            conn.send_bytes(out)
        except (EOFError, OSError):
            return
        if out_of_memory:
            return  # a fresh process replaces this one
        if len(data) > 1 << 20 or time.monotonic() - started > 0.5:
            gc.collect()
            trim_heap()


def _status(field: str) -> int:
    """A size of this process's ``/proc/self/status`` (bytes)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _peak() -> int:
    return _status("VmPeak")


def _limit_memory(memory_mb: int) -> int | None:
    """Let this process's address space grow by ``memory_mb`` at most; the limit (bytes),
    None where it cannot be set."""
    limit = _status("VmSize") + memory_mb * (1 << 20)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    except (ValueError, OSError):
        return None
    return limit


# --- the serving process's side -----------------------------------------------------------


class _Worker:
    """One worker process and the serving process's end of its pipe."""

    def __init__(self, ctx: Any, lane: _Lane) -> None:
        ours, theirs = ctx.Pipe()
        self.conn: multiprocessing.connection.Connection = ours
        self.process = ctx.Process(
            target=_serve,
            args=(theirs, lane.pool.schema_data, *lane.budget, lane.pool.limits.memory_mb,
                  lane.nice),
            name=f"lapras-dp-{lane.kind.value}",
            daemon=True,
        )  # fmt: skip
        self.process.start()
        theirs.close()

    def roundtrip(self, codec: _Codec, job: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
        """Send a piece of work and wait for its reply (in a thread of the serving
        process); EOFError when the process ended meanwhile (killed)."""
        self.conn.send_bytes(codec.dumps(job))
        return codec.loads(self.conn.recv_bytes())

    def cpu(self) -> float:
        """The process's CPU time so far (seconds; user and system), 0 once it ended."""
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _TICKS

    def kill(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.process.kill()

    def close(self) -> None:
        self.kill()
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(ValueError, AssertionError):
            self.process.join(timeout=0)
        with contextlib.suppress(ValueError, AttributeError):
            self.process.close()


@dataclass(slots=True, eq=False)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    user: str
    outcome: asyncio.Future[Any]
    worker: _Worker | None = None


@dataclass(slots=True, eq=False)
class _Lane:
    pool: DPWorkers
    kind: Lane
    nice: int
    seconds: float | None  # the wall-clock limit of one piece of work
    budget: tuple[float | None, float | None]  # (units, full) of rewriter.cost.limited
    idle: list[_Worker] = field(default_factory=list)
    busy: set[_Worker] = field(default_factory=set)
    waiting: OrderedDict[str, deque[_Job]] = field(default_factory=OrderedDict)
    starting: int = 0

    def size(self) -> int:
        return len(self.idle) + len(self.busy) + self.starting


class _Escalate(Exception):
    """The quick lane gives a piece of work to the heavy lane."""


class DPWorkers:
    """The two lanes of worker processes of one serving process (see the module doc)."""

    QUICK_SECONDS: ClassVar[float] = QUICK_SECONDS

    def __init__(self, schema: Schema, limits: WorkerLimits | None = None) -> None:
        self.schema = schema
        self.limits = limits or WorkerLimits()
        self.schema_data = pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL)
        self.codec = _Codec(schema)
        full = self.limits.units
        self.quick = _Lane(
            self, Lane.QUICK, 0, QUICK_SECONDS, (QUICK_UNITS, full if full else float("inf"))
        )
        self.full_units = full  # the full limit of predicted work (None: no limit)
        self.heavy = _Lane(self, Lane.HEAVY, HEAVY_NICE, self.limits.timeout or None, (full, full))
        self._threads: ThreadPoolExecutor | None = None
        self._ctx: Any = None
        self._closed = False
        #: pieces of work each lane finished (answered or refused by the work itself)
        self.finished = {Lane.QUICK: 0, Lane.HEAVY: 0}

    def check_rows(self, groups: int, columns: int) -> None:
        """Refuse (54000) an answer whose rows are predicted above the full limit: before
        the engine is asked, so never after a charge."""
        if self.full_units is not None:
            with cost.limited(self.full_units, setting=SETTING):
                cost.spend(
                    cost.row_units(groups, columns),
                    f"the answer has {groups:,} rows",
                    advice="group by fewer columns, or restrict the groups with WHERE",
                )

    # -- life cycle

    async def start(self) -> None:
        """Start every worker process (a statement would otherwise wait for the first)."""
        for lane in (self.quick, self.heavy):
            self._grow(lane)
        while not self._closed and (self.quick.starting or self.heavy.starting):
            await asyncio.sleep(0.01)

    def close(self) -> None:
        """Stop every worker process; work under way or queued is refused (57P01)."""
        self._closed = True
        for lane in (self.quick, self.heavy):
            for w in (*lane.idle, *lane.busy):
                w.close()
            lane.idle.clear()
            lane.busy.clear()
            for jobs in lane.waiting.values():
                for job in jobs:
                    if not job.outcome.done():
                        job.outcome.set_exception(_shutting_down())
            lane.waiting.clear()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _context(self) -> Any:
        if self._ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
            self._ctx = ctx
        return self._ctx

    def _executor(self) -> ThreadPoolExecutor:
        if self._threads is None:
            # one thread per worker process waits for its reply, one more starts processes
            self._threads = ThreadPoolExecutor(
                max_workers=4 * self.limits.workers + 1, thread_name_prefix="lapras-dp-workers"
            )
        return self._threads

    def _grow(self, lane: _Lane) -> None:
        """Start processes for ``lane`` up to its size (each in a thread: the first start of
        the fork server imports the rewriter, a later one takes milliseconds)."""
        while not self._closed and lane.size() < self.limits.workers:
            lane.starting += 1
            asyncio.get_running_loop().create_task(self._spawn(lane))

    async def _spawn(self, lane: _Lane) -> None:
        try:
            worker = await asyncio.get_running_loop().run_in_executor(
                self._executor(), _Worker, self._context(), lane
            )
        except Exception:
            log.exception("could not start a DP worker process")
            lane.starting -= 1
            if not lane.idle and not lane.busy and not lane.starting:
                for jobs in lane.waiting.values():  # nothing would ever take them
                    for job in jobs:
                        if not job.outcome.done():
                            job.outcome.set_exception(_internal())
                lane.waiting.clear()
            return
        lane.starting -= 1
        if self._closed:
            worker.close()
            return
        lane.idle.append(worker)
        self._dispatch(lane)

    # -- work

    async def run(self, fn: Callable[..., _T], *args: Any, user: str, units: float = 0.0) -> _T:
        """``fn(*args)`` in a worker process (``fn`` a module-level function, ``args``
        picklable), for ``user``; ``units``: its predicted work when known
        (rewriter.cost), which sends it to the heavy lane at once above :data:`QUICK_UNITS`.
        Raises what ``fn`` raised (a LaprasError), :class:`StatementTimeout` (57014),
        :class:`WorkerOutOfMemory` (53200), or XX000 for a bug."""
        if self._closed:
            raise _shutting_down()
        if units <= QUICK_UNITS:
            try:
                return await self._run(self.quick, fn, args, user)  # type: ignore[no-any-return]
            except _Escalate:
                pass
        return await self._run(self.heavy, fn, args, user)  # type: ignore[no-any-return]

    async def _run(
        self, lane: _Lane, fn: Callable[..., Any], args: tuple[Any, ...], user: str
    ) -> Any:
        loop = asyncio.get_running_loop()
        job = _Job(fn, args, user, loop.create_future())
        lane.waiting.setdefault(user, deque()).append(job)
        self._grow(lane)
        self._dispatch(lane)
        try:
            return await job.outcome
        except asyncio.CancelledError:
            if job.worker is None:
                queue = lane.waiting.get(user)
                if queue is not None and job in queue:
                    queue.remove(job)
                    if not queue:
                        del lane.waiting[user]
            elif lane is self.heavy:
                job.worker.kill()  # nobody waits for it: free the process
            raise

    def _dispatch(self, lane: _Lane) -> None:
        """Give queued work to idle processes, user by user in turn."""
        while lane.idle and lane.waiting:
            user, queue = next(iter(lane.waiting.items()))
            job = queue.popleft()
            if queue:
                lane.waiting.move_to_end(user)
            else:
                del lane.waiting[user]
            if job.outcome.done():
                continue
            worker = lane.idle.pop()
            lane.busy.add(worker)
            job.worker = worker
            asyncio.get_running_loop().create_task(self._execute(lane, worker, job))

    @staticmethod
    async def _within(lane: _Lane, worker: _Worker, reply: asyncio.Future[Any]) -> bool:
        """Wait for ``reply`` while the work stays within the lane's time limit: the worker
        process's CPU time (a busy machine slows the work down without stopping it), and a
        wall-clock bound of :data:`WALL_FACTOR` times the limit (a process that gets no CPU
        at all). False when the limit passed first."""
        limit = lane.seconds
        if limit is None:
            await asyncio.wait({reply})
            return True
        loop = asyncio.get_running_loop()
        started, cpu0 = loop.time(), worker.cpu()
        wait = limit
        while True:
            done, _ = await asyncio.wait({reply}, timeout=wait)
            if done:
                return True
            used = worker.cpu() - cpu0
            if used >= limit or loop.time() - started >= WALL_FACTOR * limit:
                return False
            wait = max(limit - used, 0.01)

    async def _execute(self, lane: _Lane, worker: _Worker, job: _Job) -> None:
        loop = asyncio.get_running_loop()
        reply = loop.run_in_executor(
            self._executor(), worker.roundtrip, self.codec, (job.fn, job.args)
        )
        try:
            timed_out = killed = not await self._within(lane, worker, reply)
            if killed:
                worker.kill()
            try:
                cpu, outcome = await reply
                error: BaseException | None = None
                # the work's own CPU time, measured where it ran: what finished just past
                # the limit is past it too (whether the serving process noticed in time
                # or not depends on its load, which must not decide)
                timed_out = lane.seconds is not None and cpu > lane.seconds
            except (EOFError, OSError) as e:
                outcome, error = None, e
        finally:
            lane.busy.discard(worker)
        # a process killed just after it replied is gone all the same: never reused
        alive = (
            not killed
            and error is None
            and not (isinstance(outcome, _Failed) and outcome.out_of_memory)
        )
        if alive and not self._closed:
            lane.idle.append(worker)
        else:
            worker.close()
            self._grow(lane)
        self._dispatch(lane)
        if not timed_out and error is None:
            self.finished[lane.kind] += 1
        if job.outcome.done():
            return
        if timed_out:
            if lane is self.quick:
                job.outcome.set_exception(_Escalate())
            else:
                job.outcome.set_exception(StatementTimeout(self.limits.timeout))
        elif error is not None:
            if self._closed:
                job.outcome.set_exception(_shutting_down())
            else:
                log.error("a DP worker process ended while working on a statement")
                job.outcome.set_exception(_internal())
        elif isinstance(outcome, _Failed):
            if outcome.out_of_memory:
                job.outcome.set_exception(WorkerOutOfMemory(self.limits.memory_mb))
            elif outcome.error is None:
                job.outcome.set_exception(_internal())
            elif isinstance(outcome.error, cost.WorkLimitError) and outcome.error.escalate:
                job.outcome.set_exception(_Escalate())
            else:
                job.outcome.set_exception(outcome.error)
        else:
            job.outcome.set_result(outcome)


def _internal() -> LaprasError:
    return InternalError("internal error in the LAPRAS proxy; see the server log")


def _shutting_down() -> LaprasError:
    from proxy.exceptions import AdminShutdown

    return AdminShutdown("terminating connection due to administrator command")


# --- the rewriter's work, as the worker processes run it ----------------------------------

#: The statements this worker classified (or bound) lately, by their text: a prepared
#: statement is bound in whichever worker is free, and one that classified it before binds
#: it without reading it again.
_KEPT: OrderedDict[tuple[str, str], DPStatement] = OrderedDict()
_kept_chars = 0


def classify_text(sql: str, schema: Schema, zone: str = "UTC") -> list[Statement]:
    """``rewriter.classify`` in a worker process. A refusal under the quick lane's first
    budget is raised (the text is classified again in the heavy lane, not refused). A DP
    statement of more than :data:`SLIM_CHARS` is kept here for its bindings
    (:func:`bind_text`) and goes back *slim*: its normalised form (``prepared``) keeps the
    table, columns, parameter types, template and bindings only, never bound in the serving
    process (a 1 MiB IN list's whole form took 2 s to unpickle there, its plan 11 ms)."""
    statements = rewriter.classify(sql, schema, time_zone=zone)
    for st in statements:
        if isinstance(st, Refused) and getattr(st.error, "escalate", False):
            raise st.error
    return [
        _slim(_keep(st, zone)) if isinstance(st, DPStatement) and len(st.sql) > SLIM_CHARS else st
        for st in statements
    ]


def bind_text(
    sql: str,
    schema: Schema,
    zone: str,
    params: Sequence[object],
    public: Mapping[str, Sequence[tuple[object, ...]]] | None = None,
) -> Plan:
    """``rewriter.bind`` of the DP statement ``sql`` (a statement's own text, ``st.sql``) in
    a worker process, with ``public`` the rows of the declared public tables it joins: the
    statement this worker kept, or classified again (a pure function of the text, the
    declaration and the session's TimeZone ``zone`` it was first read in). The reading of the text counts in both cases
    (rewriter.cost), so whether a binding is refused does not depend on the worker."""
    st = _KEPT.get((zone, sql))
    if st is not None:
        _KEPT.move_to_end((zone, sql))
        cost.spend_text(sql)
    else:
        found = rewriter.classify(sql, schema, time_zone=zone)
        dp = [s for s in found if isinstance(s, DPStatement)]
        if len(dp) != 1:
            raise InternalError("a prepared DP statement did not classify again as one")
        st = _keep(dp[0], zone)
    return rewriter.bind(st, params, public)


def _keep(st: DPStatement, zone: str) -> DPStatement:
    global _kept_chars
    key = (zone, st.sql)
    if key not in _KEPT:
        _kept_chars += len(st.sql)
    _KEPT[key] = st
    _KEPT.move_to_end(key)
    while len(_KEPT) > _STATEMENTS or _kept_chars > _STATEMENT_CHARS:
        _kept_chars -= len(_KEPT.popitem(last=False)[0][1])
    return st


def _slim(st: DPStatement) -> DPStatement:
    p = st.prepared
    light = dataclasses.replace(
        p, outputs=(), where=None, group_by=(), measures=(), having=None, order_by=(),
        branches=(),
    )  # fmt: skip
    return dataclasses.replace(st, prepared=light)
