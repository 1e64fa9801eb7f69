"""Just enough linear algebra for attention, on lists of rows."""

from __future__ import annotations

from typing import Sequence

Vector = list[float]
Matrix = list[list[float]]


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """a · b for two equal-length vectors."""
    if len(a) != len(b):
        raise ValueError(f"dot needs equal lengths (got {len(a)} and {len(b)})")
    return sum(x * y for x, y in zip(a, b))


def transpose(m: Sequence[Sequence[float]]) -> Matrix:
    """(n, p) -> (p, n)."""
    return [list(col) for col in zip(*m)]


def matmul(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Matrix:
    """(n, p) @ (p, r) -> (n, r)."""
    if a and b and len(a[0]) != len(b):
        raise ValueError(f"matmul shapes do not chain: (., {len(a[0])}) @ ({len(b)}, .)")
    columns = transpose(b)  # iterate over columns of b as contiguous lists: one transpose, then plain dot products
    return [[dot(row, col) for col in columns] for row in a]


def width(m: Sequence[Sequence[float]]) -> int:
    """Number of columns of a non-empty matrix whose rows all have the same length."""
    if not m:
        raise ValueError("expected a non-empty matrix")
    n = len(m[0])
    if any(len(row) != n for row in m):
        raise ValueError("matrix rows have different lengths")
    return n
