-- POST /v1/payments with a fresh Idempotency-Key on every request: a random per-run prefix
-- (BENCH_NONCE), the thread number and a per-thread counter make each key unique.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local common = require("common")

local account = os.getenv("BENCH_ACCOUNT") or error("BENCH_ACCOUNT is not set")
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local body = string.format(
  '{"account_id":"%s","amount":4200,"currency":"USD","source":"tok_visa"}', account)
local prefix, counter

setup = common.setup

function init(args)
  -- thread_no is set by setup() in the thread's own Lua state
  math.randomseed(os.time() + (thread_no or 0) * 7919)
  prefix = string.format("bench-%s-%d-%08x-", nonce, thread_no or 0, math.random(0, 0x7fffffff))
  counter = 0
end

function request()
  counter = counter + 1
  return wrk.format("POST", "/v1/payments",
                    common.headers({ ["Content-Type"] = "application/json",
                                     ["Idempotency-Key"] = prefix .. counter }),
                    body)
end
