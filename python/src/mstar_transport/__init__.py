"""mstar_transport: tensors between processes on one host through mstar-transport's shared-memory arena,
zero-copy, beside JVM workers (the format: docs/format.md)."""
from .arena import SegmentShrunkError
from .endpoint import CLOSED, CONSUMER_DIED, PARTIAL, REFUSED, Claim, Endpoint, Listener, Outcome, Received
from .format import DescriptorFormatError
from .shm import EntityInUseError, MailboxVersionError, PeerUnavailableError

__all__ = ["Endpoint", "Listener", "Outcome", "Claim", "Received", "DescriptorFormatError", "EntityInUseError",
           "PeerUnavailableError", "MailboxVersionError", "SegmentShrunkError", "CONSUMER_DIED", "REFUSED", "CLOSED",
           "PARTIAL"]
