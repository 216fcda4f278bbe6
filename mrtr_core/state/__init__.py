"""``requestState`` protection: key ring, binding, sealing codec, replay guard protocol.

``requestState`` is attacker-controlled (S9). Tokens are sealed with AES-256-GCM (or
signed with HMAC-SHA256), bound to the request, the principal and the audience, expire
shortly, and can be made single-use with a replay guard (S10-S12; digest §2.10). Every
refusal is the same JSON-RPC ``-32602`` on the wire; the reason stays on the exception.
"""

from mrtr_core.state.binding import (
    Binding,
    canonical_json,
    digest_arguments,
    digest_json,
    forget_bindings,
)
from mrtr_core.state.codec import (
    DEFAULT_MAX_STATE_BYTES,
    NonceSource,
    OpenedState,
    StateCodec,
    StateMode,
)
from mrtr_core.state.errors import (
    REJECTION_REASONS,
    STATE_REJECTED_DATA,
    STATE_REJECTED_MESSAGE,
    RejectionReason,
    StateRejectedError,
)
from mrtr_core.state.keys import MIN_KEY_BYTES, KeyRing
from mrtr_core.state.replay import MemoryReplayGuard, ReplayGuard, claim_verdict

__all__ = [
    "DEFAULT_MAX_STATE_BYTES",
    "MIN_KEY_BYTES",
    "REJECTION_REASONS",
    "STATE_REJECTED_DATA",
    "STATE_REJECTED_MESSAGE",
    "Binding",
    "KeyRing",
    "MemoryReplayGuard",
    "NonceSource",
    "OpenedState",
    "RejectionReason",
    "ReplayGuard",
    "StateCodec",
    "StateMode",
    "StateRejectedError",
    "canonical_json",
    "claim_verdict",
    "digest_arguments",
    "digest_json",
    "forget_bindings",
]
