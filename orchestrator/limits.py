"""The bounds every input is held to (docs/spec.md#limits): a file, a YAML document or a
grid too big to handle is refused before it is handled, and every number a cell takes is
bounded by what can run and what the registry can store (PostgreSQL's ``INTEGER`` is
32-bit), so every spec ends in seconds, accepted or refused with a located message."""

from __future__ import annotations

import math

from orchestrator.errors import Problem

# --- reading YAML (specs and `kappa train` configs) -----------------------------------------
MAX_FILE_BYTES = 1024 * 1024
"""A spec or cell config file: composing 1 MiB of YAML takes about a second."""
MAX_YAML_NODES = 100_000
"""Values, keys and containers in one document, counted with every alias expanded."""
MAX_YAML_DEPTH = 64
"""Nesting of mappings and lists (a spec needs about 6)."""

# --- specs ---------------------------------------------------------------------------------
MAX_AXES = 64
"""Axes of one spec (and labels, zip groups); every check over pairs of axes stays cheap."""
MAX_PROBLEMS = 100
"""Problems reported at once per check; the rest are counted, not described."""
MAX_SUGGESTION_CANDIDATES = 1000
"""A "did you mean" is looked for among at most this many names."""

# --- command-line overrides (checked before Hydra's parser sees them) ------------------------
MAX_OVERRIDES = 1000
"""Overrides on one command line."""
MAX_OVERRIDE_CHARS = 10_000
"""Characters of one override."""
MAX_OVERRIDES_CHARS = 100_000
"""Characters of all the overrides together."""
MAX_OVERRIDE_ITEMS = 1000
"""Items of lists and mappings (counted by their commas) in all the overrides together: Hydra's
parser takes time growing with the square of a list's length (1,000 items: 0.3 s; 20,000: 79 s)."""
MAX_OVERRIDE_NESTING = 32
"""Lists, mappings and calls open at once in one override."""
MAX_OVERRIDE_KEY_PARTS = 32
"""Dotted parts of one override's key (``axes.kappa.k5.reward_correct`` has 4)."""
MAX_NUMBER_DIGITS = 100
"""Digits of one number in an override (Python reads no integer of more than 4,300)."""

# --- grids ---------------------------------------------------------------------------------
DEFAULT_MAX_CELLS = 100_000
"""Most cells a grid may have unless ``KAPPA_MAX_CELLS`` allows more."""
INT32_MAX = 2**31 - 1
"""The registry's integer columns (cell index, retries, steps) are 32-bit on PostgreSQL."""

# --- numbers a cell takes -------------------------------------------------------------------
MAX_RETRIES = 100
MAX_STEPS = 10_000_000
"""RL steps, warm-start steps, and every "every N steps" interval."""
MAX_SEED = 2**32 - 1
"""NumPy's and most samplers' seed range (0 .. 2^32 - 1)."""
MAX_GROUP_SIZE = 4096
"""Responses per prompt (group size, eval/val samples)."""
MAX_BATCH = 65_536
"""Prompts per step, per optimizer step, per micro batch, per warm-start batch."""
MAX_EVAL_PROMPTS = 1_000_000
MAX_TOKENS = 1_048_576
"""Prompt / response lengths and length buffers (2^20 tokens)."""
MAX_ATTEMPTS = 1000
"""Generation rounds per step, PPO epochs."""
MAX_GPUS_PER_NODE = 1024
MAX_NODES = 4096
MAX_GPUS_PER_CELL = 4096
MAX_CPUS_PER_NODE = 4096
MAX_HOURS = 10_000.0
"""Expected hours of one cell (over a year)."""

# --- numbers that scale a reward or a loss --------------------------------------------------
MAX_SCALE = 1e6
"""The largest |reward|, loss coefficient (``kl_coef``, ``entropy_coef``, the overlong penalty
factor), clip ratio or temperature. Training computes in float32: its largest value is about 3.4e38
(1e39 is already infinite, so such a setting ends in NaN at step 1) and it holds about 7 significant
digits. A scale of 1e6 keeps its squares (a reward's variance, 1e12) and its sums over a batch
(times 65,536 prompts x 4,096 responses, 2.7e8) far from overflow, while an O(1) term beside it
keeps at least one digit; anything larger only loses the rest of the loss in rounding."""

# --- command-line numbers -------------------------------------------------------------------
MAX_PARALLEL = 1_000_000
"""Jobs one executor keeps running or pending at once (``max_parallel``, ``max_pending``)."""
MAX_WAIT_S = 86_400.0
"""A timeout, grace period or wait an option sets: a day (``time.sleep``, a lock's
timeout and ``select`` overflow a C ``time_t`` long before ``1e39`` seconds)."""
MAX_PORT = 65_535


def number_problem(value: float, option: str, low: float, high: float | None = None, *,
                   low_open: bool = False, fix: str | None = None) -> Problem | None:
    """The problem with ``value`` unless it is a finite number in ``low .. high`` (above
    ``low`` when ``low_open``; no upper bound when ``high`` is None); ``option`` names it
    (a command-line option, e.g. ``--timeout``)."""
    above = value > low if low_open else value >= low
    if math.isfinite(value) and above and (high is None or value <= high):
        return None
    start = f"> {low:g}" if low_open else f"{low:g}"
    allowed = (f"{start} .. {high:,g}" if high is not None
               else f"{start if low_open else f'>= {low:g}'}, finite")
    return Problem(option, "not a number in the allowed range", found=repr(value),
                   allowed=allowed, fix=fix)


def more_problems(count: int | None = None) -> Problem:
    """The last entry of a list cut at :data:`MAX_PROBLEMS`: that (and how many) more exist."""
    many = f"{count:,} more problem(s)" if count is not None else "more problems"
    return Problem("", f"... and {many} not listed (the first {MAX_PROBLEMS} are)",
                   fix="fix the ones above first")
