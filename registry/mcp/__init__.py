"""hyperbook's MCP client: its errors (`errors`), the KB tool's call contract (`contract`) and the
Streamable HTTP transport (`transport`). None of it touches the database; the discover and call
flow that does (pins, registrations, audit) is in registry.services."""
