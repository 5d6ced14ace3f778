-- Shared by the payd wrk scripts: the API key comes from the environment (BENCH_API_KEY),
-- so no secret is written into a script or a results file.
local M = {}

M.api_key = os.getenv("BENCH_API_KEY") or error("BENCH_API_KEY is not set")

function M.headers(extra)
  local h = { ["Authorization"] = "Bearer " .. M.api_key }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

-- Every thread gets a number in setup(), so per-thread counters never collide.
local next_thread = 0
function M.setup(thread)
  thread:set("thread_no", next_thread)
  next_thread = next_thread + 1
end

return M
