-- POST /v1/payments with a fresh Idempotency-Key on every request: a random per-run prefix
-- (BENCH_NONCE), the thread number and a per-thread counter make each key unique.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local common = require("common")

local account = os.getenv("BENCH_ACCOUNT") or error("BENCH_ACCOUNT is not set")
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local body = string.format(
  '{"account_id":"%s","amount":4200,"currency":"USD","source":"tok_visa"}', account)
local before_key, after_key, counter

setup = common.setup

function init(args)
  -- thread_no is set by setup() in the thread's own Lua state
  math.randomseed(os.time() + (thread_no or 0) * 7919)
  local prefix = string.format("bench-%s-%d-%08x-", nonce, thread_no or 0,
                               math.random(0, 0x7fffffff))
  -- the request is formatted once, around a marker where each request's key goes: only the
  -- key's counter is new per request, so the load generator spends little of the CPUs it shares
  local marker = "\1KEY\1"
  local whole = wrk.format("POST", "/v1/payments",
                           common.headers({ ["Content-Type"] = "application/json",
                                            ["Idempotency-Key"] = marker }), body)
  local at = whole:find(marker, 1, true)
  before_key = whole:sub(1, at - 1) .. prefix
  after_key = whole:sub(at + #marker)
  counter = 0
end

function request()
  counter = counter + 1
  return before_key .. counter .. after_key
end
