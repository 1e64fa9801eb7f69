"""`diffattn accounting --hidden D --heads H --head-dim d --layers L ...`: parameters, KV cache and FLOPs of every
variant (lesson 04; stdlib)."""

from __future__ import annotations

import argparse
import json

NAME = "accounting"


def add_parser(sub) -> argparse.ArgumentParser:
    acc = sub.add_parser(NAME, help="parameters, KV cache and FLOPs of baseline / DIFF V1 / DIFF V2 (lesson 04)")
    acc.add_argument("--hidden", type=int, required=True, help="d_model")
    acc.add_argument("--heads", type=int, required=True, help="baseline query heads h_base")
    acc.add_argument("--head-dim", type=int, required=True, help="d, the query/key head width")
    acc.add_argument("--layers", type=int, required=True, help="number of transformer layers L")
    acc.add_argument("--kv-heads", type=int, default=None, help="baseline KV heads (default: = heads, i.e. MHA)")
    acc.add_argument("--ffn", type=int, default=None, help="SwiGLU hidden width (default: 8/3·hidden rounded up to a multiple of 256, as LLaMA)")
    acc.add_argument("--vocab", type=int, default=None, help="vocabulary size for whole-model counts (default: none)")
    acc.add_argument("--context", type=int, default=131072, help="context length for KV-cache and FLOP columns")
    acc.add_argument("--bytes", type=int, default=2, help="bytes per cached value (2 = bf16)")
    acc.add_argument("--json", action="store_true", help="print the table as JSON instead of text")
    return acc


def run(args: argparse.Namespace) -> int:
    from diffattn.pure import accounting

    config = accounting.ModelConfig(hidden=args.hidden, heads=args.heads, head_dim=args.head_dim, layers=args.layers,
                                    kv_heads=args.kv_heads, ffn=args.ffn, vocab=args.vocab)
    table = accounting.accounting_table(config, context=args.context, bytes_per_value=args.bytes)
    print(json.dumps(table, indent=1) if args.json else accounting.format_table(table))
    return 0
