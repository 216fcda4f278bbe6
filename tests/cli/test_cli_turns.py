"""One person, one terminal: the inputs of a round take turns in the server's order, and an
input the client cancels stops waiting (for its turn, or for a typed line) at once."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
from cli_app import make_app
from mrtr_cli.calls import EXIT_FAILED, EXIT_OK, CallSpec, build_client, run_call
from mrtr_cli.forms import Prompter
from mrtr_cli.inputs import Inputs
from mrtr_cli.progress import RoundReporter
from mrtr_cli.terminal import InputAbandoned, TurnClock, Turns
from mrtr_sync import MemoryTransport
from rich.console import Console

from mrtr_core.app import drive_sync
from mrtr_core.client.limits import ClientLimits

NOW = 1_800_000_000.0
WAIT = 60.0  # a safety net: every wait below ends on a signal long before


def console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None, highlight=False)


def shown(c: Console) -> str:
    assert isinstance(c.file, io.StringIO)
    return c.file.getvalue()


def survey(inputs: Inputs) -> tuple[int, str, str]:
    app = make_app()

    def serve(message: dict[str, Any]) -> dict[str, Any]:
        reply = drive_sync(app, message, now=NOW)
        assert reply.message is not None
        return reply.message

    out, ui = console(), console()
    reporter = RoundReporter(ui)
    with build_client(MemoryTransport(serve), inputs, on_event=reporter,
                      limits=ClientLimits(max_rounds=5)) as client:
        status = run_call(client, CallSpec(method="tools/call", target="survey"), out=out,
                          ui=ui, reporter=reporter)
    return status, shown(out), shown(ui)


class Lines(io.StringIO):
    """Typed lines, and the thread that read each one."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("".join(f"{line}\n" for line in lines))
        self.readers: list[str] = []

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        self.readers.append(threading.current_thread().name)
        return super().readline(size)


def wait_until_waiting(turns: Turns, key: str) -> None:
    with turns.changed:
        assert turns.changed.wait_for(lambda: key in turns.waiting, WAIT), key


# --- the CLI's handlers, run by the real sync client ---------------------------------------


def test_forms_of_one_round_are_asked_one_after_another_in_the_servers_order() -> None:
    # Each form: the value, then "a" to accept the review. The client runs the round's three
    # handlers at once; the answers still land on the forms in the server's order.
    stream = Lines(["one", "a", "two", "a", "three", "a"])
    ui = console()
    inputs = Inputs(console=ui, prompter=Prompter(ui, stream=stream, server="test-server"))
    status, out, _ = survey(inputs)
    assert status == EXIT_OK
    assert out.strip() == "a=one b=two c=three"
    text = shown(ui)
    assert text.index("First?") < text.index("Second?") < text.index("Third?")
    assert stream.read() == ""  # every typed line was used, none twice
    assert all(name.startswith("mrtr-cli-read-") for name in stream.readers)


def test_an_answers_file_and_the_person_share_a_round_in_order() -> None:
    stream = Lines(["two", "a"])
    ui = console()
    inputs = Inputs(console=ui, prompter=Prompter(ui, stream=stream, server="test-server"),
                    answers={"first": {"a": "one"}, "third": {"c": "three"}})
    status, out, _ = survey(inputs)
    assert status == EXIT_OK
    assert out.strip() == "a=one b=two c=three"
    text = shown(ui)
    assert text.index("first: answers file") < text.index("Second?")
    assert text.index("Second?") < text.index("third: answers file")


def test_after_a_failed_input_the_later_ones_of_its_round_are_not_asked() -> None:
    stream = Lines(["never", "read"])
    ui = console()
    inputs = Inputs(console=ui, prompter=Prompter(ui, stream=stream, server="test-server"),
                    answers={"first": {"a": 5}})  # not a string: the first input fails
    status, _, messages = survey(inputs)
    assert status == EXIT_FAILED
    assert "The answers for input first do not fit its form" in messages
    assert stream.readers == []  # nobody was prompted for second or third
    assert "Second?" not in shown(ui)


# --- Turns ---------------------------------------------------------------------------------


def test_a_later_input_waits_until_the_earlier_one_is_done() -> None:
    turns = Turns()
    turns.begin_round(["a", "b"])
    order: list[str] = []

    def later() -> None:
        with turns.turn("b"):
            order.append("b")

    thread = threading.Thread(target=later)
    thread.start()
    wait_until_waiting(turns, "b")
    with turns.turn("a"):
        order.append("a")
        with turns.changed:
            assert "b" in turns.waiting  # still waiting while a holds the terminal
    thread.join(WAIT)
    assert order == ["a", "b"]


