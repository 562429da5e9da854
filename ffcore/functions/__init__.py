"""The FCALL table: every function the engine calls, declared once (one builder per function).

Builders live in one module per concern and register in `TABLE` through `@fn`; each returns a `Call`
(function name, KEYS, ARGV in the contract's order, reply parser). `Backend.call()` runs it, and error
replies become the typed exceptions of `ffcore.errors` in the parsers here, never in callers.
"""

from .base import TABLE, Arg, Call, Parser, Reply, fn, opt, parse_bare, parse_status, parse_string
from .budget import *  # noqa: F403
from .fastpath import *  # noqa: F403
from .fastpath import Claimed, Claims
from .flow import *  # noqa: F403
from .lifecycle import *  # noqa: F403
from .lifecycle import BLOCK_TARGETS, CoreRefs, Fence
from .schedule import *  # noqa: F403
from .spend import *  # noqa: F403
from .stream import *  # noqa: F403
from .suspension import *  # noqa: F403
from .tags import *  # noqa: F403

__all__ = ["TABLE", "Arg", "BLOCK_TARGETS", "Call", "Claimed", "Claims", "CoreRefs", "Fence", "Parser", "Reply",
           "fn", "opt", "parse_bare", "parse_status", "parse_string"]
