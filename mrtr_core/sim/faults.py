"""What can go wrong in a simulated run, and how often.

Every field is a rate: the probability that one message, request, flow or handler is hit.
:meth:`Faults.drawn` picks every rate from a seed, so a campaign over many seeds also covers
many mixes of faults.
"""

from __future__ import annotations

import attrs

from mrtr_core.sim.prng import Prng

__all__ = ["FAULT_NAMES", "Faults"]


def _rate(_: object, attribute: attrs.Attribute[float], value: object) -> None:
    # A bool is no rate (True would read as "always"); ``not 0 <= nan`` refuses nan too.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be a rate in [0, 1], got {value!r}")


@attrs.frozen(kw_only=True)
class Faults:
    """Fault rates of one run (all 0: a perfect network and well-behaved peers).

    Attributes:
        loss: A message is lost (the client's leg timeout ends the flow).
        duplicate: A message is delivered twice (a retry may arrive at two instances).
        delay: A message is held up for a long time, sometimes past the leg timeout.
        reorder: A message is held back a little, so later messages overtake it.
        crash: An instance crashes after handling a request (sometimes losing the reply)
            and restarts empty; the balancer routes around it while it is down.
        skew: An instance's clock is off by up to the codec's skew tolerance (per instance).
        rotate: A key rotation starts when a flow starts (distribute, activate, retire).
        expire: A person thinks longer than the state's lifetime, so the state expires
            in flight and the server must refuse it.
        handler: An input handler misbehaves: declines, cancels, fails, is too slow, or the
            caller gives up on the flow.
        hostile_server: A flow is sent to a hostile server (input_required forever, or
            until the flow's time budget is spent; state-only rounds in a hot loop,
            oversized state, unknown kinds, invalid result types).
        hostile_client: A flow's client also sends hostile probes: tampered, replayed,
            swapped, foreign-principal, expired state and malformed answers.
    """

    loss: float = attrs.field(default=0.0, validator=_rate)
    duplicate: float = attrs.field(default=0.0, validator=_rate)
    delay: float = attrs.field(default=0.0, validator=_rate)
    reorder: float = attrs.field(default=0.0, validator=_rate)
    crash: float = attrs.field(default=0.0, validator=_rate)
    skew: float = attrs.field(default=0.0, validator=_rate)
    rotate: float = attrs.field(default=0.0, validator=_rate)
    expire: float = attrs.field(default=0.0, validator=_rate)
    handler: float = attrs.field(default=0.0, validator=_rate)
    hostile_server: float = attrs.field(default=0.0, validator=_rate)
    hostile_client: float = attrs.field(default=0.0, validator=_rate)

    @classmethod
    def none(cls) -> Faults:
        """No faults at all."""
        return cls()

    @classmethod
    def all(cls) -> Faults:
        """Every fault on, at rates high enough to hit often and low enough that most
        flows still finish."""
        return cls(
            loss=0.01, duplicate=0.05, delay=0.02, reorder=0.1, crash=0.01, skew=1.0,
            rotate=0.002, expire=0.01, handler=0.08, hostile_server=0.05,
            hostile_client=0.05,
        )

    @classmethod
    def drawn(cls, seed: int) -> Faults:
        """Every fault on, each at a rate drawn from ``seed`` (up to twice :meth:`all`)."""
        prng = Prng(seed).fork("faults")
        base = cls.all()
        return cls(**{
            name: min(1.0, prng.uniform(0.25, 2.0) * getattr(base, name)) for name in FAULT_NAMES
        })

    @classmethod
    def parse(cls, text: str) -> Faults:
        """Read ``"all"``, ``"none"``, ``"drawn:SEED"`` or ``"loss=0.1,crash=0.02"``.

        Raises:
            ValueError: an unknown fault name, a name given twice or a rate outside
                ``[0, 1]``.
        """
        text = text.strip()
        if text in ("", "none"):
            return cls.none()
        if text == "all":
            return cls.all()
        if text.startswith("drawn:"):
            seed = text.removeprefix("drawn:").strip()
            try:
                return cls.drawn(int(seed))
            except ValueError:
                raise ValueError(f"drawn: needs an integer seed, got {seed!r}") from None
        rates: dict[str, float] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            name = name.strip().replace("-", "_")
            if name not in FAULT_NAMES:
                raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULT_NAMES)}")
            if name in rates:
                raise ValueError(f"{name} is named twice")
            try:
                rates[name] = float(value) if sep else 1.0
            except ValueError:
                raise ValueError(f"{name} needs a rate in [0, 1], got {value.strip()!r}") from None
        return cls(**rates)

    def without(self, name: str) -> Faults:
        """The same faults with ``name`` turned off."""
        return attrs.evolve(self, **{name: 0.0})

    def active(self) -> tuple[str, ...]:
        """Names of the faults with a non-zero rate."""
        return tuple(name for name in FAULT_NAMES if getattr(self, name) > 0.0)

    def spec(self) -> str:
        """The text :meth:`parse` reads back as exactly these rates, e.g.
        ``loss=0.013998309914429392,crash=0.02`` (``none`` when nothing is on).

        Unlike :meth:`describe`, no rate is rounded: a rate drawn from a seed
        (:meth:`drawn`) that came back rounded would change which draws hit, and a
        reproduction would run another run.
        """
        active = self.active()
        if not active:
            return "none"
        return ",".join(f"{name}={getattr(self, name)!r}" for name in active)

    def describe(self) -> str:
        """One line, e.g. ``loss=0.01 duplicate=0.05`` (``none`` when nothing is on)."""
        active = self.active()
        if not active:
            return "none"
        return " ".join(f"{name}={getattr(self, name):.4g}" for name in active)


FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in attrs.fields(Faults))
