from tests.mcpserver.conftest import world  # noqa: F401  (re-exported fixture)
