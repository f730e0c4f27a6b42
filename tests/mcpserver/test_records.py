"""Each JSON-RPC method the server serves is recorded as its own action, and only those are."""

from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS

from audit.models import AuditEvent
from mcpserver.records import ACTIONS, client_request_id, client_text, secrets_sent
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


def test_a_client_request_id_is_kept_only_in_a_safe_shape():
    known = secrets_sent("Bearer plainKnownToken0123456789")
    assert client_request_id("req-01:a.b~c_d", known=known) == "req-01:a.b~c_d"
    for refused in (
        "req-1\n",
        "a" * 65,
        "req 1",
        "hbvpd_AbCdEf0123456789",
        "x-plainKnownToken0123456789",
    ):
        assert client_request_id(refused, known=known) == "", refused
    assert client_text("agent\x00/1 \u00e9 plainKnownToken0123456789", known=known) == (
        "agent?/1 ? [redacted]"
    )