def test_inputs_outside_an_announced_round_still_take_the_terminal_one_at_a_time() -> None:
    turns = Turns()
    entered = threading.Event()

    def other() -> None:
        with turns.turn("y"):
            entered.set()

    with turns.turn("x"):
        thread = threading.Thread(target=other)
        thread.start()
        wait_until_waiting(turns, "y")
        assert not entered.is_set()
    thread.join(WAIT)
    assert entered.is_set()


def test_cancelling_an_input_that_waits_for_its_turn_ends_the_wait() -> None:
    turns = Turns()
    turns.begin_round(["a", "b"])
    cancel = threading.Event()
    outcome: list[BaseException] = []

    def later() -> None:
        try:
            with turns.turn("b", cancel):
                pass
        except InputAbandoned as exc:
            outcome.append(exc)

    with turns.turn("a"):
        thread = threading.Thread(target=later)
        thread.start()
        wait_until_waiting(turns, "b")
        TurnClock(turns).cancel(cancel)  # what the client does when it abandons input b
        thread.join(WAIT)
        assert [exc.key for exc in outcome] == ["b"]  # type: ignore[attr-defined]


def test_a_failed_input_leaves_the_later_ones_waiting_for_cancellation() -> None:
    turns = Turns()
    turns.begin_round(["a", "b"])
    cancel = threading.Event()
    outcome: list[str] = []

    def later() -> None:
        try:
            with turns.turn("b", cancel):
                outcome.append("asked")
        except InputAbandoned:
            outcome.append("abandoned")

    thread = threading.Thread(target=later)
    thread.start()
    wait_until_waiting(turns, "b")
    with pytest.raises(ValueError), turns.turn("a"):
        raise ValueError("bad answer")
    with turns.changed:
        assert "b" in turns.waiting  # its turn did not come
    TurnClock(turns).cancel(cancel)
    thread.join(WAIT)
    assert outcome == ["abandoned"]


def test_a_new_round_releases_inputs_still_waiting_from_the_last_one() -> None:
    turns = Turns()
    turns.begin_round(["a", "b"])
    outcome: list[str] = []

    def later() -> None:
        try:
            with turns.turn("b"):
                outcome.append("asked")
        except InputAbandoned:
            outcome.append("abandoned")

    with turns.turn("a"):
        thread = threading.Thread(target=later)
        thread.start()
        wait_until_waiting(turns, "b")
        turns.begin_round(["c"])
        thread.join(WAIT)
    assert outcome == ["abandoned"]


def test_cancelling_an_input_gives_up_a_read_that_never_ends() -> None:
    turns = Turns()
    started, release = threading.Event(), threading.Event()
    cancel = threading.Event()

    def read_forever() -> str:  # a terminal nobody types on
        started.set()
        release.wait()
        return "too late\n"

    outcome: list[BaseException] = []

    def prompt() -> None:
        try:
            turns.read("k", read_forever, cancel)
        except InputAbandoned as exc:
            outcome.append(exc)

    thread = threading.Thread(target=prompt)
    thread.start()
    assert started.wait(WAIT)
    TurnClock(turns).cancel(cancel)
    thread.join(WAIT)
    assert not thread.is_alive() and len(outcome) == 1
    release.set()  # let the reader thread end with the test


def test_a_read_passes_its_line_or_its_error_on() -> None:
    turns = Turns()
    cancel = threading.Event()
    assert turns.read("k", lambda: "typed\n", cancel) == "typed\n"

    def end_of_input() -> str:
        raise EOFError

    with pytest.raises(EOFError):
        turns.read("k", end_of_input, cancel)
    assert turns.read("k", lambda: "here\n", None) == "here\n"


def test_closing_abandons_inputs_the_client_never_cancelled() -> None:
    # An interrupt can cut the client's bookkeeping short, so an input may never get its
    # cancellation; once the operation is over, nothing may keep waiting on the terminal.
    turns = Turns()
    turns.begin_round(["a", "b"])
    started, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def read_forever() -> str:
        started.set()
        release.wait()
        return "too late\n"

    def first() -> None:
        try:
            with turns.turn("a", threading.Event()):
                turns.read("a", read_forever, threading.Event())
        except InputAbandoned:
            outcome.append("a abandoned")

    def second() -> None:
        try:
            with turns.turn("b", threading.Event()):
                outcome.append("b asked")
        except InputAbandoned:
            outcome.append("b abandoned")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert started.wait(WAIT)
    wait_until_waiting(turns, "b")
    turns.close()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(outcome) == ["a abandoned", "b abandoned"]
    with pytest.raises(InputAbandoned), turns.turn("c"):
        pass  # after close, no input gets the terminal
    release.set()
