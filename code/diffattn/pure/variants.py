"""Every attention variant the course builds, declared once: what it is called, which torch module builds it, and the
arithmetic lessons 04 and 12 count it with (stdlib only). Everything that differs between variants is read from here.

Two words (CONTRIBUTING.md, "Layers"):

    kind      an attention module of its own (`GPTConfig.attention`): baseline, diff_v1, diff_v2
    variant   a model lessons 07-13 compare (`TrainConfig.variant`, `--variant`): every kind, plus variants built from a
              kind with more heads, e.g. baseline_2h, the baseline with twice the query heads (V2's same-width peer)

Sizes follow lesson 04: every variant is sized from one baseline layer of `heads` query heads (h) of width `head_dim`
(d) over `kv_heads` KV heads (h_kv), hidden size D. A derived variant is its kind's arithmetic at
(heads_factor·h, kv_factor·h_kv), checked against the baseline's layout.

Adding a variant (CONTRIBUTING.md, "Add a variant"): `register(VariantSpec(...))`. A kind names its torch module as
"package.module:Class"; the class's `from_config(config, depth)` builds it from a GPTConfig (named, not imported,
so that this module stays free of torch; diffattn.model.gpt imports it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from diffattn.core.errors import ConfigError, require

COMPONENTS = ("q_proj", "k_proj", "v_proj", "o_proj", "lambda_proj", "lambda_vectors", "subln")
# How V1's maps reach the kernel: two calls with a 2d value (the official multihead_flashdiff_1), four calls with the
# value split (multihead_flashdiff_2), or lesson 12's fused CPU kernel. Every other variant makes one kind of call.
KERNELS = ("two_call", "four_call", "fused")
REFERENCE = "baseline"  # what every "− baseline" column and ratio is measured against


class CacheLayout(NamedTuple):
    """What one layer stores per token: kv_heads heads of key_width keys and value_width values."""

    kv_heads: int
    key_width: int
    value_width: int


class KernelCall(NamedTuple):
    """One attention-kernel call: query_heads maps over kv_heads cached heads of the given key and value widths."""

    query_heads: int
    kv_heads: int
    key_width: int
    value_width: int


Components = Callable[[int, int, int, int], dict]  # (hidden, heads, head_dim, kv_heads) → weights by COMPONENTS name


@dataclass(frozen=True)
class VariantSpec:
    """One variant. A kind fills `module` and the three arithmetic functions; a derived variant names its `kind` and
    multiplies the baseline layout's heads instead."""

    name: str
    label: str  # in tables and figures
    colour: str = ""  # in figures (a matplotlib colour); "": one from matplotlib's cycle by registration order
    kind: str = ""  # "" for a kind; else the kind a derived variant is built from
    module: str = ""  # kind: "package.module:Class" whose Class.from_config(config, depth) builds the torch module
    heads_factor: int = 1  # derived: its query heads per baseline query head
    kv_factor: int = 1  # derived: its KV heads per baseline KV head
    components: Components | None = None  # kind: one attention module's weights
    cache: Callable[[int, int, int], CacheLayout] | None = None  # kind: (heads, head_dim, kv_heads) → per-token cache
    calls: Callable[[int, int, int, str], tuple[KernelCall, ...]] | None = None  # kind: + kernel → one layer's calls
    # What the kind's module does (a derived variant takes them from its kind: read them through `base`)
    paired_heads: bool = False  # V1: h/2 heads of two d-wide maps and one 2d value: even counts, h·d = D always
    maps_per_head: int = 1  # attention maps per GPTConfig query head (V2: 2, each pair subtracted into one head)
    kernels: tuple[str, ...] = ("two_call",)  # the kernel paths (KERNELS) that can run it; the first by default
    lambda_kind: str = ""  # "" none; "per_layer" one learned λ per layer (V1); "gate" σ(λ) per token and head (V2)
    # the rows of lessons 04 and 12's FLOP and decode tables: row → (kernel, label); default one row, the variant's
    kernel_rows: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.name.isidentifier(), f"a variant's name is an identifier (got {self.name!r})")
        require((self.kind == "") == bool(self.module and self.components and self.cache and self.calls),
                f"variant {self.name}: a kind has a module and its arithmetic, a derived variant names its kind")
        require(self.heads_factor >= 1 and self.kv_factor >= 1, f"variant {self.name}: head factors are >= 1")
        own = (self.paired_heads, self.maps_per_head, self.kernels, self.lambda_kind)
        require(not self.kind or own == (False, 1, ("two_call",), ""),
                f"variant {self.name}: paired_heads, maps_per_head, kernels and lambda_kind are its kind's")

    @property
    def kind_name(self) -> str:
        return self.kind or self.name

    @property
    def base(self) -> VariantSpec:
        """The kind whose module and arithmetic this variant uses (itself, for a kind)."""
        return get(self.kind_name)

    def rows(self) -> dict[str, tuple[str, str]]:
        """Rows of the FLOP and decode tables: row → (kernel, label); V1 has one per official kernel path."""
        return dict(self.kernel_rows) or {self.name: ("two_call", self.label)}


