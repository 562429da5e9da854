-- budget.lua — budgets (tag {b:M}) and admission blocking of executions (tag {fp:N})
-- (contract §5.31–§5.35).
--
-- Keys touched:
--   B                   ff:budget:{b:M}:<budget_id>              HASH definition / counters
--   B:limits            ff:budget:{b:M}:<budget_id>:limits       HASH hard:<dim>, soft:<dim>
--   B:usage             ff:budget:{b:M}:<budget_id>:usage        HASH <dim> -> integer usage
--   budget_resets       ff:idx:{b:M}:budget_resets               ZSET budget_id, score next_reset_at
--   budget_policies     ff:idx:{b:M}:budget_policies             SET budget ids
--   usage dedup         ff:usagededup:{b:M}:<id>                 STRING "1" PX 1 day (key name in ARGV)
--   E:core              ff:exec:{fp:N}:<eid>:core                HASH execution record
--   L:eligible / L:blocked:<kind>                                ZSETs of the execution's lane
--   (unblock and admission block write E:core and those sets through scheduling.lua's ff_runnable_move)
--
-- ff_create_budget (KEYS 5, ARGV 9 + 3D)
--   KEYS[1] B · KEYS[2] B:limits · KEYS[3] B:usage (not written) · KEYS[4] budget_resets
--   KEYS[5] budget_policies
--   ARGV[1] budget_id · ARGV[2] scope_type · ARGV[3] scope_id · ARGV[4] enforcement_mode
--   ARGV[5] on_hard_limit · ARGV[6] on_soft_limit · ARGV[7] reset_interval_ms ("0" = none)
--   ARGV[8] now_ms (caller now, verbatim) · ARGV[9] dimension count D
--   ARGV[10..9+D] names · ARGV[10+D..9+2D] hard limits · ARGV[10+2D..9+3D] soft limits
--   -> {1, "OK", id} | {1, "ALREADY_SATISFIED", id} | {0, "invalid_input", msg}
--
-- ff_report_usage_and_check (KEYS 3, ARGV 1 + 2D + 1 [+ 1])
--   KEYS[1] B:usage · KEYS[2] B:limits · KEYS[3] B
--   ARGV[1] D · ARGV[2..1+D] names · ARGV[2+D..1+2D] integer deltas · ARGV[2+2D] now_ms (caller now)
--   ARGV[3+2D] dedup key (full key name; ""/absent = no dedup)
--   -> {1, "OK"} | {1, "ALREADY_APPLIED"} | {1, "HARD_BREACH", dim, current, hard}
--      | {1, "SOFT_BREACH", dim, new_value, soft} | {0, "invalid_input", msg}
--
-- ff_reset_budget (KEYS 3, ARGV 2)
--   KEYS[1] B · KEYS[2] B:usage · KEYS[3] budget_resets
--   ARGV[1] budget_id · ARGV[2] now_ms (caller now)
--   -> {1, "OK", next_reset_at or "0"}
--
-- ff_unblock_execution (KEYS 3, ARGV 3)
--   KEYS[1] E:core · KEYS[2] source L:blocked:<kind> · KEYS[3] L:eligible
--   ARGV[1] execution_id · ARGV[2] now_ms (caller now) · ARGV[3] expected blocking_reason (""/absent = any)
--   -> {1, "OK", "unblocked"}
--
-- ff_block_execution_for_admission (KEYS 3, ARGV 4)
--   KEYS[1] E:core · KEYS[2] L:eligible · KEYS[3] target L:blocked:<kind>
--   ARGV[1] execution_id · ARGV[2] blocking_reason · ARGV[3] blocking_detail (absent -> "")
--   ARGV[4] now_ms (caller now; blocked-set score)
--   -> {1, "OK", "blocked"}

do
  -- HINCRBY accepts only plain integers; anything else must be refused before the first write.
  local function is_int_text(s)
    return type(s) == 'string' and string.match(s, '^%-?%d+$') ~= nil and #s <= 19
  end

  -- blocking_reason -> eligibility_state accepted by ff_block_execution_for_admission.
  local BLOCK_ELIGIBILITY = {
    waiting_for_budget = 'blocked_by_budget',
    waiting_for_quota = 'blocked_by_quota',
    waiting_for_capable_worker = 'blocked_by_route',
    paused_by_operator = 'blocked_by_operator',
    paused_by_policy = 'blocked_by_lane_state',
  }

  -- Eligibility states ff_unblock_execution may release (not blocked_by_lane_state: §10 row 10).
  local UNBLOCKABLE = {
    blocked_by_budget = true,
    blocked_by_quota = true,
    blocked_by_route = true,
    blocked_by_operator = true,
  }

  redis.register_function('ff_create_budget', function(keys, args)
    local def_key, limits_key = keys[1], keys[2]
    local resets_key, policies_key = keys[4], keys[5]
    local budget_id = args[1]
    local scope_type, scope_id = args[2], args[3]
    local enforcement_mode = args[4]
    local on_hard_limit, on_soft_limit = args[5], args[6]
    local reset_interval_raw = args[7]
    local now_ms = args[8]
    local dim_count_raw = args[9]

    -- Upstream SADDs the index first on every path; reading first lets the raise paths
    -- below leave nothing behind while every returned reply keeps that SADD.
    if redis.call('EXISTS', def_key) == 1 then
      redis.call('SADD', policies_key, budget_id)
      return {1, 'ALREADY_SATISFIED', budget_id}
    end
    local bad = ff_require_number(dim_count_raw, 'dim_count')
    if bad then
      redis.call('SADD', policies_key, budget_id)
      return bad
    end

    local dim_count = tonumber(dim_count_raw)
    local reset_interval = tonumber(reset_interval_raw)
    if reset_interval == nil then
      error('ff_create_budget: reset_interval_ms must be a number')
    end
    local next_reset_at
    if reset_interval > 0 then
      local now_num = tonumber(now_ms)
      if now_num == nil then
        error('ff_create_budget: now_ms must be a number when reset_interval_ms > 0')
      end
      next_reset_at = ff_int_text(now_num + reset_interval)
    end
    local limits = {}
    if dim_count >= 1 then
      if dim_count ~= math.floor(dim_count) then
        error('ff_create_budget: dimension count must be an integer')
      end
      for i = 1, dim_count do
        local name = args[9 + i]
        local hard = args[9 + dim_count + i]
        local soft = args[9 + 2 * dim_count + i]
        if name == nil or hard == nil or soft == nil then
          error('ff_create_budget: missing dimension arguments')
        end
        limits[#limits + 1] = 'hard:' .. name
        limits[#limits + 1] = hard
        limits[#limits + 1] = 'soft:' .. name
        limits[#limits + 1] = soft
      end
    end
    if budget_id == nil or scope_type == nil or scope_id == nil or enforcement_mode == nil
        or on_hard_limit == nil or on_soft_limit == nil or now_ms == nil then
      error('ff_create_budget: missing arguments')
    end

    redis.call('SADD', policies_key, budget_id)
    local def = {'HSET', def_key,
      'budget_id', budget_id,
      'scope_type', scope_type,
      'scope_id', scope_id,
      'enforcement_mode', enforcement_mode,
      'on_hard_limit', on_hard_limit,
      'on_soft_limit', on_soft_limit,
      'reset_interval_ms', reset_interval_raw,
      'breach_count', '0',
      'soft_breach_count', '0',
      'created_at', now_ms,
      'last_updated_at', now_ms}
    if next_reset_at then
      def[#def + 1] = 'next_reset_at'
      def[#def + 1] = next_reset_at
    end
    redis.call(unpack(def))
    if #limits > 0 then
      redis.call('HSET', limits_key, unpack(limits))
    end
    if next_reset_at then
      redis.call('ZADD', resets_key, next_reset_at, budget_id)
    end
    return ff_ok(budget_id)
  end)

  redis.register_function('ff_report_usage_and_check', function(keys, args)
    local usage_key, limits_key, def_key = keys[1], keys[2], keys[3]
    local bad = ff_require_number(args[1], 'dim_count')
    if bad then return bad end
    local dim_count = tonumber(args[1])
    if dim_count < 0 then dim_count = 0 end
    if dim_count ~= math.floor(dim_count) then
      error('ff_report_usage_and_check: dimension count must be an integer')
    end
    local now_ms = args[2 + 2 * dim_count]
    local dedup_key = args[3 + 2 * dim_count]

    -- Validate everything the writes need before the first one (Valkey does not roll back).
    if now_ms == nil then
      error('ff_report_usage_and_check: missing now_ms')
    end
    local names, deltas = {}, {}
    local limit_fields = {}
    for i = 1, dim_count do
      local name, delta = args[1 + i], args[1 + dim_count + i]
      if name == nil or not is_int_text(delta) then
        error('ff_report_usage_and_check: dimension ' .. i .. ' needs a name and an integer delta')
      end
      names[i] = name
      deltas[i] = delta
      limit_fields[2 * i - 1] = 'hard:' .. name
      limit_fields[2 * i] = 'soft:' .. name
    end

    if not ff_empty(dedup_key) and redis.call('EXISTS', dedup_key) == 1 then
      return {1, 'ALREADY_APPLIED'}
    end
    if dim_count == 0 then
      redis.call('HSET', def_key, 'last_updated_at', now_ms)
      if not ff_empty(dedup_key) then
        redis.call('SET', dedup_key, '1', 'PX', 86400000)
      end
      return {1, 'OK'}
    end

    local current = redis.call('HMGET', usage_key, unpack(names))
    local limits = redis.call('HMGET', limits_key, unpack(limit_fields))

    -- Check phase: any hard breach rejects the whole report (nothing is applied).
    for i = 1, dim_count do
      local hard_raw = limits[2 * i - 1]
      local hard = tonumber(hard_raw)
      if hard and hard > 0 then
        local cur = tonumber(current[i]) or 0
        if cur + tonumber(deltas[i]) > hard then
          redis.call('HINCRBY', def_key, 'breach_count', 1)
          redis.call('HSET', def_key, 'last_breach_at', now_ms, 'last_breach_dim', names[i],
            'last_updated_at', now_ms)
          return {1, 'HARD_BREACH', names[i], current[i] or '0', hard_raw}
        end
      end
    end

    -- Apply phase; the first soft limit exceeded is reported.
    local soft_dim, soft_value, soft_limit
    for i = 1, dim_count do
      local new_value = redis.call('HINCRBY', usage_key, names[i], deltas[i])
      if not soft_dim then
        local soft_raw = limits[2 * i]
        local soft = tonumber(soft_raw)
        if soft and soft ~= 0 and new_value > soft then
          soft_dim, soft_value, soft_limit = names[i], new_value, soft_raw
        end
      end
    end

    return ff_usage_applied(def_key, dedup_key, now_ms, soft_dim, soft_value, soft_limit)
  end)

  redis.register_function('ff_reset_budget', function(keys, args)
    local def_key, usage_key, resets_key = keys[1], keys[2], keys[3]
    local budget_id = args[1]
    local now_ms = args[2]

    local d = redis.call('HMGET', def_key, 'reset_interval_ms', 'reset_count')
    local interval = tonumber(d[1]) or 0
    local next_reset_at = '0'
    if interval > 0 then
      local now_num = tonumber(now_ms)
      if now_num == nil then
        error('ff_reset_budget: now_ms must be a number')
      end
      next_reset_at = ff_int_text(now_num + interval)
    end
    if now_ms == nil or budget_id == nil then
      error('ff_reset_budget: missing arguments')
    end

    local dims = redis.call('HKEYS', usage_key)
    if #dims > 0 then
      local zero = {}
      for i = 1, #dims do
        zero[2 * i - 1] = dims[i]
        zero[2 * i] = '0'
      end
      redis.call('HSET', usage_key, unpack(zero))
    end
    local fields = {'HSET', def_key,
      'reset_count', ff_int_text((tonumber(d[2]) or 0) + 1),
      'last_reset_at', now_ms,
      'last_updated_at', now_ms,
      'last_breach_at', '',
      'last_breach_dim', ''}
    if interval > 0 then
      fields[#fields + 1] = 'next_reset_at'
      fields[#fields + 1] = next_reset_at
      redis.call(unpack(fields))
      redis.call('ZADD', resets_key, next_reset_at, budget_id)
    else
      redis.call(unpack(fields))
      redis.call('ZREM', resets_key, budget_id)
    end
    return ff_ok(next_reset_at)
  end)

  redis.register_function('ff_unblock_execution', function(keys, args)
    local core_key, blocked_key, eligible_key = keys[1], keys[2], keys[3]
    local execution_id = args[1]
    local now_ms = args[2]
    local expected_reason = args[3]

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'eligibility_state', 'blocking_reason',
      'attempt_state', 'priority', 'created_at')
    if c[1] == false and redis.call('EXISTS', core_key) == 0 then
      return ff_err('execution_not_found')
    end
    if c[1] ~= 'runnable' or not UNBLOCKABLE[c[2]] then
      return ff_err('execution_not_eligible')
    end
    if not ff_empty(expected_reason) and expected_reason ~= c[3] then
      return ff_err('execution_not_eligible')
    end
    if now_ms == nil or execution_id == nil then
      error('ff_unblock_execution: missing arguments')
    end

    local attempt_state = c[4]
    if ff_empty(attempt_state) then attempt_state = 'pending_first_attempt' end
    ff_runnable_move(core_key, execution_id, {
      eligibility = 'eligible_now', reason = 'waiting_for_worker', detail = '', public = 'waiting',
      attempt_state = attempt_state, now = now_ms,
    }, blocked_key, eligible_key, ff_eligible_score(c[5], c[6]))
    return ff_ok('unblocked')
  end)

  redis.register_function('ff_block_execution_for_admission', function(keys, args)
    local core_key, eligible_key, blocked_key = keys[1], keys[2], keys[3]
    local execution_id = args[1]
    local blocking_reason = args[2]
    local blocking_detail = args[3] or ''
    local now_ms = args[4]

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'terminal_outcome',
      'current_lease_epoch', 'attempt_state')
    if c[1] == false and redis.call('EXISTS', core_key) == 0 then
      return ff_err('execution_not_found')
    end
    if c[1] == 'terminal' then
      return ff_err('execution_not_active', c[2] or '', c[3] or '')
    end
    if c[1] ~= 'runnable' then
      return ff_err('execution_not_eligible')
    end
    local eligibility = BLOCK_ELIGIBILITY[blocking_reason]
    if not eligibility then
      return ff_err('invalid_blocking_reason')
    end
    -- The score must parse before the core is rewritten (upstream would fail after the HSET).
    local score = tonumber(now_ms)
    if score == nil or score ~= score or execution_id == nil then
      error('ff_block_execution_for_admission: now_ms must be a number')
    end

    local attempt_state = c[4]
    if ff_empty(attempt_state) then attempt_state = 'pending_first_attempt' end
    ff_runnable_move(core_key, execution_id, {
      eligibility = eligibility, reason = blocking_reason, detail = blocking_detail, public = 'rate_limited',
      attempt_state = attempt_state, now = now_ms,
    }, eligible_key, blocked_key, score)
    return ff_ok('blocked')
  end)
end
