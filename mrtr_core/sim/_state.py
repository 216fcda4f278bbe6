"""What one simulated run holds: the actors' records and the state every part shares.

The run is split by side (clients, servers, probes), each a mixin over :class:`RunState`,
which declares the shared state and carries the network between them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mrtr_core import jsontext
from mrtr_core.app import App
from mrtr_core.client import ClientFlow, ClientLimits
from mrtr_core.client.commands import RequestId
from mrtr_core.errors import JsonRpcError
from mrtr_core.sim.balancer import Balancer
from mrtr_core.sim.clock import Scheduler
from mrtr_core.sim.faults import Faults
from mrtr_core.sim.mutations import Mutations
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.report import Counters, SimulationError, Violation
from mrtr_core.sim.timing import Timing
from mrtr_core.sim.transcript import Transcript
from mrtr_core.sim.workload import Effects, Operation, Workload
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.wire.models import JsonObject

if TYPE_CHECKING:
    from mrtr_core.sim.simulation import Simulation

__all__ = [
    "EPS",
    "Client",
    "Flow",
    "Instance",
    "Issued",
    "Leg",
    "RunState",
    "binding_of",
    "clip",
    "is_refusal",
    "outcome_label",
]

EPS: Final = 1e-6
"""Tolerance of time comparisons (virtual seconds)."""

_CLIP: Final = 300  # characters of a result shown in a violation
_CANONICAL: Final = jsontext.canonical  # json.dumps(sort_keys=True, separators=(",", ":"))
_FIELD: Final = 1.0 / 65536.0
_HALF: Final = 1.0 / 4294967296.0


class Client:
    """One client connection: a principal, an id counter, and routing of responses by id.

    ``handed`` holds the ids :meth:`next_id` gave the client flows that no request has
    carried yet. A request whose id is not there reuses an id or made one up: the fresh-ids
    invariant needs no register of every id ever sent, so a long run's memory stays flat.
    """

    __slots__ = ("handed", "index", "next", "pending", "principal")

    def __init__(self, index: int) -> None:
        self.index = index
        self.principal = f"user-{index}"
        self.next = 0
        self.pending: dict[RequestId, Flow] = {}
        self.handed: set[RequestId] = set()

    def next_id(self) -> RequestId:
        """A new id for a client flow (recorded as handed out)."""
        request_id = self.probe_id()
        self.handed.add(request_id)
        return request_id

    def probe_id(self) -> RequestId:
        """A new id the simulator's own probes use (never one a flow may send)."""
        self.next += 1
        return f"c{self.index}-{self.next}"


class Instance:
    """One server instance: its app, its clock skew, its key ring, up or down.

    ``active`` and ``kids`` are the ring's active key id and every key id in it, kept next to
    the (immutable) ring so that a request does not rebuild them: set them with
    :meth:`use_ring`.
    """

    __slots__ = ("active", "app", "codec", "index", "kids", "name", "ring", "skew", "up")

    def __init__(self, index: int, skew: float, ring: KeyRing, codec: StateCodec, app: App) -> None:
        self.index = index
        self.name = f"server-{index}"
        self.skew = skew
        self.use_ring(ring)
        self.codec = codec
        self.app = app
        self.up = True

    def use_ring(self, ring: KeyRing) -> None:
        """Hold ``ring`` from now on."""
        self.ring = ring
        self.active = ring.active
        self.kids = ring.ids


class Flow:
    """One operation: the client flow and what the simulator knows about it."""

    __slots__ = (
        "answers",
        "asked_at",
        "client",
        "done",
        "expected_keys",
        "expected_state",
        "flow",
        "handlers",
        "hostile",
        "ids",
        "index",
        "last_leg",
        "legs",
        "net",
        "op",
        "operation",
        "previous",
        "prng",
        "probing",
        "questions",
        "rounds",
        "sent_at",
        "started",
        "state_only_at",
        "streak",
        "timer_at",
        "touched",
    )

    def __init__(self, index: int, operation: Operation, client: Client, prng: Prng,
                 net: Prng) -> None:
        self.index = index
        self.op = operation.op
        self.operation = operation
        self.client = client
        self.prng = prng
        self.net = net
        self.flow: ClientFlow | None = None
        self.hostile: str | None = None
        self.probing = False
        self.started = 0.0
        self.done = False
        self.legs = 0
        self.rounds = 0  # the round number of the last leg sent (a leg sent again keeps it)
        self.sent_at = 0.0
        self.asked_at = 0.0  # when the client invoked the current round's handlers
        self.last_leg: Leg | None = None
        self.ids: list[RequestId] = []
        self.previous: int | None = None
        self.timer_at: float | None = None
        self.handlers: set[str] = set()
        self.answers: dict[str, Any] = {}
        # A probing flow's input requests, by key, as received (a probe answers with them).
        self.questions: dict[str, Any] = {}
        self.expected_state: str | None = None
        self.expected_keys: tuple[str, ...] = ()
        self.state_only_at: float | None = None
        self.streak = 0
        self.touched: list[str] = []