_REGISTRY: dict[str, VariantSpec] = {}


class Names(Sequence):
    """A live, ordered view of the registered names that satisfy `keep`: `in`, iteration, len, indexing."""

    def __init__(self, keep: Callable[[VariantSpec], bool]):
        self._keep = keep

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, spec in _REGISTRY.items() if self._keep(spec))

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(self._names())


class Labels(Mapping):
    """name → label for every registered variant (live)."""

    def __getitem__(self, name: str) -> str:
        return _REGISTRY[name].label

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)


VARIANTS = Names(lambda spec: True)
ATTENTION = Names(lambda spec: not spec.kind)  # the kinds
LABELS = Labels()


def colour(name: str) -> str:
    """The variant's colour in every figure: its own, or matplotlib's cycle colour of its place in the registry."""
    spec = get(name)
    return spec.colour or f"C{list(_REGISTRY).index(name) % 10}"


def fits(name: str, heads: int, kv_heads: int) -> bool:
    """Whether `name` can be built on a baseline of `heads` query heads over `kv_heads` KV heads."""
    spec = get(name)
    ok = (heads * spec.heads_factor) % (kv_heads * spec.kv_factor) == 0
    return ok and (not spec.base.paired_heads or (heads % 2 == 0 and kv_heads % 2 == 0))


def get(name: str) -> VariantSpec:
    """The variant called `name`; one-line ConfigError naming the registered ones otherwise."""
    if name not in _REGISTRY:
        raise ConfigError(f"variant must be one of {', '.join(_REGISTRY)} (got {name!r})")
    return _REGISTRY[name]


def register(spec: VariantSpec) -> VariantSpec:
    require(spec.name not in _REGISTRY, f"a variant called {spec.name} is already registered")
    require(not spec.kind or (spec.kind in _REGISTRY and not _REGISTRY[spec.kind].kind),
            f"variant {spec.name}: its kind {spec.kind!r} must be a registered kind")
    _REGISTRY[spec.name] = spec
    return spec


@contextlib.contextmanager
def registered(spec: VariantSpec) -> Iterator[VariantSpec]:
    """`register` for the length of a with-block (a test's or a notebook's own variant). It lives in this process
    only: runs trained in a pool of worker processes (`diffattn study`, `sweep`, `warmstart`) need it registered in
    pure/variants.py itself."""
    register(spec)
    try:
        yield spec
    finally:
        del _REGISTRY[spec.name]


class _Rows(Mapping):
    """Every row of the FLOP and decode tables (live): row → (variant, kernel)."""

    def _rows(self) -> dict[str, tuple[str, str]]:
        return {row: (spec.name, kernel) for spec in _REGISTRY.values() for row, (kernel, _) in spec.rows().items()}

    def __getitem__(self, row: str) -> tuple[str, str]:
        return self._rows()[row]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


KERNEL_ROWS = _Rows()


def row_label(row: str) -> str:
    """A table row's label: the variant's, or its kernel path's (V1 2-call)."""
    variant, _ = KERNEL_ROWS[row]
    return _REGISTRY[variant].rows()[row][1]


# ------------------------------------------------------------------------------------- the three kinds' arithmetic


def _baseline_components(hidden: int, heads: int, head_dim: int, kv_heads: int) -> dict:
    return {"q_proj": hidden * heads * head_dim, "k_proj": hidden * kv_heads * head_dim,
            "v_proj": hidden * kv_heads * head_dim, "o_proj": heads * head_dim * hidden}


