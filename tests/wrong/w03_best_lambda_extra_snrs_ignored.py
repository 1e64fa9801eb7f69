"""03.3 mistake (class C, one-sided check): best_lambda refuses a list of SNRs that is SHORTER than the λ grid
("an SNR is missing") but zips a longer one, silently dropping the extra SNRs.

best_lambda([0.1, 0.2], [1.0, 2.0, 9.0]) returns 0.2 instead of the docstring's ValueError for lists of different
lengths.
"""


def best_lambda(lambdas, snrs):
    if not lambdas or len(snrs) < len(lambdas):
        raise ValueError("need one SNR per λ")
    best_lam, best_snr = None, None
    for lam, snr in zip(lambdas, snrs):
        if best_snr is None or snr > best_snr:
            best_lam, best_snr = lam, snr
    return best_lam


OVERRIDES = {"best_lambda": best_lambda}
LOSES = ("03.3",)
