-- spend.lua — per-execution spend ledgers on budgets (operations §9.4, §9.5) and the budget reconciler's
-- breach marker (server scanner #9). Our additions beside the 47 contract functions; ff_record_spend and
-- ff_release_budget keep upstream's names and KEYS/ARGV orders.
--
-- Keys touched (all on the budget's partition {b:M}):
--   B          ff:budget:{b:M}:<bid>                   HASH  breach_count, last_breach_at/dim, soft_breach_count,
--                                                            last_updated_at (W); existence, reset_interval_ms (R)
--   B:limits   ff:budget:{b:M}:<bid>:limits            HASH  hard:<dim>, soft:<dim> (R)
--   B:usage    ff:budget:{b:M}:<bid>:usage             HASH  <dim> -> integer (RW); breached_at marker (RW)
--   B:bex      ff:budget:{b:M}:<bid>:by_exec:<eid>     HASH  <dim> -> this execution's attributed spend (RW)
--   B:bexi     ff:budget:{b:M}:<bid>:by_exec:index     SET   eids with a ledger (RW)
--   usage dedup ff:usagededup:{b:M}:<id>               STRING "1" PX 1 day (key name in ARGV)
--
-- ff_record_spend (KEYS 5, ARGV 1 + 2D + 3)
--   KEYS[1] B:usage · KEYS[2] B:limits · KEYS[3] B · KEYS[4] B:bex · KEYS[5] B:bexi
--   ARGV[1] D · ARGV[2i], ARGV[2i+1] dimension i and its non-negative integer delta (i = 1..D)
--   ARGV[2+2D] now_ms (caller now) · ARGV[3+2D] dedup key (full key name; "" = none) · ARGV[4+2D] eid
--   Rules of ff_report_usage_and_check (hard limits checked first: a breach applies nothing and counts;
--   soft breach reported after applying; dedup stamped only when applied), plus each applied delta is added
--   to the execution's ledger B:bex and the eid to B:bexi.
--   -> {1, "OK"} | {1, "ALREADY_APPLIED"} | {1, "HARD_BREACH", dim, current, hard}
--      | {1, "SOFT_BREACH", dim, new_value, soft} | {0, "invalid_input", msg} | {0, "budget_not_found"}
--
-- ff_release_budget (KEYS 3, ARGV 2)
--   KEYS[1] B:usage · KEYS[2] B:bex · KEYS[3] B:bexi
--   ARGV[1] budget_id · ARGV[2] eid
--   Subtracts the ledger's positive deltas from usage (never below 0), deletes the ledger, SREM the eid.
--   -> {1, "OK", "released"} | {1, "OK", "noop"} (no ledger)
--
-- ff_reconcile_budget_breach (ours; KEYS 4, ARGV 2)
--   KEYS[1] B · KEYS[2] B:limits · KEYS[3] B:usage · KEYS[4] budget_policies
--   ARGV[1] now_ms (caller now) · ARGV[2] budget_id
--   A budget id listed in budget_policies without a definition is removed from it ("pruned"; create
--   leaves one behind when it refuses its arguments). Budgets with a reset interval are skipped (their
--   resets clear usage). For a lifetime budget: when some
--   dimension's usage reached its hard limit (usage >= hard > 0) sets B:usage breached_at = now unless it
--   is already set; otherwise removes it.
--   -> {1, "OK", "breached" | "still_breached" | "cleared" | "ok" | "skipped" | "pruned"}

do
  local function is_uint_text(s)
    return type(s) == 'string' and string.match(s, '^%d+$') ~= nil and #s <= 18
  end

  redis.register_function('ff_record_spend', function(keys, args)
    local usage_key, limits_key, def_key, ledger_key, index_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local bad = ff_require_number(args[1], 'dim_count')
    if bad then return bad end
    local dim_count = tonumber(args[1])
    if dim_count < 1 or dim_count ~= math.floor(dim_count) then
      return ff_err('invalid_input', 'dim_count must be a positive integer')
    end
    local now_ms = args[2 + 2 * dim_count]
    local dedup_key = args[3 + 2 * dim_count]
    local eid = args[4 + 2 * dim_count]
    if now_ms == nil or eid == nil then
      return ff_err('invalid_input', 'missing now_ms, dedup key or execution id')
    end
    local names, deltas, limit_fields, seen = {}, {}, {}, {}
    for i = 1, dim_count do
      local name, delta = args[2 * i], args[2 * i + 1]
      if ff_empty(name) or name == 'breached_at' or name == '_init' or seen[name] then
        return ff_err('invalid_input', 'dimension ' .. i .. ' needs a distinct name')
      end
      if not is_uint_text(delta) then
        return ff_err('invalid_input', 'delta of ' .. name .. ' must be a non-negative integer')
      end
      seen[name] = true
      names[i] = name
      deltas[i] = delta
      limit_fields[2 * i - 1] = 'hard:' .. name
      limit_fields[2 * i] = 'soft:' .. name
    end
    if redis.call('EXISTS', def_key) == 0 then
      return ff_err('budget_not_found')
    end
    if not ff_empty(dedup_key) and redis.call('EXISTS', dedup_key) == 1 then
      return {1, 'ALREADY_APPLIED'}
    end

    local current = redis.call('HMGET', usage_key, unpack(names))
    local limits = redis.call('HMGET', limits_key, unpack(limit_fields))
    for i = 1, dim_count do
      local hard = tonumber(limits[2 * i - 1])
      if hard and hard > 0 then
        local cur = tonumber(current[i]) or 0
        if cur + tonumber(deltas[i]) > hard then
          redis.call('HINCRBY', def_key, 'breach_count', 1)
          redis.call('HSET', def_key, 'last_breach_at', now_ms, 'last_breach_dim', names[i],
            'last_updated_at', now_ms)
          return {1, 'HARD_BREACH', names[i], current[i] or '0', limits[2 * i - 1]}
        end
      end
    end

    local soft_dim, soft_value, soft_limit
    for i = 1, dim_count do
      local new_value = redis.call('HINCRBY', usage_key, names[i], deltas[i])
      redis.call('HINCRBY', ledger_key, names[i], deltas[i])
      if not soft_dim then
        local soft = tonumber(limits[2 * i])
        if soft and soft ~= 0 and new_value > soft then
          soft_dim, soft_value, soft_limit = names[i], new_value, limits[2 * i]
        end
      end
    end
    if not ff_empty(eid) then
      redis.call('SADD', index_key, eid)
    end
    return ff_usage_applied(def_key, dedup_key, now_ms, soft_dim, soft_value, soft_limit)
  end)

  redis.register_function('ff_release_budget', function(keys, args)
    local usage_key, ledger_key, index_key = keys[1], keys[2], keys[3]
    local budget_id, eid = args[1], args[2]
    if budget_id == nil or eid == nil then
      error('ff_release_budget: missing budget_id or execution id')
    end
    local ledger = redis.call('HGETALL', ledger_key)
    if #ledger == 0 then
      redis.call('SREM', index_key, eid)
      return ff_ok('noop')
    end
    for i = 1, #ledger, 2 do
      local delta = tonumber(ledger[i + 1]) or 0
      if delta > 0 then
        local cur = tonumber(redis.call('HGET', usage_key, ledger[i])) or 0
        local left = cur - delta
        if left < 0 then left = 0 end
        redis.call('HSET', usage_key, ledger[i], ff_int_text(left))
      end
    end
    redis.call('DEL', ledger_key)
    redis.call('SREM', index_key, eid)
    return ff_ok('released')
  end)

  redis.register_function('ff_reconcile_budget_breach', function(keys, args)
    local def_key, limits_key, usage_key, policies_key = keys[1], keys[2], keys[3], keys[4]
    local now_ms, budget_id = args[1], args[2]
    if not is_uint_text(now_ms) or ff_empty(budget_id) then
      return ff_err('invalid_input', 'now_ms must be an integer and budget_id given')
    end
    local interval = redis.call('HGET', def_key, 'reset_interval_ms')
    if interval == false and redis.call('EXISTS', def_key) == 0 then
      redis.call('SREM', policies_key, budget_id)
      return ff_ok('pruned')
    end
    if (tonumber(interval) or 0) > 0 then
      return ff_ok('skipped')
    end
    local limits = redis.call('HGETALL', limits_key)
    local breached = false
    for i = 1, #limits, 2 do
      local f = limits[i]
      if string.sub(f, 1, 5) == 'hard:' then
        local hard = tonumber(limits[i + 1]) or 0
        if hard > 0 then
          local used = tonumber(redis.call('HGET', usage_key, string.sub(f, 6))) or 0
          if used >= hard then
            breached = true
            break
          end
        end
      end
    end
    local marker = redis.call('HGET', usage_key, 'breached_at')
    local marked = marker ~= false and marker ~= '' and marker ~= '0'
    if breached then
      if marked then return ff_ok('still_breached') end
      redis.call('HSET', usage_key, 'breached_at', now_ms)
      return ff_ok('breached')
    end
    if marker ~= false then
      redis.call('HDEL', usage_key, 'breached_at')
      if marked then return ff_ok('cleared') end
    end
    return ff_ok('ok')
  end)
end
