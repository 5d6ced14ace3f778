-- GET an authenticated path: BENCH_PATH, e.g. /v1/payments/pay_... or a list page with a cursor.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local common = require("common")

local path = os.getenv("BENCH_PATH") or error("BENCH_PATH is not set")
local req

function init(args)
  req = wrk.format("GET", path, common.headers())
end

function request()
  return req
end
