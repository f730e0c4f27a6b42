"""Each JSON-RPC method the server serves is recorded as its own action, and only those are."""

from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS

from audit.models import AuditEvent
from mcpserver.records import ACTIONS
from mcpserver.server import build_server


def test_every_method_the_server_serves_has_its_own_action_and_nothing_else_does():
    server = build_server()
    served = {
        method
        for method, _ in CLIENT_REQUESTS
        # initialize is the SDK runner's own, never a handler of the server's
        if method == "initialize" or server.get_request_handler(method) is not None
    }
    notifications = {method for method, _ in CLIENT_NOTIFICATIONS}  # each acknowledged
    assert set(ACTIONS) == served | notifications
    assert len(set(ACTIONS.values())) == len(ACTIONS)
    assert all(isinstance(action, AuditEvent.Action) for action in ACTIONS.values())
