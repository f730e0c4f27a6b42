"""hyperbook's MCP client: its errors (`errors`), the KB tool's call contract (`contract`) and the
Streamable HTTP transport (`transport`), none of which touches the database; beside them, the
discover and call flow that does (`calls`: pins, registrations, audit)."""
