"""torch.library custom ops (namespace `liger`) over the C ABI; importing registers them."""
from . import glu, losses, norms, rope  # noqa: F401
