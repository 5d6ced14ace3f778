-- Replays: POST /v1/payments with the same BENCH_KEYS keys (replay-<nonce>-0 .. -N-1), created
-- beforehand with this exact body, so every request is answered from the stored response.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local common = require("common")

local account = os.getenv("BENCH_ACCOUNT") or error("BENCH_ACCOUNT is not set")
local nonce = os.getenv("BENCH_NONCE") or error("BENCH_NONCE is not set")
local nkeys = tonumber(os.getenv("BENCH_KEYS") or "100")
local body = string.format(
  '{"account_id":"%s","amount":4200,"currency":"USD","source":"tok_visa"}', account)
local reqs, i = {}, 0

setup = common.setup

function init(args)
  for k = 0, nkeys - 1 do
    reqs[k + 1] = wrk.format("POST", "/v1/payments",
                             common.headers({ ["Content-Type"] = "application/json",
                                              ["Idempotency-Key"] = string.format("replay-%s-%d", nonce, k) }),
                             body)
  end
  i = (thread_no or 0) * 37 % nkeys
end

function request()
  i = i % nkeys + 1
  return reqs[i]
end