class Leg:
    """One request on the wire (an honest leg or a probe) and its way back.

    ``net`` is the stream its faults are drawn from: the flow's own for an honest leg, a
    separate one for a probe, so that probes neither shift nor touch the honest flow.
    """

    __slots__ = ("_binding", "expect", "flow", "message", "net", "principal", "probe",
                 "refused", "request_id", "round", "sent_at")

    def __init__(self, flow: Flow, message: JsonObject, principal: str, probe: str | None,
                 sent_at: float, net: Prng) -> None:
        self.flow = flow
        self.message = message
        self.principal = principal
        self.probe = probe
        self.request_id = message.get("id")
        self.sent_at = sent_at
        self.net = net
        self.refused = False  # a probe: some answer to it refused it
        # An honest leg: the client's round it carries (set as it is sent); 0 for a probe,
        # which may carry a state of any round.
        self.round = 0
        # A stale_answer probe: the answers a complete result must echo (None once judged).
        self.expect: dict[str, Any] | None = None
        self._binding: str | None = None

    @property
    def binding(self) -> str:
        """:func:`binding_of` this leg's message and principal (written once per leg: the
        message is never changed after it is sent)."""
        binding = self._binding
        if binding is None:
            binding = self._binding = binding_of(self.message, self.principal)
        return binding


class Issued:
    """What the simulator knows about a ``requestState`` a server issued."""

    __slots__ = ("binding", "global_at", "iat", "kid", "op")

    def __init__(self, binding: str, iat: float, global_at: float, kid: str, op: str) -> None:
        self.binding = binding
        self.iat = iat
        self.global_at = global_at
        self.kid = kid
        self.op = op


def binding_of(message: JsonObject, principal: str) -> str:
    """The simulator's own view of what a request's state must be bound to (S11)."""
    params = message.get("params") or {}
    target = params.get("uri") if "uri" in params else params.get("name")
    return _CANONICAL([message.get("method"), target, params.get("arguments") or {}, principal])


def clip(text: str) -> str:
    """``text``, cut short for a violation's detail."""
    return text if len(text) <= _CLIP else f"{text[:_CLIP]}... ({len(text)} characters)"


def is_refusal(message: object) -> bool:
    if not isinstance(message, dict):
        return False
    error = message.get("error")
    return isinstance(error, dict) and error.get("code") == -32602


def outcome_label(error: BaseException) -> str:
    if isinstance(error, JsonRpcError):
        return f"failed: {type(error).__name__} {error.code}"
    return f"failed: {type(error).__name__}"


