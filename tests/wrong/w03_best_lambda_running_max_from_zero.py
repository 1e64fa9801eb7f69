"""03.3 mistake: a running maximum that starts at 0, so when every SNR is negative the first λ is returned.

best_lambda([0, 0.5, 1], [-3, -1, -2]) gives 0.0 instead of 0.5.
"""


def best_lambda(lambdas, snrs):
    if len(lambdas) != len(snrs) or not snrs:
        raise ValueError("need one SNR per λ")
    best, best_snr = lambdas[0], 0.0
    for lam, snr in zip(lambdas, snrs):
        if snr > best_snr:
            best, best_snr = lam, snr
    return best


OVERRIDES = {"best_lambda": best_lambda}
LOSES = ("03.3",)
