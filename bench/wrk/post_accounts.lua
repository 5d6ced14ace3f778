-- POST /v1/accounts without an Idempotency-Key: every request is exactly one write job,
-- which is what the group-commit comparison needs.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local common = require("common")

local req

function init(args)
  req = wrk.format("POST", "/v1/accounts",
                   common.headers({ ["Content-Type"] = "application/json" }),
                   '{"currency":"USD","name":"bench"}')
end

function request()
  return req
end