def _v1_components(hidden: int, heads: int, head_dim: int, kv_heads: int) -> dict:
    # h/2 heads × 2 maps × d = h·d queries (the baseline's); K: h_kv/2 heads of 2d = h_kv·d; V the same;
    # W_O reads h·d → D
    return {**_baseline_components(hidden, heads, head_dim, kv_heads),
            "lambda_vectors": 4 * head_dim,  # λ_q1, λ_k1, λ_q2, λ_k2 ∈ R^d: one λ per layer, shared by all heads
            "subln": 2 * head_dim}  # RMSNorm(2d) weight, one (2d,) vector shared by all heads


def _v2_components(hidden: int, heads: int, head_dim: int, kv_heads: int) -> dict:
    # 2h query heads; each pair is subtracted before W_O, so W_O reads h·d (not 2h·d as the 2h baseline's does)
    return {**_baseline_components(hidden, heads, head_dim, kv_heads), "q_proj": hidden * 2 * heads * head_dim,
            "lambda_proj": hidden * heads}  # W_λ: D → h: λ_t = W_λ x_t, and σ(λ_t) per token and output head


def _plain_cache(heads: int, head_dim: int, kv_heads: int) -> CacheLayout:
    return CacheLayout(kv_heads, head_dim, head_dim)  # extra query heads never add KV heads


def _v1_cache(heads: int, head_dim: int, kv_heads: int) -> CacheLayout:
    return CacheLayout(kv_heads // 2, 2 * head_dim, 2 * head_dim)  # h_kv/2 heads: keys k1‖k2 (2d), one 2d value


def _baseline_calls(heads: int, head_dim: int, kv_heads: int, kernel: str) -> tuple[KernelCall, ...]:
    return (KernelCall(heads, kv_heads, head_dim, head_dim),)


def _v2_calls(heads: int, head_dim: int, kv_heads: int, kernel: str) -> tuple[KernelCall, ...]:
    return (KernelCall(2 * heads, kv_heads, head_dim, head_dim),)  # one GQA call with 2h query heads, split after


def _v1_calls(heads: int, head_dim: int, kv_heads: int, kernel: str) -> tuple[KernelCall, ...]:
    pairs, kv_pairs, d = heads // 2, kv_heads // 2, head_dim
    if kernel == "two_call":  # multihead_flashdiff_1: attn(q1, k1, v) and attn(q2, k2, v) with v 2d wide
        return (KernelCall(pairs, kv_pairs, d, 2 * d),) * 2
    if kernel == "fused":  # lesson 12's kernel: map 2 scores its keys, and its P joins map 1's before V. Training and
        # prefill only: no decode step runs it, so its decode bytes are what a fused decode kernel would read
        return KernelCall(pairs, kv_pairs, d, 2 * d), KernelCall(pairs, kv_pairs, d, 0)
    return (KernelCall(pairs, kv_pairs, d, d),) * 4  # multihead_flashdiff_2: v split in d halves, each map run twice


register(VariantSpec("baseline", "baseline", colour="tab:blue", module="diffattn.nn.attention:MultiheadAttention",
                     components=_baseline_components, cache=_plain_cache, calls=_baseline_calls))
register(VariantSpec("baseline_2h", "2h heads", colour="tab:cyan", kind="baseline", heads_factor=2))
register(VariantSpec("diff_v1", "DIFF V1", colour="tab:orange", module="diffattn.nn.attention:DiffAttentionV1",
                     components=_v1_components, cache=_v1_cache, calls=_v1_calls, paired_heads=True, kernels=KERNELS,
                     lambda_kind="per_layer",
                     kernel_rows={"diff_v1_2call": ("two_call", "V1 2-call"),
                                  "diff_v1_4call": ("four_call", "V1 4-call")}))
register(VariantSpec("diff_v2", "DIFF V2", colour="tab:green", module="diffattn.nn.attention:DiffAttentionV2",
                     components=_v2_components, cache=_plain_cache, calls=_v2_calls, maps_per_head=2,
                     lambda_kind="gate"))
# Lessons 09-11 evaluate one shipped checkpoint per kind (outputs/models/): these three, whatever else is registered
EVALUATED = ("baseline", "diff_v1", "diff_v2")
