-- wrk script for bench/mcp_bench.py: MCP POSTs repeated on keep-alive connections.
--
-- Configured through the environment (set by mcp_bench.py):
--   MCP_BENCH_BODY    the JSON-RPC request body (required)
--   MCP_BENCH_TOKEN   bearer token; no Authorization header when empty
--   MCP_BENCH_PV      MCP-Protocol-Version header (default 2025-11-25)
--   MCP_BENCH_HEADERS more headers, one "Name: value" a line (optional)
--   MCP_BENCH_CHECK   "1": inspect every response body and count JSON-RPC errors and
--                     tool results with isError (costs the load generator a little, not the server)
-- At the end one line "MCP_BENCH_RESULT {json}" is printed: requests, duration, latency
-- percentiles in microseconds, socket errors, non-2xx/3xx responses (wrk counts status > 399),
-- and the counted JSON-RPC / tool errors.

-- MCP_BENCH_BODY may hold several bodies, one a line (JSON has no raw newline): each
-- connection's requests cycle through them.
local bodies_text = os.getenv("MCP_BENCH_BODY")
if bodies_text == nil or bodies_text == "" then
  error("MCP_BENCH_BODY must be set")
end
local bodies = {}
for line in string.gmatch(bodies_text, "[^\n]+") do
  table.insert(bodies, line)
end
local body = bodies[1]
local token = os.getenv("MCP_BENCH_TOKEN") or ""
local protocol_version = os.getenv("MCP_BENCH_PV") or "2025-11-25"
local check = os.getenv("MCP_BENCH_CHECK") == "1"

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = protocol_version
if token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end
-- Extra "Name: value" lines (the 2026-07-28 routing headers Mcp-Method / Mcp-Name).
for line in string.gmatch(os.getenv("MCP_BENCH_HEADERS") or "", "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  if name then
    wrk.headers[name] = value
  end
end

local threads = {}

-- Formatted once per thread; request() only picks the next one.
local formatted, turn = {}, 0
function init(args)
  for i, each in ipairs(bodies) do
    formatted[i] = wrk.format(nil, nil, nil, each)
  end
end

if #bodies > 1 then
  function request()
    turn = turn % #formatted + 1
    return formatted[turn]
  end
end

function setup(thread)
  table.insert(threads, thread)
end

rpc_errors = 0
tool_errors = 0
checked = 0

if check then
  function response(status, headers, response_body)
    checked = checked + 1
    if response_body ~= nil then
      if string.find(response_body, '"isError":true', 1, true) then
        tool_errors = tool_errors + 1
      elseif string.find(response_body, '"error":{', 1, true) then
        rpc_errors = rpc_errors + 1
      end
    end
  end
end

function done(summary, latency, requests)
  local rpc, tool, seen = 0, 0, 0
  for _, thread in ipairs(threads) do
    rpc = rpc + (thread:get("rpc_errors") or 0)
    tool = tool + (thread:get("tool_errors") or 0)
    seen = seen + (thread:get("checked") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'MCP_BENCH_RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f,"non2xx":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"timeouts":%d,"rpc_errors":%d,"tool_errors":%d,"checked":%d}\n',
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean, e.status, e.connect, e.read, e.write, e.timeout,
    rpc, tool, seen))
end
