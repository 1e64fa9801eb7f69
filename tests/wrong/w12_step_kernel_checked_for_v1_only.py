"""12.1 mistake (class B, lazy validation): v1_kernel is checked only where it is used, for diff_v1. The docstring
asks for "two_call" or "four_call" whatever the variant, so decode_step(config, "baseline", ..., v1_kernel="one_call")
must raise, not quietly count the baseline."""

from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    if variant != "diff_v1":
        v1_kernel = "two_call"  # "not used here", so not looked at
    return reference(config, variant, context, batch, bytes_per_value, v1_kernel)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
