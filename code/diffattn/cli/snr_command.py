"""`diffattn snr [--n N --signal μ --noise τ --rho ρ --lam λ --variant v1|v2]`: softmax against DIFF on lesson 03's
model at a setting of your choice (stdlib)."""

from __future__ import annotations

import argparse
import json

NAME = "snr"


def add_parser(sub) -> argparse.ArgumentParser:
    snr = sub.add_parser(NAME, help="softmax vs DIFF on lesson 03's model at a setting of your choice (stdlib)",
                         description="Softmax vs DIFF on lesson 03's synthetic row: one signal token, N − 1 noise "
                                     "tokens, medians over seeded trials.")
    snr.add_argument("--n", type=int, default=1024, help="context length N, >= 2 (default: %(default)s)")
    snr.add_argument("--signal", type=float, default=8.0,
                     help="μ, the signal's logit above the noise mean; finite, and within about 700 of the noise "
                          "logits so that float64 softmax resolves it (default: %(default)s)")
    snr.add_argument("--noise", type=float, default=1.5,
                     help="τ, the noise std: spread of the irrelevant logits, finite and >= 0 (default: %(default)s)")
    snr.add_argument("--rho", type=float, default=0.9,
                     help="ρ, correlation of the two maps' noise, in [-1, 1] (default: %(default)s)")
    snr.add_argument("--lam", type=float, default=0.8,
                     help="V1: λ, any finite number; V2: the coefficient σ(λ_t) (σ = sigmoid), strictly in (0, 1) "
                          "(default: %(default)s)")
    snr.add_argument("--variant", choices=["v1", "v2"], default="v1",
                     help="v1: W = A1 − λ·A2; v2: W = A1 − σ(λ_t)·A2 (default: %(default)s)")
    snr.add_argument("--trials", type=int, default=16, help="seeded trials, >= 1 (default: %(default)s)")
    snr.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    return snr


def run(args: argparse.Namespace) -> int:
    from diffattn.pure.trials import format_setting, try_setting

    result = try_setting(args.n, args.signal, args.noise, args.rho, args.lam, args.variant, args.trials)
    print(json.dumps(result, indent=1) if args.json else format_setting(result))
    return 0
