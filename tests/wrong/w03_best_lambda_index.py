"""03.3 mistake: best_lambda returns the position of the largest SNR (an index) instead of the λ at that position.

On the grid 0, 0.05, …, 1 the answer 8 would read as "λ = 8".
"""


def best_lambda(lambdas, snrs):
    return max(range(len(snrs)), key=lambda i: snrs[i])


OVERRIDES = {"best_lambda": best_lambda}
LOSES = ("03.3",)
