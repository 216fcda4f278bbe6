"""The client side of a run: flows started, commands carried out, outcomes judged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mrtr_core.client import (
    CancelHandlers,
    CancelRequested,
    ClientFlow,
    Complete,
    Fail,
    FlowState,
    HandlerFailed,
    HandlerReturned,
    InputNeeded,
    InvokeHandler,
    ResponseReceived,
    RoundFulfilled,
    RoundStarted,
    SendRequest,
    TimerFired,
)
from mrtr_core.client.commands import ClientCommand, RequestId
from mrtr_core.client.events import ClientEvent
from mrtr_core.errors import (
    FlowDeadlineError,
    HandlerTimeoutError,
    LegTimeoutError,
    MrtrError,
    RoundLimitError,
)
from mrtr_core.sim import invariants as inv
from mrtr_core.sim._state import EPS, Flow, Leg, RunState, outcome_label
from mrtr_core.sim.hostile import HOSTILE_SERVER_ERRORS, HOSTILE_SERVERS
from mrtr_core.sim.mutations import StaleIds
from mrtr_core.sim.transcript import describe_message, short_token
from mrtr_core.sim.workload import FULL_CAPABILITIES, KINDS_ALL
from mrtr_core.wire.models import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitResult,
    Implementation,
    InputRequest,
    JsonObject,
    ListRootsRequest,
    RequestMeta,
)

__all__ = ["ClientSide"]

_MISBEHAVIOURS: Final = ("fail", "slow", "abort")
_MISBEHAVIOURS_FORM: Final = ("fail", "slow", "abort", "decline", "cancel")
_AWAITING_RESPONSE: Final = FlowState.AWAITING_RESPONSE  # (an Enum member lookup is slow)
_META: Final = RequestMeta(
    client_capabilities=FULL_CAPABILITIES,
    client_info=Implementation(name="mrtr-sim-client", version="1.0"),
)


class ClientSide(RunState):
    """Runs the real :class:`~mrtr_core.client.ClientFlow` for every operation."""

    def _start(self, index: int) -> None:
        prng = self.root.fork(f"flow-{index}")
        operation = self._operation(index, prng)
        running = self.live_ops.setdefault(operation.op, index)
        if running != index:
            # Side effects, answer marks and transcript lines are told apart by id: two
            # operations under one would look like one whose step ran twice.
            raise ValueError(f"operations gave flow {index} the id {operation.op!r} of flow "
                             f"{running}, which still runs: each operation needs its own id")
        client = self.clients[prng.below(len(self.clients))]
        flow = Flow(index, operation, client, prng, self.root.fork(f"net-{index}"))
        self.live[index] = flow
        if operation.single_use:
            self.single_use_targets.add((operation.method, operation.target))
        faults = self.faults
        # Every decision is drawn whether or not its fault is on, so that turning one off
        # leaves the other draws where they were (the shrinker relies on it).
        hostile_server = prng.chance(faults.hostile_server)
        behaviour = prng.choice(HOSTILE_SERVERS)
        hostile_client = prng.chance(faults.hostile_client)
        rotate = prng.chance(faults.rotate)
        if hostile_server:
            flow.hostile = behaviour
            self.counters.hostile_flows += 1
        elif hostile_client:
            flow.probing = True
        if rotate:
            self._rotate()
        next_id: Callable[[], RequestId] = client.next_id
        if self.mutations.reuse_request_id:
            next_id = StaleIds(client.next_id)
        flow.flow = ClientFlow(
            operation.method,
            operation.params,
            meta=_META,
            handled_kinds=KINDS_ALL,
            next_id=next_id,
            limits=self.limits,
            random=self.root.fork(f"jitter-{index}"),
        )
        flow.started = self.sched.now
        if self.transcript is not None:
            where = f" to hostile server ({flow.hostile})" if flow.hostile else ""
            probing = " with hostile probes" if flow.probing else ""
            self._note(flow.op, client.principal,
                       f"start {operation.method} {operation.target}{where}{probing}")
        try:
            commands = flow.flow.start(self.sched.now)
        except Exception as exc:
            self._client_raised(flow, exc)
            return
        self._apply(flow, commands)

    def _feed(self, flow: Flow, event: ClientEvent) -> None:
        assert flow.flow is not None
        try:
            commands = flow.flow.handle(event, self.sched.now)
        except Exception as exc:
            self._client_raised(flow, exc)
            return
        self._apply(flow, commands)

    def _client_raised(self, flow: Flow, exc: Exception) -> None:
        self._violate(inv.TYPED_OUTCOME, flow.op, f"the client flow raised {exc!r}")
        flow.done = True
        self.outcomes["crashed: client flow raised"] += 1
        self._release(flow)

    def _release(self, flow: Flow) -> None:
        """A flow ended: drop what only a live flow needs (keeps a long run's memory flat)."""
        self.live.pop(flow.index, None)
        if self.live_ops.get(flow.op) == flow.index:
            del self.live_ops[flow.op]
        pending = flow.client.pending
        for request_id in flow.ids:
            if pending.get(request_id) is flow:
                del pending[request_id]  # a late response is now simply stale
        flow.ids = []
        flow.flow = None
        flow.answers = {}
        flow.questions = {}
        flow.last_leg = None

    def _apply(self, flow: Flow, commands: list[ClientCommand]) -> None:
        for command in commands:
            kind = type(command)
            if kind is SendRequest:
                assert isinstance(command, SendRequest)
                self._send(flow, command)
            elif kind is InvokeHandler:
                assert isinstance(command, InvokeHandler)
                self._invoke(flow, command)
            elif kind is CancelHandlers:
                assert isinstance(command, CancelHandlers)
                flow.handlers.difference_update(command.keys)
                self._note(flow.op, flow.client.principal, f"cancel handlers {command.keys}")
            elif kind is Complete:
                assert isinstance(command, Complete)
                self._end(flow, command.result, None)
            elif kind is Fail:
                assert isinstance(command, Fail)
                self._end(flow, None, command.error)
            elif kind is RoundStarted:
                assert isinstance(command, RoundStarted)
                flow.rounds = command.round
                if command.state_only:
                    self._check_pacing(flow)
            elif kind is InputNeeded or kind is RoundFulfilled:
                pass
            else:  # pragma: no cover - a new command the simulator does not know
                self._violate(inv.TYPED_OUTCOME, flow.op, f"unknown command {command!r}")
        if flow.done:
            self._release(flow)
        else:
            assert flow.flow is not None
            deadline = flow.flow.deadline
            # One wake-up at a time per flow, the earliest: a deadline that moved later is
            # left to the pending wake-up, which finds it early and waits again (_timer).
            if deadline is not None and (flow.timer_at is None or deadline < flow.timer_at):
                flow.timer_at = deadline
                self.sched.at(deadline, self._timer, flow)

    def _timer(self, flow: Flow) -> None:
        """A flow's wake-up: feed ``TimerFired`` at its deadline, never before it."""
        if flow.done or flow.flow is None:
            return
        now = self.sched.now
        if flow.timer_at == now:
            flow.timer_at = None  # the earliest wake-up is this one (a later one may remain)
        deadline = flow.flow.deadline
        if deadline is None:
            return
        if now < deadline:
            if flow.timer_at is None or deadline < flow.timer_at:
                flow.timer_at = deadline
                self.sched.at(deadline, self._timer, flow)
            return
        self._feed(flow, TimerFired())

    def _check_pacing(self, flow: Flow) -> None:
        # digest §2.4 and mrtr_core.client.pacing: base = initial * 2**(streak-1), capped;
        # a jittered delay lies in [base * (1 - jitter), base].
        limits = self.limits
        if flow.state_only_at is None:
            self._violate(inv.PACING, flow.op, "a state-only retry without a state-only result")
            return
        gap = self.sched.now - flow.state_only_at
        base = min(limits.pacing_initial * 2.0 ** max(flow.streak - 1, 0), limits.pacing_max)
        low = base * (1.0 - limits.pacing_jitter)
        if not low - EPS <= gap <= base + EPS:
            self._violate(inv.PACING, flow.op,
                          f"state-only retry {flow.streak} after {gap:.6f} s; expected "
                          f"[{low:.6f}, {base:.6f}]")

    def _send(self, flow: Flow, command: SendRequest) -> None:
        client = flow.client
        request_id = command.request_id
        message = command.message
        if request_id in client.handed:
            client.handed.remove(request_id)
        else:
            self._violate(inv.FRESH_IDS, flow.op,
                          f"request id {request_id!r} was used before on {client.principal} "
                          f"(or never handed out)")
        params = message.get("params") or {}
        state = params.get("requestState")
        if flow.legs and state != flow.expected_state:
            self._violate(inv.STATE_ECHO, flow.op,
                          f"sent state {short_token(state)}, the server gave "
                          f"{short_token(flow.expected_state)}")
        answers = params.get("inputResponses")
        keys = tuple(answers) if isinstance(answers, dict) else ()
        if flow.legs and keys != flow.expected_keys:
            self._violate(inv.STATE_ECHO, flow.op,
                          f"answered {list(keys)}, the server asked {list(flow.expected_keys)}")
        if isinstance(answers, dict):
            flow.answers.update(answers)
        flow.legs += 1
        flow.sent_at = self.sched.now
        self.counters.legs += 1
        client.pending[request_id] = flow
        flow.ids.append(request_id)
        leg = Leg(flow, message, client.principal, None, self.sched.now, flow.net)
        leg.round = flow.rounds  # RoundStarted came just before this SendRequest
        flow.last_leg = leg
        if self.transcript is not None:
            self._note(flow.op, client.principal, f"send {describe_message(message)}")
        if flow.hostile is not None:
            self._transmit(leg, self._at_hostile, leg, "request")
        else:
            self._transmit(leg, self._at_balancer, leg, "request")

    def _invoke(self, flow: Flow, command: InvokeHandler) -> None:
        prng = flow.prng
        timing = self.timing
        key = command.key
        request = command.request
        event: ClientEvent
        what = "answers"
        try:
            event = HandlerReturned(key=key, answer=self.workload.answer(
                flow.operation, key, request))
        except Exception as exc:
            # What a client does with an input handler that raises: the flow fails with
            # HandlerFailedError, and the run goes on to report it with seed and transcript.
            event = HandlerFailed(key=key, error=exc)
            what = f"the workload's answer raised {exc!r}"
        # Every decision is drawn whether or not its fault is on (see _start).
        think = prng.uniform(*self._think(request))
        faults = self.faults
        # Draws whose fault is off are spent without being computed (their values could
        # not matter), so every later draw is where it would be with the fault on.
        misbehave = False
        misbehaviour = "answers"
        slow = 0.0
        if faults.handler > 0.0:
            misbehave = prng.chance(faults.handler)
            choices = (_MISBEHAVIOURS_FORM if isinstance(request, ElicitFormRequest)
                       else _MISBEHAVIOURS)
            misbehaviour = choices[prng.below(len(choices))]
            slow = prng.uniform(*timing.slow_think)
        else:
            prng.skip(3)
        expire = False
        expire_think = 0.0
        if faults.expire > 0.0:
            expire = prng.chance(faults.expire)
            expire_think = timing.state_ttl + 2 * timing.state_skew + prng.uniform(1.0, 10.0)
        else:
            prng.skip(2)
        if flow.hostile is None and misbehave:
            what = misbehaviour
            if what == "decline":
                event = HandlerReturned(key=key, answer=ElicitResult(action="decline"))
            elif what == "cancel":
                event = HandlerReturned(key=key, answer=ElicitResult(action="cancel"))
            elif what == "fail":
                event = HandlerFailed(key=key, error=RuntimeError(f"{flow.op}: handler failed"))
                flow.touched.append("handler failed")
            elif what == "slow":
                think = slow
                flow.touched.append("handler too slow")
            else:
                flow.touched.append("caller gave up")
                self.sched.after(think / 2, self._abort, flow)
        if flow.hostile == "endless":
            # A stream of its own: the draws above stay where they were.
            think = flow.prng.fork(f"long-think-{flow.legs}").uniform(*timing.long_think)
            what = f"answers after {think:.1f} s"
        if flow.hostile is None and expire:
            # The person thinks longer than the state lives: it expires in flight.
            think = expire_think
            flow.touched.append("state expired in flight")
            what = f"{what} after {think:.1f} s (state expires)"
        flow.handlers.add(key)
        flow.asked_at = self.sched.now  # a round's handlers are all invoked at once (C1)
        if self.transcript is not None:
            self._note(flow.op, flow.client.principal, f"handler {key} {request.method}: {what}")
        self.sched.after(think, self._handler_done, (flow, key, event))

    def _think(self, request: InputRequest) -> tuple[float, float]:
        if isinstance(request, CreateMessageRequest):
            return self.timing.sample_think
        if isinstance(request, ListRootsRequest):
            return self.timing.roots_think
        return self.timing.think

    def _handler_done(self, item: tuple[Flow, str, ClientEvent]) -> None:
        flow, key, event = item
        if flow.done or key not in flow.handlers:
            return  # cancelled: its outcome is dropped
        flow.handlers.discard(key)
        timeout = self.limits.handler_timeout
        if timeout is not None and self.sched.now - flow.asked_at > timeout + EPS:
            self._violate(inv.TIME_LIMIT, flow.op,
                          f"handler {key} answered {self.sched.now - flow.asked_at:.6f} s after "
                          f"it was invoked and the flow still took the answer; "
                          f"handler_timeout is {timeout}")
        self._feed(flow, event)

    def _check_timed_out(self, op: str, what: str, waited: float, limit: float | None) -> None:
        """A leg or handler timeout must fire exactly ``limit`` after its start."""
        if limit is not None and abs(waited - limit) > EPS:
            self._violate(inv.TIME_LIMIT, op,
                          f"{what} timed out after {waited:.6f} s; {what}_timeout is {limit}")

    def _abort(self, flow: Flow) -> None:
        if flow.done:
            return
        self._note(flow.op, flow.client.principal, "caller cancels the flow")
        self._feed(flow, CancelRequested(reason="the caller gave up"))

    def _end(self, flow: Flow, result: JsonObject | None, error: MrtrError | None) -> None:
        flow.done = True
        now = self.sched.now
        limits = self.limits
        op = flow.op
        recording = self.transcript is not None
        if result is not None:
            label = "completed (isError)" if result.get("isError") else "completed"
            if recording:
                self._note(op, flow.client.principal, f"{label} after {flow.legs} legs")
        else:
            assert error is not None
            label = outcome_label(error)
            if recording:
                self._note(op, flow.client.principal, f"{label}: {error}")
        if flow.hostile is not None:
            label = f"{label} [hostile server: {flow.hostile}]"
        self.outcomes[label] += 1
        if flow.legs > limits.max_rounds:
            self._violate(inv.ROUND_LIMIT, op,
                          f"{flow.legs} legs; max_rounds is {limits.max_rounds}")
        if isinstance(error, RoundLimitError) and flow.rounds != limits.max_rounds:
            # digest §2.6: the limit stops a flow at its max_rounds-th round, not before.
            self._violate(inv.ROUND_LIMIT, op,
                          f"stopped by the round limit after {flow.rounds} rounds; max_rounds "
                          f"is {limits.max_rounds}")
        budget = limits.flow_timeout
        if budget is not None and now - flow.started > budget + EPS:
            self._violate(inv.TIME_LIMIT, op,
                          f"ended {now - flow.started:.6f} s after it started; budget {budget}")
        if isinstance(error, LegTimeoutError):
            self._check_timed_out(op, "leg", now - flow.sent_at, limits.leg_timeout)
        if isinstance(error, HandlerTimeoutError):
            self._check_timed_out(op, "handler", now - flow.asked_at, limits.handler_timeout)
        if flow.hostile is not None:
            expected = HOSTILE_SERVER_ERRORS[flow.hostile]
            if result is not None:
                self._violate(inv.PEER_CONTRACT, op,
                              f"completed against the hostile {flow.hostile} server")
            elif not isinstance(error, expected) and not (
                flow.touched and isinstance(error, LegTimeoutError | FlowDeadlineError)
            ):
                self._violate(inv.PEER_CONTRACT, op,
                              f"hostile {flow.hostile} server ended the flow with {error!r}; "
                              f"expected {' or '.join(e.__name__ for e in expected)}")
            return
        if result is not None:
            problem = self._judge(flow.operation, result, flow.answers)
            if problem:
                self._violate(inv.ISOLATION, op, problem)
        elif not flow.touched:
            self._violate(inv.LIVENESS, op, f"no fault touched it, yet it failed: {error!r}")

    def _at_client(self, item: tuple[Leg, JsonObject]) -> None:
        leg, message = item
        flow = leg.flow
        if leg.probe is not None:
            self._probe_answered(leg, message)
            return
        request_id: RequestId = message.get("id")  # type: ignore[assignment]
        target = flow.client.pending.get(request_id)  # a connection routes responses by id
        if target is None or target.done or target.flow is None or (
            target.last_leg is None or target.last_leg.request_id != request_id
        ) or target.flow.state is not _AWAITING_RESPONSE:
            self.counters.stale += 1
            if self.transcript is not None:
                self._note(flow.op, flow.client.principal, f"stale {describe_message(message)}")
            return
        flow = target
        if self.transcript is not None:
            self._note(flow.op, flow.client.principal, f"recv {describe_message(message)}")
        result = message.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            state = result.get("requestState")
            flow.expected_state = state if isinstance(state, str) else None
            requests = result.get("inputRequests")
            flow.expected_keys = tuple(requests) if isinstance(requests, dict) else ()
            if flow.probing and isinstance(requests, dict):
                flow.questions.update(requests)
            if requests:
                flow.streak = 0
                flow.state_only_at = None
            else:
                flow.streak += 1
                flow.state_only_at = self.sched.now
            if (flow.probing and flow.hostile is None and isinstance(state, str)
                    and flow.last_leg is not None):
                self._probe(flow, flow.last_leg, state, flow.expected_keys)
        self._feed(flow, ResponseReceived(message=message))