class RunState:
    """The state of one run, shared by its client, server and probe sides."""

    sim: Simulation
    workload: Workload
    faults: Faults
    timing: Timing
    limits: ClientLimits
    mutations: Mutations
    root: Prng
    sched: Scheduler
    effects: Effects
    guard: Any
    codec_cls: type[StateCodec]
    key_prng: Prng
    nonce: Callable[[int], bytes]
    counters: Counters
    outcomes: Counter[str]
    violations: list[Violation]
    transcript: Transcript | None
    issued: dict[str, Issued]
    redeemed: set[str]
    live: dict[int, Flow]
    live_ops: dict[str, int]  # the id of every live flow's operation: its flow's index
    keys_made: int
    rotating: bool
    instances: list[Instance]
    up: list[int]
    balancer: Balancer
    clients: list[Client]
    single_use_targets: set[tuple[str, str]]
    quiet_net: bool  # no loss, duplication, delay or reordering in this run

    # --- implemented by the sides --------------------------------------------------------

    def _at_balancer(self, leg: Leg) -> None:
        raise NotImplementedError

    def _at_hostile(self, leg: Leg) -> None:
        raise NotImplementedError

    def _at_client(self, item: tuple[Leg, JsonObject]) -> None:
        raise NotImplementedError

    def _probe(self, flow: Flow, leg: Leg, state: str, keys: tuple[str, ...]) -> None:
        raise NotImplementedError

    def _probe_answered(self, leg: Leg, message: JsonObject) -> None:
        raise NotImplementedError

    def _rotate(self) -> None:
        raise NotImplementedError

    # --- shared --------------------------------------------------------------------------

    def _codec(self, ring: KeyRing) -> StateCodec:
        return self.codec_cls(ring, audience="mrtr-sim", nonce=self.nonce,
                              ttl=self.timing.state_ttl, skew=self.timing.state_skew)

    def _build_app(self, codec: StateCodec, where: str) -> App:
        """A fresh app for the instance ``where`` names (``server-1 (restart)``).

        Raises:
            SimulationError: The workload's app factory raised (chained).
        """
        try:
            return self.workload.build_app(codec, self.effects)
        except Exception as exc:
            raise SimulationError(self.sim.seed, "app_factory", exc, where=where) from exc

    def _operation(self, index: int, prng: Prng, probe_of: str | None = None) -> Operation:
        """The workload's ``index``-th operation (for the swap probe of ``probe_of``).

        Raises:
            SimulationError: The workload's ``operations`` raised (chained).
        """
        try:
            return self.workload.operation(index, prng)
        except Exception as exc:
            where = f"flow {index}" + ("" if probe_of is None
                                       else f", asked by a swap probe of {probe_of}")
            raise SimulationError(self.sim.seed, "operations", exc, where=where, flow=index,
                                  op=probe_of) from exc

    def _note(self, op: str, actor: str, text: str) -> None:
        if self.transcript is not None:
            self.transcript.add(self.sched.now, op, actor, text)

    def _violate(self, invariant: str, op: str, detail: str) -> None:
        self.violations.append(Violation(invariant=invariant, op=op, detail=detail,
                                         time=self.sched.now))
        self._note(op or "-", "CHECK", f"VIOLATION [{invariant}] {detail}")

    def _judge(self, operation: Operation, result: JsonObject, answers: dict[str, Any]) -> str:
        """Why ``result`` is wrong for ``operation`` given ``answers`` (the workload's check;
        ``""`` when it is right)."""
        try:
            return self.workload.check(operation, result, answers)
        except Exception as exc:  # a result the check cannot read is not right either
            return (f"the workload's check raised {exc!r} on the result "
                    f"{clip(_CANONICAL(result))}")

    def _transmit(self, leg: Leg, deliver: Callable[[Any], None], item: Any, what: str,
                  extra: float = 0.0) -> None:
        """Carry one message, through the faults, to ``deliver(item)``.

        Three draws per message whatever the rates: the latency, one word whose four 16-bit
        fields decide loss, duplication, delay and reordering independently, and one word
        whose halves size the holds. Turning a fault off changes no other decision.
        """
        faults = self.faults
        timing = self.timing
        flow = leg.flow
        net = leg.net
        honest = leg.probe is None
        counters = self.counters
        counters.messages += 1
        delay = extra + net.uniform(*timing.latency)
        if self.quiet_net:
            # No network fault is on: the two words could not change anything. They are
            # still spent, so every later draw is where it would be with faults on.
            net.skip(2)
            self.sched.after(delay, deliver, item)
            return
        decide = net.next_u64()
        size = net.next_u64()
        if (decide & 0xFFFF) * _FIELD < faults.loss:
            counters.lost += 1
            if honest:
                flow.touched.append(f"{what} lost")
            self._note(flow.op, "net", f"{what} lost")
            return
        hold_a = (size & 0xFFFFFFFF) * _HALF
        hold_b = (size >> 32) * _HALF
        if ((decide >> 16) & 0xFFFF) * _FIELD < faults.duplicate:
            counters.duplicated += 1
            if honest:
                flow.touched.append(f"{what} duplicated")
            low, high = timing.reorder_hold
            copy = delay + low + (high - low) * hold_a
            self._note(flow.op, "net", f"{what} duplicated (copy +{copy:.6f} s)")
            self.sched.after(copy, deliver, item)
        if ((decide >> 32) & 0xFFFF) * _FIELD < faults.delay:
            counters.delayed += 1
            low, high = timing.long_delay
            hold = low + (high - low) * hold_b
            delay += hold
            if honest:
                flow.touched.append(f"{what} delayed")
            self._note(flow.op, "net", f"{what} delayed by {hold:.6f} s")
        elif (decide >> 48) * _FIELD < faults.reorder:
            counters.reordered += 1
            low, high = timing.reorder_hold
            delay += low + (high - low) * hold_b
        self.sched.after(delay, deliver, item)
