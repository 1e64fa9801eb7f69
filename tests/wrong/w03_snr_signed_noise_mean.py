"""03.1 mistake: the noise floor as the signed mean of the other weights, mean_{j≠s} w_j.

For a DIFF row that mean is fixed by the row sum, (1 − λ − w_s)/(N − 1): negative and positive noise weights cancel,
so it reports a tiny (or zero, or negative) floor however large the noise weights are.
"""


def signal_to_noise(weights, signal_index):
    others = [w for j, w in enumerate(weights) if j != signal_index]
    return weights[signal_index] / (sum(others) / len(others))


OVERRIDES = {"signal_to_noise": signal_to_noise}
LOSES = ("03.1",)
