"""kbsim: Python side of the kbsim co-simulation server (`kbsim serve`, docs/cosim.md)."""
from .client import Client, ServerError, PROTOCOL_VERSION, OP, STATUS

__all__ = ["Client", "ServerError", "PROTOCOL_VERSION", "OP", "STATUS"]
