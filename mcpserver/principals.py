"""Who is asking on /mcp: authenticated by the credentials' home, registry.delegations."""

from registry.delegations import Authentication, Principal, authenticate_token

__all__ = ["Authentication", "Principal", "authenticate_token"]
